"""What the extender feeds the queue plugins each pass (extender/queues.py): allocated with the
ledger's reservations, request with the unasked part of waiting PodGroups' minResources, the
implicit `default` queue, the plugin chosen by the scheduler configuration, Queue status."""

from __future__ import annotations

from typing import Any

from core.cache import Snapshot
from core.records import PodGroupRecord, PodRecord, QueueRecord
from core.resources import ResourceVector
from extender.queues import queue_status
from plugins.framework.config import DEFAULT_SCHEDULER_CONF, parse_scheduler_config
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy
from plugins.model.capacity_shares import CapacityShares
from plugins.model.proportion_shares import ProportionShares
from plugins.model.queue_inputs import QueueBooks, QueuePass


def built_queues(
    snap: Any,
    reserved: dict[str, ResourceVector],
    policy: Policy | None = None,
    books: QueueBooks | None = None,
    touched: Any = None,
) -> QueuePass:
    """The queues a pass opens with: the books' inputs, the conf's queue plugin's model."""
    open_queues = (
        policy or build_policy(parse_scheduler_config(DEFAULT_SCHEDULER_CONF))
    ).open_queues
    return (books or QueueBooks()).build(snap, reserved, open_queues, touched)


def cpu(amount: int) -> ResourceVector:
    return ResourceVector({"cpu": amount * 1000})


def group(name: str, queue: str, phase: str = "Pending", min_cpu: int | None = None) -> Any:
    spec: dict[str, Any] = {"minMember": 1, "queue": queue}
    if min_cpu is not None:
        spec["minResources"] = {"cpu": str(min_cpu)}
    return PodGroupRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": spec,
            "status": {"phase": phase},
        }
    )


def queue(name: str, **spec: Any) -> QueueRecord:
    return QueueRecord({"metadata": {"name": name}, "spec": {"weight": 1, **spec}})


def pod(name: str, group_name: str, cpu_text: str, node: str | None = None) -> PodRecord:
    return PodRecord(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "annotations": {"scheduling.k8s.io/group-name": group_name},
            },
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu_text}}}],
            },
        }
    )


def snapshot(
    groups: list[Any], queues: list[QueueRecord], pods: list[PodRecord] = (), **extra: Any
) -> Snapshot:
    by_group: dict[str, set[str]] = {}
    for p in pods:
        by_group.setdefault(p.group or "", set()).add(p.key)
    return Snapshot(
        nodes={},
        pods={p.key: p for p in pods},
        pods_by_node={},
        pods_by_group={k: frozenset(v) for k, v in by_group.items()},
        podgroups={g.key: g for g in groups},
        queues={q.name: q for q in queues},
        node_requested={},
        queue_allocated=extra.get("allocated", {}),
        queue_pending=extra.get("pending", {}),
        total_allocatable=extra.get("total", cpu(40)),
    )


def test_reservations_count_as_allocated_and_waiting_groups_ask_their_min_resources() -> None:
    snap = snapshot(
        [
            group("admitted", "a", "Inqueue", min_cpu=4),
            group("empty", "b", "Pending", min_cpu=6),  # a Volcano Job's pods come later
            group("half", "b", "Pending", min_cpu=6),
        ],
        [queue("a"), queue("b")],
        [pod("half-0", "half", "2")],
        allocated={"a": cpu(10)},
        pending={"b": cpu(2)},
    )
    built = built_queues(snap, {"ns/admitted": cpu(3)})
    a, b = built.inputs["a"], built.inputs["b"]
    assert a.allocated == cpu(10) + cpu(3)  # bound pods + the ledger's reservation
    assert a.inqueue == cpu(1)  # minResources 4 - 3 reserved
    # b: 2 cpu of pending pods + 6 (empty's minResources) + 4 (half asks 2 of its 6).
    assert b.request == cpu(12)
    assert isinstance(built.model, ProportionShares)
    # 40 cpu between two queues of weight 1 (and the implicit, idle default queue).
    assert built.model.shares["b"].deserved == cpu(12)
    assert built.model.shares["a"].deserved == cpu(13)


def test_default_exists_implicitly_and_unknown_queues_are_refused() -> None:
    # (g asks 1 cpu, so default deserves it: enqueue also compares a minimum with the share.)
    snap = snapshot([group("g", "default", min_cpu=1), group("lost", "nowhere")], [])
    built = built_queues(snap, {})
    assert "default" in built.inputs and built.inputs["default"].open
    assert built.model.enqueueable("default", cpu(1)) is None
    refusal = built.model.enqueueable("nowhere", cpu(1))
    assert refusal is not None and "nowhere" in refusal and "not exist" in refusal


def test_a_closed_queue_is_contended_and_refuses_everything() -> None:
    closed = QueueRecord(
        {"metadata": {"name": "shut"}, "spec": {"weight": 1}, "status": {"state": "Closed"}}
    )
    built = built_queues(snapshot([group("g", "shut")], [closed]), {})
    assert "shut" in built.contended
    assert built.model.allocatable("shut", cpu(1)) is not None


def test_the_scheduler_configuration_chooses_capacity() -> None:
    config = parse_scheduler_config(
        """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: capacity
    enableHierarchy: true
"""
    )
    policy = build_policy(config)
    assert policy.queue_model == "capacity" and policy.hierarchical
    built = built_queues(
        snapshot([group("g", "a")], [queue("a", deserved={"cpu": "8"}, parent="root")]), {}, policy
    )
    assert isinstance(built.model, CapacityShares)
    assert built.model.shares["a"].deserved == cpu(8)
    assert build_policy(parse_scheduler_config("actions: enqueue\ntiers: []\n")).queue_model == (
        "proportion"
    )


def test_queue_status_reports_allocated_and_phase_counts() -> None:
    snap = snapshot(
        [group("r", "a", "Running"), group("p", "a"), group("q", "a")],
        [queue("a")],
        allocated={"a": cpu(3)},
    )
    built = built_queues(snap, {})
    status = queue_status(built, "a")
    assert status["allocated"] == {"cpu": "3"}
    assert (status["pending"], status["running"], status["inqueue"]) == (2, 1, 0)


def test_incremental_sums_equal_a_full_rebuild_after_every_change() -> None:
    from core.cache import ClusterCache

    cache = ClusterCache()
    cache.on_queue_add(queue("a"))
    cache.on_queue_add(queue("b"))
    books = QueueBooks()

    def check(reserved: dict[str, ResourceVector] | None = None) -> None:
        held = reserved or {}
        incremental = built_queues(
            cache.live_view(), held, books=books, touched=cache.take_dirty_groups()
        )
        full = built_queues(cache.live_view(), held)
        for name in full.inputs:
            mine, truth = incremental.inputs[name], full.inputs[name]
            assert (mine.request, mine.inqueue, mine.allocated, mine.has_jobs) == (
                truth.request,
                truth.inqueue,
                truth.allocated,
                truth.has_jobs,
            ), name
        assert {q: set(k) for q, k in incremental.groups_by_queue.items()} == {
            q: set(k) for q, k in full.groups_by_queue.items()
        }
        assert {q: dict(c) for q, c in incremental.phases.items() if c} == {
            q: dict(c) for q, c in full.phases.items() if c
        }

    check()
    cache.on_podgroup_add(group("g1", "a", min_cpu=4))
    cache.on_podgroup_add(group("g2", "b", min_cpu=6))
    check()
    cache.on_pod_add(pod("g1-0", "g1", "1"))
    check()
    cache.on_podgroup_update(group("g1", "a", min_cpu=4), group("g1", "a", "Inqueue", min_cpu=4))
    check({"ns/g1": cpu(1)})  # admitted: its member holds a reservation
    cache.on_pod_update(pod("g1-0", "g1", "1"), pod("g1-0", "g1", "1", node="n1"))
    check()  # bound: the reservation is gone
    cache.on_podgroup_update(group("g2", "b", min_cpu=6), group("g2", "a", min_cpu=6))
    check()  # moved to another queue
    cache.on_podgroup_delete(group("g1", "a", "Inqueue", min_cpu=4))
    check()
    cache.on_pod_delete(pod("g1-0", "g1", "1", node="n1"))
    check()


def _gated(name: str, group_name: str, cpu_text: str, gate: str) -> PodRecord:
    raw = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": {"scheduling.k8s.io/group-name": group_name},
        },
        "spec": {
            "schedulingGates": [{"name": gate}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu_text}}}],
        },
    }
    return PodRecord(raw)


def test_members_gated_by_the_user_hold_no_inqueue_room() -> None:
    """Volcano's DeductSchGatedResources: an admitted job's members gated by the user do not
    hold its queue's room; vulcan's own queue-allocation gate is no such gate."""
    snap = snapshot(
        [group("gated", "a", "Inqueue", min_cpu=4), group("ours", "b", "Inqueue", min_cpu=4)],
        [queue("a"), queue("b")],
        [
            _gated("gated-0", "gated", "1", "example.com/wait"),
            _gated("gated-1", "gated", "1", "example.com/wait"),
            _gated("ours-0", "ours", "1", "scheduling.volcano.sh/queue-allocation-gate"),
        ],
    )
    built = built_queues(snap, {})
    assert built.inputs["a"].inqueue == cpu(2)  # 4 - the 2 gated members
    assert built.inputs["b"].inqueue == cpu(4)
