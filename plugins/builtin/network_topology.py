"""Volcano's network-topology-aware plugin (pkg/scheduler/plugins/network-topology-aware): a gang
with a `networkTopology` is placed within one HyperNode (`plugins.model.domains`), and among the
HyperNodes of a tier the one its binpacking score ranks first is tried first.

Arguments, as Volcano's:
  weight                                   the plugin's weight (default 1; negative: 1)
  hypernode.binpack.cpu / .memory          binpacking weights of cpu and memory (default 1)
  hypernode.binpack.resources              "nvidia.com/gpu, example.com/foo": more resources
  hypernode.binpack.resources.<name>       the weight of one of them (default 1)
  hypernode.binpack.normal-pod.enable      accepted (Volcano's node score for pods without a
  hypernode.binpack.normal-pod.fading      networkTopology; here kube-scheduler orders them)
  hypernode.gradient.evict.max-hypernodes  accepted (Volcano's cap on eviction domains)

Volcano enforces a networkTopology only with this plugin in the conf (without it its
HyperNodeGradientForJobFn offers the whole cluster): so does vulcan (`whole_gang`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plugins.framework.config_types import ConfigError, int_argument
from plugins.framework.extension_points import SessionPlugin
from plugins.model.domains import BinpackWeights

__all__ = ["NAME", "NetworkTopologyPlugin"]

NAME = "network-topology-aware"
WEIGHT = "weight"
CPU = "hypernode.binpack.cpu"
MEMORY = "hypernode.binpack.memory"
RESOURCES = "hypernode.binpack.resources"
NORMAL_POD_ENABLE = "hypernode.binpack.normal-pod.enable"
NORMAL_POD_FADING = "hypernode.binpack.normal-pod.fading"
EVICT_MAX = "hypernode.gradient.evict.max-hypernodes"


def _non_negative(arguments: Mapping[str, Any], key: str) -> int:
    value = int_argument(arguments, key, 1)
    return value if value >= 0 else 1  # Volcano: a negative weight falls back to the default


class NetworkTopologyPlugin(SessionPlugin):
    name = NAME
    helpers = ("binpack_weights",)

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        super().__init__(arguments or {})
        args = self.arguments
        self.weight = _non_negative(args, WEIGHT)
        weights = {"cpu": _non_negative(args, CPU), "memory": _non_negative(args, MEMORY)}
        listed = args.get(RESOURCES, "")
        if not isinstance(listed, str):
            raise ConfigError(f'arguments["{RESOURCES}"]: expected a comma-separated string')
        for resource in (r.strip() for r in listed.split(",")):
            if resource:
                weights[resource] = _non_negative(args, f"{RESOURCES}.{resource}")
        self.weights = BinpackWeights(weights)
        self.normal_pod_enable = _bool(args, NORMAL_POD_ENABLE, True)
        self.normal_pod_fading = _float(args, NORMAL_POD_FADING, 0.8)
        self.evict_max = int_argument(args, EVICT_MAX, 8)

    def binpack_weights(self) -> BinpackWeights:
        return self.weights


def _bool(arguments: Mapping[str, Any], key: str, default: bool) -> bool:
    value = arguments.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f'arguments["{key}"]: expected true or false, not {value!r}')


def _float(arguments: Mapping[str, Any], key: str, default: float) -> float:
    value = arguments.get(key, default)
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f'arguments["{key}"]: expected a number, not {value!r}') from None
