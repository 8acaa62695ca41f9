"""The first-fit-decreasing engine under `plugins.model.placement.plan_gang`: the candidate nodes'
free amounts indexed per dimension (`Nodes`), and the walk that places members of one request
shape in bulk, or one at a time when their rules differ (`Placer`). Pure: no I/O."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from typing import Literal

from core.records import PodRecord

__all__ = ["Allowed", "Nodes", "Placer", "Prefer", "fit_count"]

Prefer = Literal["binpack", "spread"]

_NONE_REFUSED: frozenset[int] = frozenset()
# When several dimensions are equally selective, walk the scarce one: extended resources (GPUs)
# before cpu, memory, storage and the pod count, so binpack packs by what runs out first.
_DIM_PRIORITY = {"cpu": 1, "memory": 2, "ephemeral-storage": 3, "pods": 4}


class Nodes:
    """Candidate nodes with their free amount in each dimension the gang requests, and one
    index per dimension: a sorted list of `free * stride + node number`, an int per node,
    which the garbage collector does not track (a (free, node) tuple per node and dimension,
    with a row list per node, cost each plan on 5,000 nodes 16 collections)."""

    __slots__ = ("dims", "free", "index", "names", "stride")

    def __init__(
        self,
        names: list[str],
        free: Sequence[list[int]],
        dims: tuple[str, ...],
        index: list[list[int]] | None = None,
    ) -> None:
        """`index`: the per-dimension index when the caller built it already (the same, with
        `stride` = `max(1, len(names))`)."""
        self.names = names
        self.free = free
        self.dims = dims
        self.stride = stride = max(1, len(names))
        if index is None:
            index = [
                sorted([row[d] * stride + i for i, row in enumerate(free)])
                for d in range(len(dims))
            ]
        self.index = index

    def node_at(self, entry: int) -> int:
        """The node number of an index entry."""
        return entry % self.stride

    def first_with(self, d: int, amount: int) -> int:
        """The position in dimension `d`'s index of the first node with at least `amount`."""
        return bisect_left(self.index[d], amount * self.stride)

    def reindex(self, i: int, old: list[int]) -> None:
        """Move node `i` in every index after its free amounts changed from `old`."""
        new, stride = self.free[i], self.stride
        for d, column in enumerate(self.index):
            if old[d] == new[d]:
                continue
            del column[bisect_left(column, old[d] * stride + i)]
            insort(column, new[d] * stride + i)


def fit_count(free: list[int], need: tuple[int, ...], positive: tuple[int, ...]) -> int:
    """How many copies of `need` fit in `free` (compared on the requested dimensions only)."""
    count = -1
    for d in positive:
        copies = free[d] // need[d] if free[d] > 0 else 0
        if copies <= 0:
            return 0
        if count < 0 or copies < count:
            count = copies
    return count


Allowed = Callable[[int, PodRecord], bool]  # node number, member -> its rules accept it


class Placer:
    __slots__ = ("allowed", "nodes", "on_take", "prefer", "refused", "slots")

    def __init__(
        self,
        nodes: Nodes,
        prefer: Prefer,
        allowed: Allowed | None = None,
        on_take: Callable[[int, PodRecord], None] | None = None,
        refused: Callable[[PodRecord], set[int]] | None = None,
    ) -> None:
        self.nodes = nodes
        self.prefer = prefer
        # None: every candidate node takes every member (resources aside), the batched walk.
        self.allowed = allowed
        self.on_take = on_take
        # The nodes a member's rules refuse for good (skipped before anything is asked).
        self.refused = refused
        self.slots: dict[str, int] = {}  # pod key -> node number

    def place(self, need: tuple[int, ...], pods: list[PodRecord], limit: int) -> int:
        """Give up to `limit` of `pods` (members sharing the request `need`) a node each;
        returns how many were placed. The first ones in `pods` are placed first."""
        limit = min(limit, len(pods))
        if limit <= 0:
            return 0
        nodes = self.nodes
        if not nodes.names:
            return 0
        positive = tuple(
            sorted(
                (d for d, amount in enumerate(need) if amount > 0),
                key=lambda d: _DIM_PRIORITY.get(nodes.dims[d], 0),
            )
        )
        if self.allowed is not None:
            return self._place_each(need, pods, limit, positive)
        keys = [pod.key for pod in pods]
        if not positive:
            # Requests nothing we track: it fits anywhere; one node is as good as another.
            order = range(len(nodes.names))
            targets = [order[n % len(order)] for n in range(limit)]
            for key, i in zip(keys, targets, strict=False):
                self.slots[key] = i
            return limit
        # The most selective requested dimension: the fewest nodes have enough of it, so the
        # walk over its index is the shortest.
        starts = [nodes.first_with(d, need[d]) for d in positive]
        pick = min(range(len(positive)), key=lambda n: len(nodes.index[positive[n]]) - starts[n])
        column = nodes.index[positive[pick]]
        start = starts[pick]
        if start >= len(column):
            return 0
        placed = 0
        touched: dict[int, list[int]] = {}
        if self.prefer == "spread":
            # Emptiest first, one member per node per round, until nothing more fits.
            progress = True
            while placed < limit and progress:
                progress = False
                for pos in range(len(column) - 1, start - 1, -1):
                    i = nodes.node_at(column[pos])
                    if fit_count(nodes.free[i], need, positive) <= 0:
                        continue
                    self._take(i, need, positive, keys[placed], touched)
                    placed += 1
                    progress = True
                    if placed == limit:
                        break
        else:
            # Tightest fit first; fill a node with as many members as it holds.
            for pos in range(start, len(column)):
                i = nodes.node_at(column[pos])
                copies = fit_count(nodes.free[i], need, positive)
                for _ in range(min(copies, limit - placed)):
                    self._take(i, need, positive, keys[placed], touched)
                    placed += 1
                if placed == limit:
                    break
        # The walk used a frozen order; now move the nodes it filled in every index.
        for i, old in touched.items():
            nodes.reindex(i, old)
        return placed

    def _place_each(
        self, need: tuple[int, ...], pods: list[PodRecord], limit: int, positive: tuple[int, ...]
    ) -> int:
        """One member at a time, each on the first node of the walk its rules accept (they
        change as members land: ports taken, anti-affinity, spread counts)."""
        nodes = self.nodes
        allowed = self.allowed
        assert allowed is not None
        placed = 0
        for pod in pods:
            if placed == limit:
                break
            refused = self.refused(pod) if self.refused is not None else _NONE_REFUSED
            if positive:
                starts = [nodes.first_with(d, need[d]) for d in positive]
                pick = min(
                    range(len(positive)),
                    key=lambda n: len(nodes.index[positive[n]]) - starts[n],
                )
                column = nodes.index[positive[pick]]
                walk = range(starts[pick], len(column))
                if self.prefer == "spread":
                    walk = walk[::-1]
                order = (nodes.node_at(column[pos]) for pos in walk)
            else:
                order = iter(range(len(nodes.names)))
            for i in order:
                if i in refused:
                    continue
                if positive and fit_count(nodes.free[i], need, positive) <= 0:
                    continue
                if not allowed(i, pod):
                    continue
                touched: dict[int, list[int]] = {}
                self._take(i, need, positive, pod.key, touched)
                if touched:
                    nodes.reindex(i, touched[i])
                if self.on_take is not None:
                    self.on_take(i, pod)
                placed += 1
                break
        return placed

    def _take(
        self,
        i: int,
        need: tuple[int, ...],
        positive: tuple[int, ...],
        key: str,
        touched: dict[int, list[int]],
    ) -> None:
        row = self.nodes.free[i]
        if i not in touched:
            touched[i] = list(row)
        for d in positive:
            row[d] -= need[d]
        self.slots[key] = i
