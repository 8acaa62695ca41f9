"""Hollow kubelets for the embedded cluster: simulated nodes that register, heartbeat and run
pods the way real kubelets report them (see `sim.kubelet.hollow`)."""

from sim.kubelet.hollow import HollowKubelets as HollowKubelets
from sim.kubelet.profiles import DEFAULT_PROFILE as DEFAULT_PROFILE
from sim.kubelet.profiles import NodeProfile as NodeProfile
from sim.kubelet.profiles import expand_profiles as expand_profiles
from sim.kubelet.profiles import parse_node_profile as parse_node_profile
