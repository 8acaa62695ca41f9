"""The queues' starvation through one session (`Starvation`), the phases of a queue's hold
(`holds`) and a backfill phase's lifted `inqueue` (`inqueue_lifted`): the session's state and
mechanics; the policy (which gang starves, what a held gang is told) is
`plugins.actions.starvation`'s. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from core.resources import ResourceVector
from plugins.framework.pass_input import QueueWait
from plugins.model.queue_share import ShareModel, sum_vectors

__all__ = ["HOLD_SECONDS", "Starvation", "holds", "inqueue_lifted"]

HOLD_SECONDS = 20.0


class Starvation:
    """The queues' starvation through one session: from what the last one left
    (`QueueWait`: since when, what the waiting gangs ask), each queue's starving gang elected
    anew by its visit (the first gang of it that waits for its share, in order)."""

    def __init__(
        self,
        left: Mapping[str, QueueWait],
        queue_of: Callable[[str], str | None] = lambda _: None,
    ) -> None:
        self._left = left
        self._queue_of = queue_of  # a gang gone, or moved to another queue, waits there no more
        self._target: dict[str, str | None] = {}
        self._since: dict[str, float] = {}
        self._waiters: dict[str, dict[str, ResourceVector]] = {}
        self._visited: set[str] = set()

    def visit(self, queue: str) -> None:
        """The session decides the queue's gangs: its starving gang is elected again."""
        if queue in self._visited:
            return
        self._visited.add(queue)
        left = self._left.get(queue)
        self._target[queue] = None
        if left is not None:
            self._since[queue] = left.since
            self._waiters[queue] = {
                k: v for k, v in left.waiters.items() if self._queue_of(k) == queue
            }

    def visited(self, queue: str) -> bool:
        """Whether this session elects the queue's starving gang again (see `visit`)."""
        return queue in self._visited

    def of(self, queue: str) -> tuple[str, float, ResourceVector | None] | None:
        """The queue's starving gang, since when the queue has had one (-1: unknown, now), and
        what the queue's gangs that wait for its share ask together; None when it has none."""
        if queue in self._visited:
            target = self._target.get(queue)
            since = self._since.get(queue, -1.0)
            waiters = self._waiters.get(queue) or {}
        else:
            left = self._left.get(queue)
            if left is None or left.target is None:
                return None
            target, since, waiters = left.target, left.since, left.waiters
        if target is None:
            return None
        return target, since, sum_vectors(waiters.values()) if waiters else None

    def holding(self, queue: str, now: float) -> str | None:
        """The starving gang `queue` is held for at `now` (a hold phase), else None."""
        found = self.of(queue)
        if found is None or not holds(found[1] if found[1] >= 0 else now, now):
            return None
        return found[0]

    def note(self, queue: str, key: str, demand: ResourceVector | None, *, held: bool) -> None:
        """A decision about gang `key`: it waits for the queue's share asking `demand` (an
        enqueued gang's, which its queue's `inqueue` counts), or (None) not, unless it was only
        `held` for the starving gang."""
        waiters = self._waiters.setdefault(queue, {})
        if demand is not None:
            waiters[key] = demand
        elif not held:
            waiters.pop(key, None)

    def waits(self, queue: str, key: str) -> bool:
        """Whether gang `key` is among the queue's waiters (a note about it would change them)."""
        waiters = self._waiters.get(queue)
        return waiters is not None and key in waiters

    def starve(self, queue: str, key: str, now: float) -> None:
        """Gang `key` waits for its queue's share: the first such gang of the visit is the
        queue's starving gang; the queue starves since the first pass it had one."""
        if self._target.get(queue) is None:
            self._target[queue] = key
        self._since.setdefault(queue, now)

    def close(self) -> dict[str, QueueWait]:
        """Every queue's starvation as this session leaves it: a visited queue without a
        starving gang has none (nor waiters); the others as they were."""
        out = {q: w for q, w in self._left.items() if q not in self._visited}
        for queue in self._visited:
            target = self._target.get(queue)
            if target is not None:
                out[queue] = QueueWait(
                    self._since.get(queue, -1.0), dict(self._waiters.get(queue, {})), target
                )
        return out


def holds(since: float, now: float, hold: float = HOLD_SECONDS) -> bool:
    """Whether a queue with a starving gang since `since` is held at `now`: hold phases of `hold`
    seconds alternate with backfill phases of the same length, a hold first."""
    return int(max(0.0, now - since) // hold) % 2 == 0


@contextmanager
def inqueue_lifted(
    model: ShareModel | None, queue: str, amount: ResourceVector | None
) -> Iterator[None]:
    """Within the block, the queue's `inqueue` (and its ancestors') without `amount` (a
    backfill phase's lift: what the queue's gangs waiting for its share ask); restored
    exactly afterwards."""
    if model is None or amount is None:
        yield
        return
    saved = [
        (share, share.inqueue)
        for name in model.chain(queue)
        if (share := model.shares.get(name)) is not None
    ]
    model.release_inqueue(queue, amount)
    try:
        yield
    finally:
        for share, inqueue in saved:
            share.inqueue = inqueue
