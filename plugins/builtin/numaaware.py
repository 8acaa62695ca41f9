"""Volcano's numa-aware plugin (pkg/scheduler/plugins/numaaware): a Guaranteed pod's pinned cpus
must align with the NUMA cells of a node whose kubelet runs the static cpu manager, under the
node's topology-manager policy (`plugins.model.numa_fit`), as each node's Numatopology reports
them; among the nodes that admit it, fewer cells used scores higher.

Volcano registers it as `numa-aware`; `numaaware` (its package's name) is accepted too. Its one
argument is Volcano's: `weight` (integer, default 1), the factor of its score. As in Volcano the
filter applies only when a conf names the plugin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.numa import NumaAsk
from plugins.framework.config_types import SchedulerConfig, int_argument
from plugins.model.numa_fit import NumaNodes

__all__ = ["NAMES", "NumaAwarePlugin", "NumaSettings", "numa_scores", "numa_settings"]

NAMES = ("numa-aware", "numaaware")
WEIGHT = "weight"
MAX_NODE_SCORE = 100  # Volcano's DefaultMaxNodeScore


class NumaAwarePlugin:
    """See the module docstring."""

    name = "numa-aware"
    helpers = ("refusal", "scores")

    __slots__ = ("weight",)

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.weight: int = int_argument(arguments or {}, WEIGHT, 1)

    def refusal(self, nodes: NumaNodes, ask: NumaAsk | None, node: str) -> str | None:
        """Why `node` cannot take a pod asking `ask` (None: it can)."""
        return nodes.reason(ask, node)

    def scores(self, nodes: NumaNodes, ask: NumaAsk, names: Sequence[str]) -> list[float]:
        return numa_scores(nodes, ask, names, self.weight)


def numa_scores(nodes: NumaNodes, ask: NumaAsk, names: Iterable[str], weight: int) -> list[float]:
    """Volcano's batch node order: the cells each node's assignment uses, scaled to 0..100
    reversed (the fewest cells score 100; a node where nothing is assigned counts 0 cells)
    and multiplied by `weight`."""
    counts = [nodes.verdict(ask, name).cells_used for name in names]
    most = max(counts, default=0)
    if most == 0:
        return [float(MAX_NODE_SCORE * weight)] * len(counts)
    return [float((MAX_NODE_SCORE - MAX_NODE_SCORE * c // most) * weight) for c in counts]


@dataclass(frozen=True, slots=True)
class NumaSettings:
    """The conf's numa-aware entry: its plugin, whether it filters (enablePredicate) and
    whether it scores (enableNodeOrder), as Volcano's session asks each."""

    plugin: NumaAwarePlugin
    filters: bool
    scores: bool


def numa_settings(config: SchedulerConfig, plugins: Mapping[str, Any]) -> NumaSettings | None:
    """The conf's numa-aware entry under either name (its last), None if it names none."""
    found: NumaSettings | None = None
    for tier in config.tiers:
        for option in tier.plugins:
            plugin = plugins.get(option.name)
            if option.name in NAMES and isinstance(plugin, NumaAwarePlugin):
                filters = option.is_enabled("enablePredicate")
                found = NumaSettings(plugin, filters, option.is_enabled("enableNodeOrder"))
    return found
