"""Volcano's reclaim action: work of other queues above their deserved share makes room for a
job whose queue may still grow (the session's Preemptive for its queue).
Its candidates are the preemptable units of other, reclaimable queues; the session's
Reclaimable (proportion, capacity: never below a queue's deserved share or guarantee) decides
which of them may go.

As preempt, it is planned with each placement (`plugins.actions.preempt`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from plugins.framework.extension_points import Preemptor
from plugins.model.victims import VictimUnit

if TYPE_CHECKING:
    from plugins.framework.session import Session

__all__ = ["NAME", "Reclaim", "accepted"]

NAME = "reclaim"


def accepted(ssn: Session, preemptor: Preemptor, units: Sequence[VictimUnit]) -> list[VictimUnit]:
    """The units reclaim may evict for `preemptor`: its candidates, then Reclaimable."""
    inputs = ssn.state.inputs
    candidates = [
        u
        for u in units
        if u.queue != preemptor.queue
        and (source := inputs.get(u.queue)) is not None
        and source.reclaimable
        and u.preemptable
    ]
    return ssn.reclaimable(preemptor, candidates)


class Reclaim:
    name = NAME

    def execute(self, ssn: Session) -> None:
        """Nothing of its own: planned with each placement (`plugins.actions.preempt`)."""
