"""Node order: the session's node-order plugins (binpack, nodeorder) summed per node.

Pure policy: functions of the snapshot the caller passes in (no I/O, no asyncio, no imports from
the extender or controllers), so the extender, the simulator and tests share one implementation.

Scoring follows Volcano's Policy.NodeOrderFn (pkg/scheduler/framework/session_plugins.go): a
node's score is the **sum** over every tier and every plugin entry with `enableNodeOrder` (default
true) of that plugin's node-order score. Tier order does not matter for a sum, and there is no
normalisation between plugins: each returns its own 0..100×weight scale.

Volcano's quirk for a plugin listed twice is kept: the plugin instance is keyed by name, so the
last entry's arguments win, while every entry with enableNodeOrder adds its score again.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from core.resources import ResourceVector
from plugins.framework.config import SchedulerConfig
from plugins.framework.extension_points import registers
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy
from plugins.model.node_state import NodeState
from plugins.model.placement import Prefer

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "BatchScorePlugin",
    "Framework",
    "NodeState",
    "ScorePlugin",
]

# kube-scheduler's MaxExtenderPriority: extender scores are integers in 0..10.
MAX_EXTENDER_PRIORITY = 10


class ScorePlugin(Protocol):
    """A node-order plugin: Volcano's NodeOrderFn for one pod on one node."""

    name: str

    def score(self, request: ResourceVector, node: NodeState) -> float:
        """Raw score on kube-scheduler's 0..100 × weight scale (may be negative for odd weights)."""
        ...


@runtime_checkable
class BatchScorePlugin(ScorePlugin, Protocol):
    """A score plugin that prepares once per pod, then scores each node cheaply (the hot path).

    `node_scorer(request)(node)` must equal `score(request, node)`.
    """

    def node_scorer(self, request: ResourceVector) -> Callable[[NodeState], float]:
        """A function scoring `request` on one node, with the node-independent work done."""
        ...


# request -> per-node scoring function (a plugin's `node_scorer`).
NodeScorerFactory = Callable[[ResourceVector], Callable[[NodeState], float]]


class Framework:
    """The conf's node-order plugins (the session's `node_scorer` extension point), ready to
    score pods against nodes.

    Built from a `Policy` (the extender's: the same plugin instances), or from a conf alone
    (plugins vulcan does not implement are left out and listed in `unimplemented`). Bad
    arguments raise ConfigError naming the entry, e.g.
    `tiers[1].plugins[5].arguments["binpack.weight"]: expected an integer, not 'ten'`.
    """

    def __init__(self, config: SchedulerConfig | Policy) -> None:
        session = config if isinstance(config, Policy) else build_policy(config, require=False)
        self.session = session
        self.config = session.config
        self.score_plugins: list[ScorePlugin] = session.plugins_for("node_scorer")
        scoring = {plugin.name for plugin in self.score_plugins} | {"binpack", "nodeorder"}
        self.unimplemented: list[str] = []
        for tier in self.config.tiers:
            for option in tier.plugins:
                if option.name not in scoring and option.name not in self.unimplemented:
                    self.unimplemented.append(option.name)
        self._scorer_factories: list[NodeScorerFactory] = [
            plugin.node_scorer if isinstance(plugin, BatchScorePlugin) else _scorer_factory(plugin)
            for plugin in self.score_plugins
        ]

    @property
    def gang_placement(self) -> Prefer:
        """How a whole gang is laid out when admitted (`plugins.model.placement.plan_gang`'s
        `prefer`), from the conf's node order: "spread" (emptiest nodes first) when its
        plugins' spreading weight (nodeorder's leastrequested) outweighs their packing weight
        (binpack's weight plus nodeorder's mostrequested; each plugin's `placement_weights`),
        else "binpack" (fullest first; also on a tie, as in the default conf, where Volcano's
        two scores cancel out and packing keeps room whole for the next gang)."""
        pack = spread = 0
        for plugin in self.score_plugins:
            if registers(plugin, "placement_weights"):
                packs, spreads = plugin.placement_weights()  # type: ignore[attr-defined]
                pack, spread = pack + packs, spread + spreads
        return "spread" if spread > pack else "binpack"

    def column_scorer(
        self, request: ResourceVector, rows: Mapping[str, int]
    ) -> Callable[[Any, Any], Any] | None:
        """`score` over many nodes at once from their columns (allocatable, requested: int64
        arrays, one row per dimension at `rows[dimension]`): the sum of every score plugin's
        `column_scorer`. None, or a function returning None, when one plugin leaves this
        request to its per-node scorer."""
        parts = []
        for plugin in self.score_plugins:
            part = (
                plugin.column_scorer(request, rows)  # type: ignore[attr-defined]
                if registers(plugin, "column_scorer")
                else None
            )
            if part is None:
                return None
            parts.append(part)

        def total(cap: Any, used: Any) -> Any:
            summed = np.zeros(cap.shape[1], np.float64)
            for part in parts:
                result = part(cap, used)
                if result is None:
                    return None
                summed = summed + result
            return summed

        return total

    def score(self, request: ResourceVector, nodes: Sequence[NodeState]) -> list[float]:
        """Volcano's node score of `request` on each node: the sum over all score plugins."""
        factories = self._scorer_factories
        if not factories:
            return [0.0] * len(nodes)
        # map() keeps the per-node loop in C; only the plugins' own per-node code is Python.
        totals = list(map(factories[0](request), nodes))
        for factory in factories[1:]:
            totals = list(map(operator.add, totals, map(factory(request), nodes)))
        return totals

    def extender_scores(self, request: ResourceVector, nodes: Sequence[NodeState]) -> list[int]:
        """`score` scaled to kube-scheduler's extender range: ints 0..10, best candidate = 10.

        Scaled relative to the best candidate, round(10 × s / max) with halves rounded up, so the
        ordering among candidates survives the coarse integer range; kube-scheduler multiplies the
        result by the extender weight × 10. Negative scores count as 0, and when no node scores
        above 0 every node gets 0 (no preference).
        """
        return self.normalize(self.score(request, nodes))

    @staticmethod
    def normalize(scores: Sequence[float]) -> list[int]:
        """Raw `score` values scaled to ints 0..10 relative to the best (see extender_scores)."""
        best = max(scores, default=0.0)
        if best <= 0.0:
            return [0] * len(scores)
        scale = MAX_EXTENDER_PRIORITY / best
        # int(x + 0.5) rounds halves up for x >= 0 (Python's round() would round them to even).
        return [int(s * scale + 0.5) if s > 0.0 else 0 for s in scores]


def _scorer_factory(plugin: ScorePlugin) -> NodeScorerFactory:
    """Adapter for a plugin that only has `score(request, node)`."""
    return lambda request: functools.partial(plugin.score, request)
