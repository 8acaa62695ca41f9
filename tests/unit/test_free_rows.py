"""plugins.model.free_rows and the placer's per-dimension index (`plugins.model.placer.Nodes`):
one int per node and dimension (`free * stride + node number`), the same from the cache's numpy
columns, node by node, or in Python's ints where int64 could overflow."""

from __future__ import annotations

import numpy as np
import pytest

from core.cache import ClusterCache
from core.resources import ResourceVector
from plugins.model import free_rows as free_rows_module
from plugins.model.free_rows import ColumnRows, free_rows
from plugins.model.placer import Nodes
from tests.unit.test_gang_placement import node, pod


def test_an_index_orders_nodes_by_free_amount_then_number_and_follows_changes() -> None:
    nodes = Nodes(["a", "b", "c", "d"], [[5, 1], [-2, 1], [5, 0], [0, 3]], ("cpu", "pods"))
    assert [nodes.node_at(e) for e in nodes.index[0]] == [1, 3, 0, 2]  # -2, 0, 5, 5
    assert [nodes.node_at(e) for e in nodes.index[1]] == [2, 0, 1, 3]
    assert nodes.first_with(0, 5) == 2  # the first with at least 5: a
    assert nodes.first_with(0, 1) == 2
    assert nodes.first_with(0, -2) == 0
    assert nodes.first_with(0, 6) == 4  # none
    old = list(nodes.free[0])
    nodes.free[0][0] = -3
    nodes.reindex(0, old)
    assert [nodes.node_at(e) for e in nodes.index[0]] == [0, 1, 3, 2]  # -3, -2, 0, 5
    assert nodes.first_with(0, 5) == 3


def test_column_rows_are_made_when_first_read_and_keep_the_placer_s_changes() -> None:
    rows = ColumnRows(np.array([[5, -2, 7], [1, 1, 0]], np.int64))
    assert len(rows) == 3
    row = rows[2]
    assert row == [7, 0] and isinstance(row[0], int)
    row[0] -= 4  # the placer takes room on node 2
    assert rows[2] == [3, 0] and rows[2] is row
    assert list(rows) == [[5, 1], [-2, 1], [3, 0]]
    with pytest.raises(IndexError):
        rows[3]


def test_the_columns_and_the_node_by_node_reads_give_the_same_rows_and_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = ClusterCache()
    for i, cpu in enumerate(("16", "8", "8", "4", "32")):
        cache.on_node_add(node(f"n{i}", cpu=cpu))
    # n3 over-committed (a negative free amount), n1 partly used.
    cache.on_pod_add(pod("big", cpu="6", group="x", node_name="n3", phase="Running"))
    cache.on_pod_add(pod("some", cpu="3", group="y", node_name="n1", phase="Running"))
    reserved = {"n0": ResourceVector({"cpu": 8000, "pods": 1}), "gone": ResourceVector({"cpu": 1})}
    names = [f"n{i}" for i in range(5)]
    dims = ("cpu", "pods")
    live, copy = cache.live_view(), cache.snapshot()
    assert live.node_columns() is not None and copy.node_columns() is None
    on_columns, totals = free_rows(live, names, dims, reserved)
    node_by_node, copy_totals = free_rows(copy, names, dims, reserved)
    assert list(on_columns.free) == node_by_node.free
    assert on_columns.free[3][0] == -2000 and on_columns.free[0][0] == 8000
    assert on_columns.index == node_by_node.index
    assert totals == copy_totals
    # Where int64 could overflow, the entries are made in Python's ints: the same.
    monkeypatch.setattr(free_rows_module, "_INT64_SAFE", 1)
    assert free_rows(live, names, dims, reserved)[0].index == on_columns.index
