"""The enqueued gangs of each queue that wait only for its share
(`plugins.actions.starvation.waits_for_share`), and what they ask: in a backfill phase the queue's
other gangs are judged at enqueue without it in the queue's `inqueue`.

Not the starving gang's alone: a queue may have several enqueued gangs that its share cannot
hold beside its running work, and each keeps its minResources in `inqueue` while it waits.
Lifting only the first left the others' there, and they refused every new gang of the queue
at enqueue through every backfill phase, until one of them went (bench/soak.py, seed 37:
soak-q4 drained for a 30-cpu job while a 10-cpu job, enqueued on a promise whose victim another
job took, waited for the same share; a 2-cpu gang that fitted its share waited 206 s).

A gang stays noted through the hold phases (where it is held, not decided) and leaves when a
decision about it says anything else: admitted, refused for another reason, deleted.
"""

from __future__ import annotations

from core.resources import ResourceVector
from plugins.model.queue_share import sum_vectors


class ShareWaiters:
    def __init__(self) -> None:
        self._by_queue: dict[str, dict[str, ResourceVector]] = {}
        self._queue_of: dict[str, str] = {}  # gang -> the queue it is noted in
        self._needs: dict[str, ResourceVector] = {}  # queue -> its waiters' sum, when known

    def note(self, queue: str, key: str, demand: ResourceVector | None, *, held: bool) -> None:
        """A decision about gang `key` of `queue`: it waits for the queue's share and asks
        `demand`, or (None) it does not — unless it was only `held` for the starving gang."""
        if demand is not None:
            if self._queue_of.get(key, queue) != queue:
                self.forget(key)  # its PodGroup moved to another queue
            waiting = self._by_queue.setdefault(queue, {})
            if waiting.get(key) != demand:  # noted again each pass, mostly unchanged
                waiting[key] = demand
                self._queue_of[key] = queue
                self._needs.pop(queue, None)
        elif not held:
            self.forget(key)

    def need(self, queue: str) -> ResourceVector | None:
        """What the queue's waiting gangs ask together (None: none waits). Summed once per
        change: every gang the queue decides in a pass asks."""
        waiting = self._by_queue.get(queue)
        if not waiting:
            return None
        total = self._needs.get(queue)
        if total is None:
            total = self._needs[queue] = sum_vectors(waiting.values())
        return total

    def waiting(self, queue: str) -> set[str]:
        return set(self._by_queue.get(queue, ()))

    def forget(self, key: str) -> None:
        """The gang waits no more (admitted, refused for another reason, gone)."""
        queue = self._queue_of.pop(key, None)
        waiting = self._by_queue.get(queue) if queue is not None else None
        if waiting is None:
            return
        waiting.pop(key, None)
        self._needs.pop(queue, None)
        if not waiting:
            del self._by_queue[queue]

    def clear(self, queue: str) -> None:
        """The queue has no starving gang any more (or is gone)."""
        for key in self._by_queue.pop(queue, {}):
            self._queue_of.pop(key, None)
        self._needs.pop(queue, None)
