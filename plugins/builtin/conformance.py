"""Volcano's `conformance` plugin: critical pods are never
evicted — priority classes `system-cluster-critical` / `system-node-critical`, or namespace
`kube-system` (`plugins.model.victims.is_critical`, decided per unit when it is built).

It abstains when it removes nothing, as Volcano does since its fix for #5896: otherwise its
list (every candidate) would decide its tier and hide the later tiers' rules, such as a
queue's deserved share (proportion, capacity) in reclaim."""

from __future__ import annotations

from collections.abc import Sequence

from plugins.framework.extension_points import PassState, Preemptor, SessionPlugin
from plugins.model.victims import VictimUnit


class ConformancePlugin(SessionPlugin):
    name = "conformance"

    def preemptable(
        self, preemptor: Preemptor, candidates: Sequence[VictimUnit], state: PassState
    ) -> list[VictimUnit] | None:
        return _not_critical(candidates)

    def reclaimable(
        self, preemptor: Preemptor, candidates: Sequence[VictimUnit], state: PassState
    ) -> list[VictimUnit] | None:
        return _not_critical(candidates)


def _not_critical(candidates: Sequence[VictimUnit]) -> list[VictimUnit] | None:
    kept = [unit for unit in candidates if not unit.critical]
    return None if len(kept) == len(candidates) else kept
