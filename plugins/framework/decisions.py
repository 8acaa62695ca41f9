"""What a session decides about a PodGroup, handed to the extender when it closes. A decision
changes nothing by itself: the extender applies it (reservations, evictions, status, events).

    Seen       nothing to decide: admitted already, or finished (its status is refreshed)
    Adopted    placed whole already and not admitted (e.g. after a restart): admitted now
    Enqueued   Pending -> Inqueue (a Volcano Job's pods get made), maybe on a promise of
               evicting `promise`
    Admitted   a whole-gang placement (`slots`), maybe after `evictions`
    Waiting    not now, and why (`reason`); `share` is what it asks when it waits only for its
               queue's share, `held` when it was held for its queue's starving gang,
               `dequeue` when an Inqueue group goes back to Pending (members vulcan never sees)
    Grown      one elastic member given a slot (maybe after evictions)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.resources import ResourceVector
from plugins.model.placement import Plan
from plugins.model.victims import VictimUnit

__all__ = [
    "ADMITTED",
    "ADOPT",
    "ALLOCATE",
    "DONE",
    "ENQUEUE",
    "Admitted",
    "Adopted",
    "Decision",
    "Enqueued",
    "Evictions",
    "Grown",
    "Promise",
    "Seen",
    "Waiting",
]

_ZERO = ResourceVector()

# What a visited PodGroup waits for (`plugins.framework.stages.stage_of`).
ADOPT = "adopt"  # placed whole already, not admitted yet (e.g. after a restart)
ADMITTED = "admitted"  # admitted: nothing to decide (its status is refreshed)
DONE = "done"  # completed and not admitted: nothing to decide
ENQUEUE = "enqueue"  # waits for the enqueue action
ALLOCATE = "allocate"  # waits for the allocate action (a whole-gang placement)


@dataclass(frozen=True, slots=True)
class Promise:
    """The job may be enqueued: once `units` are evicted (by `action`) its votes pass."""

    action: str  # "preempt" or "reclaim"
    units: tuple[VictimUnit, ...]

    def describe(self) -> str:
        """ "will preempt default/low (priority 10)" / "will reclaim from queue qa: ..." """
        names = ", ".join(_name(u) for u in self.units)
        if self.action == "preempt":
            return f"will preempt {names}"
        queues = sorted({u.queue for u in self.units})
        return f"will reclaim from queue {', '.join(queues)}: {names}"


def _name(unit: VictimUnit) -> str:
    if unit.elastic:
        return f"{unit.pods[0]} (elastic member of {unit.group}, priority {unit.priority})"
    if unit.group is not None:
        return f"{unit.group} (whole gang, {len(unit.pods)} pods, priority {unit.priority})"
    return f"{unit.pods[0]} (priority {unit.priority})"


@dataclass(frozen=True, slots=True)
class Evictions:
    action: str  # "reclaim" or "preempt"
    units: tuple[VictimUnit, ...]
    priority: int  # the preemptor's


@dataclass(frozen=True, slots=True)
class Decision:
    key: str
    queue: str
    stage: str
    action: str | None = None  # the action that decided ("enqueue", "allocate", "backfill")

    def summary(self) -> tuple[Any, ...]:
        """What two sessions must agree on (the memo's check compares these)."""
        return (type(self).__name__, self.key, self.stage, self.action)


@dataclass(frozen=True, slots=True)
class Seen(Decision):
    # An admitted gang's members beyond its minimum waiting for a node: backfill's to place.
    elastic: tuple[str, ...] = ()

    def summary(self) -> tuple[Any, ...]:
        return (*Decision.summary(self), self.elastic)


@dataclass(frozen=True, slots=True)
class Adopted(Decision):
    pass


@dataclass(frozen=True, slots=True)
class Enqueued(Decision):
    promise: Promise | None = None
    refused: str | None = None  # the votes' refusal the promise answers
    waits: str | None = None  # what it still waits for once Inqueue (its members, JobValid)

    def summary(self) -> tuple[Any, ...]:
        units = tuple(u.pods for u in self.promise.units) if self.promise else ()
        return (*Decision.summary(self), units, self.refused, self.waits)


@dataclass(frozen=True, slots=True)
class Admitted(Decision):
    plan: Plan = field(default_factory=lambda: Plan(ok=False))
    evictions: Evictions | None = None
    held: ResourceVector = _ZERO  # what the placed members request together

    @property
    def slots(self) -> dict[str, str]:
        return self.plan.slots

    def summary(self) -> tuple[Any, ...]:
        evicted = tuple(u.pods for u in self.evictions.units) if self.evictions else ()
        return (*Decision.summary(self), tuple(sorted(self.plan.slots.items())), evicted)


@dataclass(frozen=True, slots=True)
class Waiting(Decision):
    reason: str = ""
    share: ResourceVector | None = None  # waits only for its queue's share, asking this
    held: bool = False  # held for its queue's starving gang
    dequeue: bool = False  # an Inqueue group goes back to Pending: nothing can use its room
    unmade: bool = False  # refused by JobValid: its members are not all made yet

    def summary(self) -> tuple[Any, ...]:
        return (
            *Decision.summary(self),
            self.reason,
            self.share,
            self.held,
            self.dequeue,
            self.unmade,
        )


@dataclass(frozen=True, slots=True)
class Grown(Decision):
    pod: str = ""
    node: str = ""
    request: ResourceVector = _ZERO
    evictions: Evictions | None = None

    def summary(self) -> tuple[Any, ...]:
        evicted = tuple(u.pods for u in self.evictions.units) if self.evictions else ()
        return (*Decision.summary(self), self.pod, self.node, evicted)
