"""Volcano's nodeorder plugin (pkg/scheduler/plugins/nodeorder/nodeorder.go), resource part.

Volcano's nodeorder runs kube-scheduler score plugins inside its own session and adds up each
plugin's 0..100 score times a weight. We reproduce the three resource scorers, with
kube-scheduler's integer arithmetic (pkg/scheduler/framework/plugins/noderesources):

* LeastAllocated (cpu 50, memory 50): per resource (allocatable − requested) × 100 / allocatable,
  0 when requested exceeds allocatable; integer weighted mean. Favours emptier nodes.
* MostAllocated (cpu 1, memory 1): per resource min(requested, allocatable) × 100 / allocatable;
  integer weighted mean. Favours fuller nodes.
* BalancedAllocation (cpu, memory, nvidia.com/gpu): (1 − std(fractions)) × 100 truncated, where
  fraction = requested / allocatable capped at 1. A resource the node lacks is left out, and so is
  the GPU when the pod does not request one (kube bypasses unrequested extended resources). A pod
  requesting none of the three gets 0 (kube skips best-effort pods, k/k#129138).

"requested" is the node's requests plus the pod's. A resource with allocatable 0 is left out of
every mean (its weight does not count).

The remaining weights (nodeaffinity, podaffinity, tainttoleration, imagelocality,
podtopologyspread) are parsed and kept but contribute 0 here: in the extender design the stock
kube-scheduler's in-tree plugins already score those properties for every node, and scoring them
again would count them twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from plugins.framework.config_types import ConfigError, int_argument

if TYPE_CHECKING:  # annotations only: plugins.framework.node_order imports this module
    from core.resources import ResourceVector
    from plugins.model.node_state import NodeState

__all__ = ["NodeOrderPlugin"]

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"

# kube-scheduler's MaxNodeScore.
_MAX = 100
# Volcano configures LeastAllocated with cpu 50 / memory 50 and MostAllocated with 1 / 1.
_LEAST_CPU_WEIGHT = 50
_LEAST_MEMORY_WEIGHT = 50
_MOST_CPU_WEIGHT = 1
_MOST_MEMORY_WEIGHT = 1

# Argument key -> default weight, as Volcano's calculateWeight initialises them.
_DEFAULT_WEIGHTS: dict[str, int] = {
    "leastrequested.weight": 1,
    "mostrequested.weight": 0,
    "balancedresource.weight": 1,
    "nodeaffinity.weight": 2,
    "podaffinity.weight": 2,
    "tainttoleration.weight": 3,
    "imagelocality.weight": 1,
    "podtopologyspread.weight": 2,
}


class NodeOrderPlugin:
    """Resource-based node ordering with Volcano's weights; see the module docstring."""

    name = "nodeorder"

    __slots__ = (
        "balanced_resource_weight",
        "image_locality_weight",
        "least_requested_weight",
        "most_requested_weight",
        "node_affinity_weight",
        "pod_affinity_weight",
        "pod_topology_spread_weight",
        "taint_toleration_weight",
    )

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args: Mapping[str, Any] = arguments or {}
        for key in args:
            if key not in _DEFAULT_WEIGHTS:
                raise ConfigError(f'arguments: unknown nodeorder argument "{key}"')
        weights = {key: int_argument(args, key, value) for key, value in _DEFAULT_WEIGHTS.items()}
        # Volcano does not reset negative nodeorder weights; neither do we.
        self.least_requested_weight: int = weights["leastrequested.weight"]
        self.most_requested_weight: int = weights["mostrequested.weight"]
        self.balanced_resource_weight: int = weights["balancedresource.weight"]
        # Kept for completeness and reporting; scored by kube-scheduler itself (module docstring).
        self.node_affinity_weight: int = weights["nodeaffinity.weight"]
        self.pod_affinity_weight: int = weights["podaffinity.weight"]
        self.taint_toleration_weight: int = weights["tainttoleration.weight"]
        self.image_locality_weight: int = weights["imagelocality.weight"]
        self.pod_topology_spread_weight: int = weights["podtopologyspread.weight"]

    @property
    def active(self) -> bool:
        """False when every resource scorer has weight 0, i.e. the plugin always adds 0 here."""
        return bool(
            self.least_requested_weight
            or self.most_requested_weight
            or self.balanced_resource_weight
        )

    def score(self, request: ResourceVector, node: NodeState) -> float:
        return self.node_scorer(request)(node)

    def placement_weights(self) -> tuple[int, int]:
        return max(self.most_requested_weight, 0), max(self.least_requested_weight, 0)

    def column_scorer(
        self, request: ResourceVector, rows: Mapping[str, int]
    ) -> Callable[[Any, Any], Any] | None:
        """`node_scorer`'s arithmetic with numpy over the candidates' columns, for the common
        weighting (least-requested and balanced-resource on, most-requested off) on nodes that
        report cpu and memory; None (or a None result) leaves the rest to `node_scorer`."""
        least_weight = self.least_requested_weight
        balanced_weight = self.balanced_resource_weight
        want_cpu, want_memory, want_gpu = request.get(CPU), request.get(MEMORY), request.get(GPU)
        with_gpu = want_gpu > 0
        balanced_on = balanced_weight != 0 and bool(want_cpu or want_memory or want_gpu)
        if self.most_requested_weight or not least_weight or not balanced_on:
            return None
        if CPU not in rows or MEMORY not in rows or (with_gpu and GPU not in rows):
            return None
        ci, mi, gi = rows[CPU], rows[MEMORY], rows.get(GPU, 0)

        def score(cap: Any, used: Any) -> Any:
            cpu_cap, memory_cap = cap[ci], cap[mi]
            if not ((cpu_cap > 0).all() and (memory_cap > 0).all()):
                return None
            cpu = used[ci] + want_cpu
            memory = used[mi] + want_memory
            # least-requested, with kube-scheduler's integer arithmetic as in node_scorer
            weighted = np.where(
                cpu <= cpu_cap, (cpu_cap - cpu) * _MAX // cpu_cap * _LEAST_CPU_WEIGHT, 0
            )
            weighted = weighted + np.where(
                memory <= memory_cap,
                (memory_cap - memory) * _MAX // memory_cap * _LEAST_MEMORY_WEIGHT,
                0,
            )
            weight_sum = _LEAST_CPU_WEIGHT + _LEAST_MEMORY_WEIGHT
            total = (weighted // weight_sum * least_weight).astype(np.float64)
            cpu_fraction = np.minimum(cpu / cpu_cap, 1.0)
            memory_fraction = np.minimum(memory / memory_cap, 1.0)
            std = np.abs((cpu_fraction - memory_fraction) / 2)
            if with_gpu:
                gpu_cap = cap[gi]
                has_gpu = gpu_cap > 0
                gpu = (used[gi] + want_gpu) / np.where(has_gpu, gpu_cap, 1)
                gpu_fraction = np.minimum(gpu, 1.0)
                # node_scorer's operation order, so the floats are the same
                mean = (cpu_fraction + memory_fraction + gpu_fraction) / 3
                three = np.sqrt(
                    (
                        (cpu_fraction - mean) * (cpu_fraction - mean)
                        + (memory_fraction - mean) * (memory_fraction - mean)
                        + (gpu_fraction - mean) * (gpu_fraction - mean)
                    )
                    / 3
                )
                std = np.where(has_gpu, three, std)
            return total + (1 - std) * _MAX // 1 * balanced_weight

        return score

    def node_scorer(self, request: ResourceVector) -> Callable[[NodeState], float]:
        """A per-node scoring function for `request`, everything node-independent hoisted."""
        least_weight = self.least_requested_weight
        most_weight = self.most_requested_weight
        balanced_weight = self.balanced_resource_weight
        want_cpu = request.get(CPU)
        want_memory = request.get(MEMORY)
        want_gpu = request.get(GPU)
        # kube: an extended resource the pod does not request is not part of the balance.
        with_gpu = want_gpu > 0
        # kube: a pod requesting none of the balanced resources is not balance-scored at all.
        balanced_on = balanced_weight != 0 and bool(want_cpu or want_memory or want_gpu)

        sqrt = math.sqrt

        # Hot path: runs once per candidate node. It avoids builtin calls (min, abs, int cost
        # ~0.1-0.2 us each here) in favour of plain comparisons, and lists except in rare cases.
        def score(node: NodeState) -> float:
            allocatable = node.allocatable
            used = node.requested
            cpu_cap = allocatable.get("cpu")
            memory_cap = allocatable.get("memory")
            cpu = used.get("cpu") + want_cpu
            memory = used.get("memory") + want_memory
            total = 0.0

            if least_weight:
                weighted = weight_sum = 0
                if cpu_cap > 0:
                    if cpu <= cpu_cap:
                        weighted += (cpu_cap - cpu) * _MAX // cpu_cap * _LEAST_CPU_WEIGHT
                    weight_sum += _LEAST_CPU_WEIGHT
                if memory_cap > 0:
                    if memory <= memory_cap:
                        weighted += (
                            (memory_cap - memory) * _MAX // memory_cap * _LEAST_MEMORY_WEIGHT
                        )
                    weight_sum += _LEAST_MEMORY_WEIGHT
                if weight_sum:
                    total += weighted // weight_sum * least_weight

            if most_weight:
                weighted = weight_sum = 0
                if cpu_cap > 0:
                    # Requested beyond allocatable counts as full (pods without requests).
                    part = cpu if cpu < cpu_cap else cpu_cap
                    weighted += part * _MAX // cpu_cap * _MOST_CPU_WEIGHT
                    weight_sum += _MOST_CPU_WEIGHT
                if memory_cap > 0:
                    part = memory if memory < memory_cap else memory_cap
                    weighted += part * _MAX // memory_cap * _MOST_MEMORY_WEIGHT
                    weight_sum += _MOST_MEMORY_WEIGHT
                if weight_sum:
                    total += weighted // weight_sum * most_weight

            if balanced_on:
                gpu_cap = allocatable.get(GPU) if with_gpu else 0
                if cpu_cap > 0 and memory_cap > 0:
                    cpu_fraction = cpu / cpu_cap
                    if cpu_fraction > 1.0:
                        cpu_fraction = 1.0
                    memory_fraction = memory / memory_cap
                    if memory_fraction > 1.0:
                        memory_fraction = 1.0
                    if gpu_cap > 0:
                        gpu_fraction = (used.get(GPU) + want_gpu) / gpu_cap
                        if gpu_fraction > 1.0:
                            gpu_fraction = 1.0
                        # Same operation order as kube's loop, so the float result is identical.
                        mean = (cpu_fraction + memory_fraction + gpu_fraction) / 3
                        std = sqrt(
                            (
                                (cpu_fraction - mean) * (cpu_fraction - mean)
                                + (memory_fraction - mean) * (memory_fraction - mean)
                                + (gpu_fraction - mean) * (gpu_fraction - mean)
                            )
                            / 3
                        )
                    else:
                        # kube's two-resource shortcut |f1 - f2| / 2.
                        std = (cpu_fraction - memory_fraction) / 2
                        if std < 0.0:
                            std = -std
                    # Go's int64() truncates; the value is >= 50, so floor is the same.
                    total += (1 - std) * _MAX // 1 * balanced_weight
                else:
                    # A node that does not report cpu or memory: rare, take the general route.
                    fractions = []
                    if cpu_cap > 0:
                        fractions.append(min(cpu / cpu_cap, 1.0))
                    if memory_cap > 0:
                        fractions.append(min(memory / memory_cap, 1.0))
                    if gpu_cap > 0:
                        fractions.append(min((used.get(GPU) + want_gpu) / gpu_cap, 1.0))
                    total += _balanced_score(fractions) * balanced_weight

            return total

        return score


def _balanced_score(fractions: list[float]) -> int:
    """kube-scheduler's balancedResourceScorer: (1 − population std) × 100, truncated."""
    count = len(fractions)
    if count == 2:
        # kube's shortcut for two resources; the same value as the general formula.
        std = abs((fractions[0] - fractions[1]) / 2)
    elif count > 2:
        mean = sum(fractions) / count
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / count)
    else:
        std = 0.0
    return int((1 - std) * _MAX)
