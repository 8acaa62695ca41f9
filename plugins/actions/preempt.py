"""Volcano's preempt action: lower-priority work of the preemptor's own queue makes room for it.
Its candidates are the preemptable units of the same queue that are not
the preemptor's own job and of strictly lower priority (whatever the conf's plugins: two jobs of
equal priority must never evict each other's work); the session's Preemptable (its plugins by
tier) decides which of them may go.

vulcan plans a gang's evictions with its placement (a gang is placed whole or not at all): the
allocate action asks for them when a gang does not fit, and backfill for an elastic member, so
the action itself has no pass of its own over the jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from plugins.framework.extension_points import Preemptor
from plugins.model.victims import VictimUnit

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["NAME", "Preempt", "accepted"]

NAME = "preempt"


def candidate(unit: VictimUnit, preemptor: Preemptor) -> bool:
    return (
        unit.queue == preemptor.queue
        and unit.group != preemptor.group
        and unit.preemptable
        and unit.priority < preemptor.priority
    )


def accepted(ssn: Session, preemptor: Preemptor, units: Sequence[VictimUnit]) -> list[VictimUnit]:
    """The units preempt may evict for `preemptor`: its candidates, then Preemptable."""
    return ssn.preemptable(preemptor, [u for u in units if candidate(u, preemptor)])


class Preempt:
    name = NAME

    def execute(self, ssn: Session) -> None:
        """Nothing of its own: planned with each placement (the module docstring)."""
