"""The candidate nodes' free amounts for a plan (`free_rows`): allocatable - requested - what
`reserved` promises there, in each dimension the gang requests, with each dimension's positive
total and the per-dimension index `plugins.model.placer.Nodes` walks. Read from the cache's node
columns when the snapshot carries them (`Snapshot.node_columns`: one vectorised subtraction and sort
for a thousand nodes, where node-by-node dict reads were most of planning a small gang), else
node by node; both give the same numbers. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from core.cache_columns import ROW_DIMS
from core.resources import ResourceVector
from plugins.model.placer import Nodes

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = ["free_rows"]

_NOTHING: Mapping[str, int] = {}
_INT64_SAFE = 1 << 62  # |free| * stride below it: the index's int64 arithmetic cannot overflow


def free_rows(
    snapshot: Snapshot,
    names: list[str],
    dims: tuple[str, ...],
    reserved: Mapping[str, ResourceVector],
) -> tuple[Nodes, dict[str, int]]:
    """The candidates `names` as `Nodes` (their rows in that order), and the total free amount
    of each dimension over them (positive amounts only)."""
    found = _from_columns(snapshot, names, dims, reserved)
    if found is not None:
        return found
    rows: list[list[int]] = []
    total_free = dict.fromkeys(dims, 0)
    node_requested, nodes = snapshot.node_requested, snapshot.nodes
    for name in names:
        free = nodes[name].allocatable.view()
        requested = node_requested.get(name)
        used = requested.view() if requested is not None else _NOTHING
        promised = reserved.get(name)
        if promised is None:
            row = [free.get(d, 0) - used.get(d, 0) for d in dims]
        else:
            held_back = promised.view()
            row = [free.get(d, 0) - used.get(d, 0) - held_back.get(d, 0) for d in dims]
        rows.append(row)
        for d, amount in zip(dims, row, strict=True):
            if amount > 0:
                total_free[d] += amount
    return Nodes(names, rows, dims), total_free


def _from_columns(
    snapshot: Snapshot,
    names: list[str],
    dims: tuple[str, ...],
    reserved: Mapping[str, ResourceVector],
) -> tuple[Nodes, dict[str, int]] | None:
    """`free_rows` from the node columns; None where they cannot say (none carried, a dimension
    or a node they do not hold, a node too big for them)."""
    if not names or not dims or any(d not in ROW_DIMS for d in dims):
        return None
    columns = snapshot.node_columns()
    if columns is None or columns.too_big:
        return None
    slot = columns.slot
    try:
        slots = np.fromiter((slot[name] for name in names), np.int64, len(names))
    except KeyError:
        return None
    at = [ROW_DIMS.index(d) for d in dims]
    free = columns.cap[at][:, slots] - columns.used[at][:, slots]  # (dims, nodes)
    if reserved:
        _take_reserved(free, names, dims, reserved)
    totals = np.where(free > 0, free, 0).sum(axis=1).tolist()
    # Each index entry is free * stride + node number (`Nodes`): sorting those sorts by free
    # amount, then node number. In int64 while no entry can overflow; else `Nodes` builds it
    # from the rows in Python's ints.
    stride = len(names)
    if int(np.abs(free).max()) >= _INT64_SAFE // stride:
        return Nodes(names, free.T.tolist(), dims), dict(zip(dims, totals, strict=True))
    index = [np.sort(column * stride + np.arange(stride)).tolist() for column in free]
    nodes = Nodes(names, ColumnRows(free), dims, index=index)
    return nodes, dict(zip(dims, totals, strict=True))


class ColumnRows:
    """The candidates' free amounts as the placer reads them, `rows[i][d]`, made into a list
    only for a node the plan looks at (most plans look at a few of thousands; a list per
    candidate was thousands of objects for the garbage collector per plan). A row made is
    kept, so the placer's changes to it stay."""

    __slots__ = ("_columns", "_made")

    def __init__(self, columns: np.ndarray) -> None:
        self._columns = columns  # (dims, nodes)
        self._made: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return int(self._columns.shape[1])

    def __getitem__(self, i: int) -> list[int]:
        row = self._made.get(i)
        if row is None:
            if not 0 <= i < len(self):
                raise IndexError(i)
            row = self._made[i] = self._columns[:, i].tolist()
        return row

    def __iter__(self) -> Iterator[list[int]]:
        return (self[i] for i in range(len(self)))


def _take_reserved(
    free: np.ndarray,
    names: Sequence[str],
    dims: tuple[str, ...],
    reserved: Mapping[str, ResourceVector],
) -> None:
    position = {name: i for i, name in enumerate(names)}
    for name, promised in reserved.items():
        i = position.get(name)
        if i is None:
            continue
        held_back = promised.view()
        for d, dim in enumerate(dims):
            amount = held_back.get(dim, 0)
            if amount:
                free[d, i] -= amount
