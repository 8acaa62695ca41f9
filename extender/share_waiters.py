"""The enqueued gangs of each queue that wait only for its share
(`plugins.starvation.waits_for_share`), and what they ask: in a backfill phase the queue's other
gangs are judged at enqueue without it in the queue's `inqueue`.

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


class ShareWaiters:
    def __init__(self) -> None:
        self._by_queue: dict[str, dict[str, ResourceVector]] = {}

    def note(self, queue: str, key: str, demand: ResourceVector | None, *, held: bool) -> None:
        """A decision about gang `key` of `queue`: it waits for the queue's share and asks
        `demand`, or (None) it does not — unless it was only `held` for the starving gang."""
        if demand is not None:
            self._by_queue.setdefault(queue, {})[key] = demand
        elif not held:
            self._drop(queue, key)

    def need(self, queue: str) -> ResourceVector | None:
        """What the queue's waiting gangs ask together (None: none waits)."""
        waiting = self._by_queue.get(queue)
        if not waiting:
            return None
        total = ResourceVector()
        for demand in waiting.values():
            total = total + demand
        return total

    def waiting(self, queue: str) -> set[str]:
        return set(self._by_queue.get(queue, ()))

    def forget(self, key: str) -> None:
        """The gang is gone (or moved to another queue)."""
        for queue in [q for q, waiting in self._by_queue.items() if key in waiting]:
            self._drop(queue, key)

    def clear(self, queue: str) -> None:
        """The queue has no starving gang any more (or is gone)."""
        self._by_queue.pop(queue, None)

    def _drop(self, queue: str, key: str) -> None:
        waiting = self._by_queue.get(queue)
        if waiting is not None:
            waiting.pop(key, None)
            if not waiting:
                del self._by_queue[queue]
