"""A gang stranded by a lost node on a real control plane (`tests.e2e.stranded`): the real node
lifecycle controller marks the failed hollow node, the taint eviction controller evicts its
members (tolerations of 1 s set on kube-apiserver), nobody confirms them gone; vulcan evicts
the survivors rather than run half a gang, and the job runs whole again once the node is back."""

from __future__ import annotations

import pytest

from tests.e2e.stranded import a_gang_stranded_by_a_lost_node_is_evicted_and_runs_whole_again
from tests.real.conftest import RealCluster

pytestmark = pytest.mark.real

NODE_PROFILES = ["count=2,cpu=8,memory=32Gi"]
POD_DURATION = "forever"
APISERVER_FLAGS = (
    "--default-not-ready-toleration-seconds=1",
    "--default-unreachable-toleration-seconds=1",
)
# Above the hollow kubelets' lease renewal (10 s), as the soak on a real control plane has it.
CONTROLLER_MANAGER_FLAGS = ("--node-monitor-grace-period=20s",)


def test_a_gang_stranded_by_a_lost_node_is_evicted_and_runs_whole_again(
    cluster: RealCluster,
) -> None:
    a_gang_stranded_by_a_lost_node_is_evicted_and_runs_whole_again(cluster)
