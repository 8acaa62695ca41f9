"""The share model both queue plugins build on (`QueueShares`): Volcano's JobEnqueueable,
Allocatable and Overused checks over each queue's `QueueShare`, with the reasons' wording;
`plugins.model.proportion_shares` and `plugins.model.capacity_shares` fill in the shares and what
differs. Pure: no I/O."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Self

from core.resources import ResourceVector
from plugins.model.queue_share import QueueInput, QueueShare, fmt, requested_dims, strip_pods

__all__ = ["QueueShares"]


class QueueShares:
    """Hooks common to both plugins, over `shares` (filled in by the plugin's constructor).

    Subclasses say which queues a check walks (`chain`: the queue alone, or the queue and its
    ancestors for hierarchical capacity), what bounds an allocation (`_limit`), and supply
    `preemptive`, `victim_judge` and `queue_order`.
    """

    # Words of allocatable()'s reason: "queue x over its <what>: holds cpu 40, would hold 48
    # with this gang, <limit> 40"
    _limit_what = "share"
    _limit_name = "deserves"

    def __init__(self, queues: Iterable[QueueInput], shares: dict[str, QueueShare]) -> None:
        self.queues: dict[str, QueueInput] = {q.name: q for q in queues}
        self.shares = shares
        for share in shares.values():
            share.update_share()

    def clone(self) -> Self:
        """The same model, its shares copied: a session books into its own."""
        other = copy.copy(self)
        other.shares = {name: share.copy() for name, share in self.shares.items()}
        return other

    # -- structure (overridden by hierarchical capacity)

    def chain(self, queue: str) -> tuple[str, ...]:
        """The queue and the queues whose limits also bind it, nearest first."""
        return (queue,)

    def _reject(self, queue: str) -> str | None:
        """Why no job of this queue may be admitted or allocated at all, if so."""
        spec = self.queues.get(queue)
        if spec is None or queue not in self.shares:
            return f"queue {queue} does not exist"
        if not spec.open:
            return f"queue {queue} is {spec.state or 'not Open'}"
        return None

    def _limit(self, share: QueueShare) -> ResourceVector:
        return share.deserved

    def _who(self, queue: str, name: str) -> str:
        return f"queue {name}" if name == queue else f"queue {name} (ancestor of {queue})"

    # -- enqueue

    def enqueueable(self, queue: str, min_resources: ResourceVector | None) -> str | None:
        """None if a PodGroup with `min_resources` may be admitted to `queue`, else the reason.

        Rule: minResources + allocated + inqueue - elastic <= realCapability on the requested
        dimensions, for the queue (and, hierarchical capacity, each ancestor). A queue that is
        not Open rejects even when minResources is None; None otherwise always passes.
        """
        reason = self._reject(queue)
        if reason is not None or min_resources is None:
            return reason
        reason = self._room_refusal(queue, strip_pods(min_resources), "minResources")
        if reason is not None:
            return reason
        # Beyond Volcano: a job whose minimum alone exceeds what allocate lets its queue hold
        # now could not be allocated, and enqueued it would only hold the queue's room.
        return self.beyond_limit(queue, min_resources)

    def room_refusal(self, queue: str, request: ResourceVector) -> str | None:
        """Why the queue cannot take `request` beside what it holds and has enqueued (the
        enqueue rule for a gang's pods beyond what its books count for it), if so."""
        return self._reject(queue) or self._room_refusal(
            queue, strip_pods(request), "this gang's pods"
        )

    def _room_refusal(self, queue: str, need: ResourceVector, what: str) -> str | None:
        for name in self.chain(queue):
            share = self.shares[name]
            future = need + share.allocated + share.inqueue - share.elastic
            short = [
                d for d in requested_dims(need) if future.get(d) > share.real_capability.get(d)
            ]
            if short:
                parts = []
                for d in short:
                    part = (
                        f"{d} need {fmt(d, need.get(d))}, "
                        f"realCapability {fmt(d, share.real_capability.get(d))}, "
                        f"allocated {fmt(d, share.allocated.get(d))}, "
                        f"inqueue {fmt(d, share.inqueue.get(d))}"
                    )
                    if share.elastic.get(d):
                        part += f", elastic {fmt(d, share.elastic.get(d))}"
                    parts.append(part)
                return f"{self._who(queue, name)} cannot hold {what}: " + "; ".join(parts)
        return None

    def beyond_limit(self, queue: str, min_resources: ResourceVector) -> str | None:
        """Why `min_resources` alone exceed what allocate lets the queue (or, hierarchical
        capacity, an ancestor) hold now (`_limit`: its deserved share, for proportion), if
        they do: a gang needing that much cannot be allocated whatever the queue's other work
        does."""
        if queue not in self.shares:
            return None
        need = strip_pods(min_resources)
        for name in self.chain(queue):
            limit = self._limit(self.shares[name])
            short = [d for d in requested_dims(need) if need.get(d) > limit.get(d)]
            if short:
                parts = [
                    f"{d} need {fmt(d, need.get(d))}, {self._limit_name} {fmt(d, limit.get(d))}"
                    for d in short
                ]
                return (
                    f"{self._who(queue, name)} cannot hold minResources within its "
                    f"{self._limit_what}: " + "; ".join(parts)
                )
        return None

    def release_inqueue(self, queue: str, amount: ResourceVector) -> None:
        """Take `amount` out of the queue's (and its ancestors') `inqueue`; floored at 0."""
        if queue not in self.shares:
            return
        freed = strip_pods(amount)
        for name in self.chain(queue):
            share = self.shares[name]
            share.inqueue = share.inqueue.saturating_sub(freed)

    def on_enqueued(self, queue: str, min_resources: ResourceVector | None) -> None:
        """JobEnqueued: the admitted minResources count as `inqueue` for later jobs of the pass."""
        if min_resources is None or queue not in self.shares:
            return
        need = strip_pods(min_resources)
        for name in self.chain(queue):
            share = self.shares[name]
            share.inqueue = share.inqueue + need

    # -- allocate

    def allocatable(self, queue: str, request: ResourceVector) -> str | None:
        """None if the queue may take `request` (a gang's demand or one pod), else e.g.
        "queue research over its share: holds cpu 40, would hold 48 with this gang, deserves
        40": what the queue holds now and after it (only the request's dimensions compared)."""
        reason = self._reject(queue)
        if reason is not None:
            return reason
        need = strip_pods(request)
        for name in self.chain(queue):
            share = self.shares[name]
            limit = self._limit(share)
            future = share.allocated + need
            short = [d for d in requested_dims(need) if future.get(d) > limit.get(d)]
            if short:
                parts = [
                    f"holds {d} {fmt(d, share.allocated.get(d))}, would hold "
                    f"{fmt(d, future.get(d))} with this gang, "
                    f"{self._limit_name} {fmt(d, limit.get(d))}"
                    for d in short
                ]
                return f"{self._who(queue, name)} over its {self._limit_what}: " + "; ".join(parts)
        return None

    def on_allocated(self, queue: str, request: ResourceVector) -> None:
        """A pod of `queue` was placed: its request counts as allocated (and share moves)."""
        if queue not in self.shares:
            return
        need = strip_pods(request)
        for name in self.chain(queue):
            share = self.shares[name]
            share.allocated = share.allocated + need
            share.update_share()

    def on_elastic(self, queue: str, request: ResourceVector) -> None:
        """A member beyond its gang's minimum was placed (booked by `on_allocated`): its
        request counts in the queue's `elastic` too, as the next session's books count it."""
        if queue not in self.shares:
            return
        need = strip_pods(request)
        for name in self.chain(queue):
            share = self.shares[name]
            share.elastic = share.elastic + need

    def on_released(self, queue: str, request: ResourceVector) -> None:
        """A pod of `queue` gave its resources back (evicted, finished); floored at 0."""
        if queue not in self.shares:
            return
        freed = strip_pods(request)
        for name in self.chain(queue):
            share = self.shares[name]
            share.allocated = share.allocated.saturating_sub(freed)
            share.update_share()

    def overused(self, queue: str) -> bool:
        share = self.shares.get(queue)
        return share is not None and share.overused()
