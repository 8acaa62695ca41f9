"""Volcano's binpack plugin (pkg/scheduler/plugins/binpack/binpack.go): best-fit node scoring.

Score(task, node) = 100 × binpack.weight × Σ_r w_r·(used_r + req_r)/allocatable_r / Σ_r w_r over
the resources r the task requests (> 0) that have a configured weight. Fuller nodes score higher,
so tasks pack onto few nodes and whole nodes stay free for large jobs.

Arguments (integers, or strings holding integers; all default 1):
  binpack.weight                  the plugin's overall weight; 0 disables it (Volcano registers no
                                  NodeOrderFn). Not reset when negative: Volcano keeps a negative
                                  weight, which turns the plugin into a spreader.
  binpack.cpu, binpack.memory     per-resource weights; negative values reset to 1
  binpack.resources               comma-separated extra resources, e.g. "nvidia.com/gpu"
  binpack.resources.<name>        weight of a listed extra resource; negative resets to 1
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from plugins.framework.config_types import ConfigError, int_argument

if TYPE_CHECKING:  # annotations only: plugins.framework.node_order imports this module
    from core.resources import ResourceVector
    from plugins.model.node_state import NodeState

__all__ = ["BinpackPlugin"]

_WEIGHT = "binpack.weight"
_CPU = "binpack.cpu"
_MEMORY = "binpack.memory"
_RESOURCES = "binpack.resources"
_RESOURCE_PREFIX = _RESOURCES + "."

# kube-scheduler's MaxNodeScore.
_MAX_NODE_SCORE = 100

# Volcano's Resource keeps the pod count outside its resource names (MaxTaskNum), so binpack never
# sees "pods" even when a user lists it; our vectors carry it like any other resource.
_IGNORED = frozenset({"pods"})


class BinpackPlugin:
    """Binpack scoring with Volcano's argument rules; see the module docstring."""

    name = "binpack"

    __slots__ = ("resource_weights", "weight")

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args: Mapping[str, Any] = arguments or {}
        self.weight: int = int_argument(args, _WEIGHT, 1)

        extra = args.get(_RESOURCES, "")
        if not isinstance(extra, str):
            raise ConfigError(
                f'arguments["{_RESOURCES}"]: expected a comma-separated string of resource'
                f" names, not {extra!r}"
            )
        weights: dict[str, int] = {}
        for item in extra.split(","):
            resource = item.strip()
            if resource:
                weights[resource] = _resource_weight(args, _RESOURCE_PREFIX + resource)
        # Set last, as Volcano does: binpack.cpu / binpack.memory win over a "cpu" listed in
        # binpack.resources.
        weights["cpu"] = _resource_weight(args, _CPU)
        weights["memory"] = _resource_weight(args, _MEMORY)
        # Resource name -> weight, the resources binpack considers (only those the task requests
        # count for a given task).
        self.resource_weights: dict[str, int] = weights

        known = {_WEIGHT, _CPU, _MEMORY, _RESOURCES}
        known.update(_RESOURCE_PREFIX + r for r in weights if r not in ("cpu", "memory"))
        for key in args:
            if key not in known:
                if key.startswith(_RESOURCE_PREFIX):
                    # Volcano ignores such a weight; it is almost certainly a forgotten listing.
                    resource = key[len(_RESOURCE_PREFIX) :]
                    raise ConfigError(
                        f'arguments["{key}"]: "{resource}" is not listed in {_RESOURCES}'
                    )
                raise ConfigError(f'arguments: unknown binpack argument "{key}"')

    @property
    def active(self) -> bool:
        """False when binpack.weight is 0: Volcano then registers no node-order function."""
        return self.weight != 0

    def score(self, request: ResourceVector, node: NodeState) -> float:
        return self.node_scorer(request)(node)

    def placement_weights(self) -> tuple[int, int]:
        return max(self.weight, 0), 0

    def _terms(self, request: ResourceVector) -> tuple[tuple[str, int, int], ...]:
        # Resources the task asks for and binpack weighs. Weight-0 resources add 0 to both sums
        # and Volcano skips their capacity check too, so they can be dropped up front.
        return tuple(
            (resource, weight, amount)
            for resource, weight in self.resource_weights.items()
            if weight > 0 and resource not in _IGNORED and (amount := request.get(resource)) > 0
        )

    def column_scorer(
        self, request: ResourceVector, rows: Mapping[str, int]
    ) -> Callable[[Any, Any], Any] | None:
        """`node_scorer`'s arithmetic with numpy over the candidates' columns; None when a
        weighed resource has no column (or a weight large enough to overflow the products)."""
        terms = self._terms(request)
        if any(resource not in rows or weight >= 128 for resource, weight, _ in terms):
            return None
        weight_sum = sum(weight for _, weight, _ in terms)
        if weight_sum == 0 or self.weight == 0:
            return lambda cap, used: np.zeros(cap.shape[1], np.float64)
        factor = float(_MAX_NODE_SCORE * self.weight)
        indexed = tuple((rows[resource], weight, amount) for resource, weight, amount in terms)

        def score(cap: Any, used: Any) -> Any:
            total = np.zeros(cap.shape[1], np.float64)
            overfull = np.zeros(cap.shape[1], bool)
            for index, weight, amount in indexed:
                capacity = cap[index]
                after = used[index] + amount
                has = capacity > 0
                overfull |= has & (after > capacity)
                total = total + np.where(has, after * weight / np.where(has, capacity, 1), 0.0)
            return np.where(overfull, 0.0, total / weight_sum * factor)

        return score

    def node_scorer(self, request: ResourceVector) -> Callable[[NodeState], float]:
        """A per-node scoring function for `request`, with everything node-independent hoisted.

        The returned closure is what runs once per candidate node, so it only reads the node's
        vectors and does float arithmetic.
        """
        terms = self._terms(request)
        weight_sum = sum(weight for _, weight, _ in terms)
        if weight_sum == 0 or self.weight == 0:
            return _zero
        factor = float(_MAX_NODE_SCORE * self.weight)

        def score(node: NodeState) -> float:
            allocatable = node.allocatable
            used = node.requested
            total = 0.0
            for resource, weight, amount in terms:
                capacity = allocatable.get(resource)
                if capacity <= 0:
                    # Volcano returns 0 for this resource before its fit check: the node does not
                    # offer it, the weight still counts (predicates reject such nodes anyway).
                    continue
                after = used.get(resource) + amount
                if after > capacity:
                    return 0.0  # does not fit: the whole score is 0
                total += after * weight / capacity
            # Volcano's order of operations: divide by the weight sum, then scale.
            return total / weight_sum * factor

        return score


def _resource_weight(args: Mapping[str, Any], key: str) -> int:
    weight = int_argument(args, key, 1)
    return 1 if weight < 0 else weight


def _zero(node: NodeState) -> float:
    return 0.0
