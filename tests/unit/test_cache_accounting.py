"""ClusterCache accounting stays exact whatever order events arrive in."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord, QueueRecord
from core.resources import ResourceVector

_rv = itertools.count(1)


def node(name: str) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name, "resourceVersion": str(next(_rv))},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "10"}},
        }
    )


def pod(
    name: str,
    node_name: str | None = None,
    group: str | None = "g",
    cpu: str = "1",
    phase: str = "Running",
) -> PodRecord:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": str(next(_rv))}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def group(name: str, queue: str) -> PodGroupRecord:
    return PodGroupRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(next(_rv))},
            "spec": {"minMember": 1, "queue": queue},
        }
    )


def cpu(cache: ClusterCache, table: str, name: str) -> int:
    totals = cache.node_requested if table == "node" else cache.queue_allocated
    return totals.get(name, ResourceVector()).cpu


def check_exact(cache: ClusterCache) -> None:
    nodes, queues = cache.recompute()
    assert cache.node_requested == nodes
    assert cache.queue_allocated == queues


EVENTS = ["node", "group", "pod", "bind", "finish"]


@pytest.mark.parametrize("order", list(itertools.permutations(EVENTS[:3])))
def test_arrival_order_does_not_matter(order: tuple[str, ...]) -> None:
    cache = ClusterCache()
    for event in order:
        if event == "node":
            cache.on_node_add(node("n1"))
        elif event == "group":
            cache.on_podgroup_add(group("g", "research"))
        else:
            cache.on_pod_add(pod("p1", "n1"))
    assert cpu(cache, "node", "n1") == 1000
    assert cpu(cache, "queue", "research") == 1000
    assert cache.node_free("n1").cpu == 7000
    check_exact(cache)


def test_group_moving_queue_moves_allocation() -> None:
    cache = ClusterCache()
    cache.on_podgroup_add(group("g", "a"))
    cache.on_pod_add(pod("p1", "n1"))
    cache.on_pod_add(pod("p2", "n1", cpu="500m"))
    assert cpu(cache, "queue", "a") == 1500
    cache.on_podgroup_update(cache.podgroups["ns/g"], group("g", "b"))
    assert cpu(cache, "queue", "a") == 0 and cpu(cache, "queue", "b") == 1500
    cache.on_podgroup_delete(cache.podgroups["ns/g"])
    assert cache.queue_allocated == {}
    assert cpu(cache, "node", "n1") == 1500  # the node still carries the pods
    check_exact(cache)


def test_pod_lifecycle() -> None:
    cache = ClusterCache()
    cache.on_podgroup_add(group("g", "a"))
    pending = pod("p", None, phase="Pending")
    cache.on_pod_add(pending)
    assert cache.node_requested == {} and cache.queue_allocated == {}
    bound = pod("p", "n1", phase="Pending")
    cache.on_pod_update(pending, bound)
    assert cpu(cache, "node", "n1") == 1000 and cpu(cache, "queue", "a") == 1000
    assert cache.pods_by_node == {"n1": {"ns/p"}}
    done = pod("p", "n1", phase="Succeeded")
    cache.on_pod_update(bound, done)
    assert cache.node_requested == {} and cache.queue_allocated == {}
    cache.on_pod_delete(done)
    assert cache.pods == {} and cache.pods_by_node == {} and cache.pods_by_group == {}
    check_exact(cache)


def test_delete_of_unknown_pod_and_repeated_add() -> None:
    cache = ClusterCache()
    cache.on_pod_delete(pod("ghost", "n1"))
    p = pod("p", "n1")
    cache.on_pod_add(p)
    cache.on_pod_add(p)  # a relist delivering the same object again
    assert cpu(cache, "node", "n1") == 1000
    cache.on_pod_delete(p)
    assert cache.node_requested == {}
    check_exact(cache)


def test_snapshot_is_isolated_from_later_changes() -> None:
    cache = ClusterCache()
    cache.on_node_add(node("n1"))
    cache.on_pod_add(pod("p", "n1"))
    snap = cache.snapshot()
    cache.on_pod_add(pod("q", "n1"))
    assert snap.node_requested["n1"].cpu == 1000
    assert snap.pods_by_node["n1"] == frozenset({"ns/p"})
    assert snap.node_free("n1").cpu == 7000


def test_queue_record_defaults() -> None:
    queue = QueueRecord({"metadata": {"name": "q"}, "spec": {}})
    assert queue.weight == 1 and queue.reclaimable and queue.parent == ""
    # Never written: the controller sees "" (it writes Open), the scheduler reads it as Open.
    assert queue.state == "" and queue.scheduling_state == "Open"


def podgroup(phase: str, message: str, min_member: int = 1) -> PodGroupRecord:
    return PodGroupRecord(
        {
            "metadata": {
                "name": "g",
                "namespace": "ns",
                "uid": "uid-g",
                "resourceVersion": str(next(_rv)),
            },
            "spec": {"minMember": min_member, "queue": "q"},
            "status": {
                "phase": phase,
                "conditions": [{"type": "Unschedulable", "status": "True", "message": message}],
            },
        }
    )


def test_a_podgroup_status_write_wakes_no_pass_and_touches_no_group() -> None:
    """The extender writes each new reason of a waiting gang to its PodGroup's conditions:
    taken for a change, every such write woke a pass that decided the group again (and wrote
    its next reason). Only what a decision reads (phase, spec, metadata) counts."""
    cache = ClusterCache()
    wakes: list[None] = []
    cache.change_listeners.append(lambda: wakes.append(None))
    cache.on_podgroup_add(podgroup("Pending", "queue q holds cpu 4"))
    cache.take_dirty_groups()
    wakes.clear()

    rewritten = podgroup("Pending", "queue q holds cpu 6")
    cache.on_podgroup_update(cache.podgroups["ns/g"], rewritten)
    assert cache.podgroups["ns/g"] is rewritten  # the latest resourceVersion is kept
    assert (wakes, cache.take_dirty_groups()) == ([], set())

    cache.on_podgroup_update(rewritten, podgroup("Inqueue", "queue q holds cpu 6"))
    assert (len(wakes), cache.take_dirty_groups()) == (1, {"ns/g"})
    cache.on_podgroup_update(cache.podgroups["ns/g"], podgroup("Inqueue", "x", min_member=2))
    assert (len(wakes), cache.take_dirty_groups()) == (2, {"ns/g"})


def test_node_columns_read_current_after_changes_between_reads() -> None:
    """The columns are refreshed when read: whatever moved since the last read (pods bound
    and gone, a node added, one deleted) shows, and a deleted node's slot is gone."""
    from core.cache import ROW_DIMS

    c = ClusterCache()
    for name in ("n1", "n2"):
        c.on_node_add(node(name))
    columns = c.node_columns()
    cpu_row = ROW_DIMS.index("cpu")

    def used(name: str) -> int:
        return int(c.node_columns().used[cpu_row, columns.slot[name]])

    assert used("n1") == 0
    for index in range(5):
        c.on_pod_add(pod(f"p{index}", "n1", group=None))
    c.on_pod_delete(c.pods["ns/p0"])
    assert used("n1") == 4_000 and used("n2") == 0
    c.on_node_add(node("n3"))
    c.on_pod_add(pod("on-n3", "n3", group=None, cpu="2"))
    c.on_node_delete(c.nodes["n2"])
    columns = c.node_columns()
    assert "n2" not in columns.slot
    assert used("n3") == 2_000
    assert int(columns.cap[cpu_row, columns.slot["n3"]]) == 8_000
