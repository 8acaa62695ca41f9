"""The candidate nodes' free amounts for a plan (`free_rows`): allocatable - requested - what
`reserved` promises there, in each dimension the gang requests, with each dimension's positive
total and the per-dimension index `plugins.model.placer.Nodes` walks. Read from the cache's node
columns when the snapshot carries them (`Snapshot.node_columns`: one vectorised subtraction and sort
for a thousand nodes, where node-by-node dict reads were most of planning a small gang), else
node by node; both give the same numbers. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from core.cache_columns import ROW_DIMS
from core.resources import ResourceVector
from plugins.model.placer import Nodes

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = ["free_rows"]

_NOTHING: Mapping[str, int] = {}


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
    positions = np.arange(len(names))
    index = []
    for column in free:
        order = np.lexsort((positions, column))  # by free amount, then node number
        index.append(list(zip(column[order].tolist(), order.tolist(), strict=True)))
    nodes = Nodes(names, free.T.tolist(), dims, index=index)
    return nodes, dict(zip(dims, totals, strict=True))


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
