"""The queues' accounting invariants, checked on every booking a session makes (issue 48): an
enqueue or an allocation never leaves a queue (or an ancestor) holding more than it may, and a
victim unit is promised to one job at a time. The votes and Allocatable are what keep them; a
`Breach` is a bug in those, reported (logged, counted, `/debug/invariants`), never silent.

- `inqueue-over-capability`: allocated + inqueue - elastic > realCapability after an enqueue or
  an allocation (Volcano's enqueue rule: elastic members are what reclaim and preempt take
  first, so the room enqueued jobs were promised exists once they go).
- `allocated-over-capability`: allocated > capability after an allocation.
- `victim-promised-twice`: a pod promised to a job while promised to another.

What a booking evicts (or, enqueued on a promise of eviction, was promised) frees its room
before the booking uses it: that room is the booking's. So is the `inqueue` a starving queue's
backfill phase lends a gang (what the queue's enqueued gangs waiting only for its share hold,
which they cannot use at this share: `plugins.actions.starvation`). A queue over its bounds
because the cluster shrank under it (a node went) is no booking's doing: only a dimension a
booking grew, and that is over its bound after it, counts (the votes refuse any growth there).
Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.resources import ResourceVector
from plugins.model.queue_share import (
    ShareModel,
    effective_capability,
    fmt,
    requested_dims,
    strip_pods,
)
from plugins.model.victims import VictimUnit, books_released

__all__ = [
    "ALLOCATED_OVER_CAPABILITY",
    "INQUEUE_OVER_CAPABILITY",
    "VICTIM_PROMISED_TWICE",
    "Books",
    "Breach",
    "booking_breaches",
    "books_before",
]

INQUEUE_OVER_CAPABILITY = "inqueue-over-capability"
ALLOCATED_OVER_CAPABILITY = "allocated-over-capability"
VICTIM_PROMISED_TWICE = "victim-promised-twice"


@dataclass(frozen=True, slots=True)
class Breach:
    """An invariant a booking broke: its kind, what it is about (a queue, a pod), the job whose
    decision broke it, and the numbers."""

    kind: str
    subject: str
    job: str
    detail: str

    def describe(self) -> dict[str, str]:
        return {"kind": self.kind, "subject": self.subject, "job": self.job, "detail": self.detail}


# queue -> (allocated + inqueue - elastic, allocated) as a booking found them
Books = dict[str, tuple[ResourceVector, ResourceVector]]


def books_before(model: ShareModel | None, queue: str) -> Books:
    """The numbers of `queue` and its ancestors the invariants read, before a booking."""
    if model is None:
        return {}
    out: Books = {}
    for name in model.chain(queue):
        share = model.shares.get(name)
        if share is not None:
            held = (share.allocated + share.inqueue).saturating_sub(share.elastic)
            out[name] = (held, share.allocated)
    return out


def booking_breaches(
    model: ShareModel | None,
    before: Books,
    job: str,
    booked: str = "",
    evicting: Iterable[VictimUnit] = (),
    lent: ResourceVector | None = None,
) -> list[Breach]:
    """What the booking of `job` broke, comparing the queues after it with `before`; `booked`
    says what the booking was (for the detail). The room of the units the booking evicts (or
    was promised) is its own: they go before it is used; so is the `inqueue` a backfill phase
    `lent` it (what its queue's gangs waiting for the share hold, `plugins.actions.starvation`)."""
    if model is None:
        return []
    found = []
    after = {name: books_before(model, name)[name] for name in before if name in model.shares}
    if lent is not None:
        freed = strip_pods(lent)
        after = {name: (held.saturating_sub(freed), a) for name, (held, a) in after.items()}
    for queue, freed, elastic in books_released(evicting):
        freed = strip_pods(freed)
        # What the books count as elastic leaves `allocated` and `elastic` alike.
        unheld = freed.saturating_sub(strip_pods(elastic))
        for name in model.chain(queue):
            if name in after:
                held, allocated = after[name]
                after[name] = (held.saturating_sub(unheld), allocated.saturating_sub(freed))
    for name, (held, allocated) in after.items():
        share = model.shares[name]
        was_held, was_allocated = before[name]
        grown = [d for d in requested_dims(held) if held.get(d) > was_held.get(d)]
        over = [d for d in grown if held.get(d) > share.real_capability.get(d)]
        if over:
            detail = "; ".join(
                f"{d}: allocated {fmt(d, share.allocated.get(d))} + inqueue "
                f"{fmt(d, share.inqueue.get(d))} - elastic {fmt(d, share.elastic.get(d))} > "
                f"realCapability {fmt(d, share.real_capability.get(d))}"
                for d in over
            )
            found.append(Breach(INQUEUE_OVER_CAPABILITY, name, job, _told(detail, booked)))
        capability = effective_capability(share.capability)
        bounded = [
            d
            for d in requested_dims(allocated)
            if d in capability
            and allocated.get(d) > was_allocated.get(d)
            and allocated.get(d) > capability.get(d)
        ]
        if bounded:
            detail = "; ".join(
                f"{d}: allocated {fmt(d, allocated.get(d))} > capability "
                f"{fmt(d, capability.get(d))}"
                for d in bounded
            )
            found.append(Breach(ALLOCATED_OVER_CAPABILITY, name, job, _told(detail, booked)))
    return found


def _told(detail: str, booked: str) -> str:
    return f"{detail} ({booked})" if booked else detail
