"""The memo's layer over a share plugin's per-queue parts (`plugins.model.queue_parts`): a
queue's part is reused while its input is the same object (`QueueBooks` keeps the object of a
queue whose numbers did not move) and the cluster-wide value it was computed with is equal.
Nothing else is read, so it decides as `computed_parts` does; `Memo.forget` drops it all."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from plugins.model.queue_parts import C, PartOf, T
from plugins.model.queue_share import QueueInput

__all__ = ["KeptParts"]


class KeptParts:
    def __init__(self) -> None:
        # part function -> (the cluster-wide value, queue name -> (its input, its part))
        self._kept: dict[Any, tuple[Hashable, dict[str, tuple[QueueInput, Any]]]] = {}

    def forget(self) -> None:
        self._kept.clear()

    def __call__(self, part_of: PartOf[C, T], queues: Sequence[QueueInput], context: C) -> list[T]:
        known = self._kept.get(part_of)
        before = known[1] if known is not None and known[0] == context else {}
        now: dict[str, tuple[QueueInput, Any]] = {}
        parts: list[T] = []
        for queue in queues:
            kept = before.get(queue.name)
            part = kept[1] if kept is not None and kept[0] is queue else part_of(queue, context)
            now[queue.name] = (queue, part)
            parts.append(part)
        self._kept[part_of] = (context, now)  # queues gone since are dropped with `before`
        return parts
