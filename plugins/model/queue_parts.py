"""The seam between a share plugin and whoever may reuse its per-queue work.

A share plugin whose model is built from a part per queue that depends only on that queue's
input and one cluster-wide value (proportion: the total less every queue's guarantee) asks for
its parts through `QueueParts`. `computed_parts` computes every part; the memo's layer
(`plugins.framework.kept_parts`) hands back the last part of a queue whose input is the same
object and whose cluster-wide value is equal, and must give what `computed_parts` gives. Pure:
no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Protocol, TypeVar

from plugins.model.queue_share import QueueInput

__all__ = ["C", "PartOf", "QueueParts", "T", "computed_parts"]

C = TypeVar("C", bound=Hashable)
T = TypeVar("T")

PartOf = Callable[[QueueInput, C], T]  # one queue's part, given the cluster-wide value


class QueueParts(Protocol):
    def __call__(self, part_of: PartOf[C, T], queues: Sequence[QueueInput], context: C) -> list[T]:
        """`part_of(queue, context)` for each of `queues`, in their order."""
        ...


def computed_parts(part_of: PartOf[C, T], queues: Sequence[QueueInput], context: C) -> list[T]:
    return [part_of(queue, context) for queue in queues]
