"""The queues' starvation as the last session closed it (`plugins.actions.starvation`): what the
next session starts from, and what filter reads between passes (an elastic member of a queue
that drains for its starving gang waits)."""

from __future__ import annotations

from collections.abc import Mapping

from plugins.framework.pass_input import QueueWait
from plugins.framework.starvation_book import holds

__all__ = ["StarvingQueues"]


class StarvingQueues:
    def __init__(self) -> None:
        self.queues: Mapping[str, QueueWait] = {}

    def target(self, queue: str) -> str | None:
        found = self.queues.get(queue)
        return found.target if found is not None else None

    def since(self, queue: str, now: float) -> float:
        found = self.queues.get(queue)
        return found.since if found is not None and found.since >= 0 else now

    def holding(self, queue: str, now: float) -> str | None:
        """The starving gang `queue` is held for at `now` (a hold phase), else None."""
        target = self.target(queue)
        if target is None or not holds(self.since(queue, now), now):
            return None
        return target
