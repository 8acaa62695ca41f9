"""plugins.model.placement: whole-gang placement against node free capacity, reservations and node
checks, with hand-computed outcomes."""

from __future__ import annotations

from typing import Any

import pytest

from core.cache import ClusterCache, Snapshot
from core.records import NodeRecord, PodRecord
from core.resources import ResourceVector
from plugins.model.placement import (
    Plan,
    plan_gang,
    release,
    reserved_by_node,
    schedulable_node,
    slot_usage,
)

GPU = "nvidia.com/gpu"


def node(
    name: str,
    *,
    cpu: str = "16",
    gpu: int = 0,
    pods: int = 110,
    ready: bool = True,
    unschedulable: bool = False,
    taints: tuple[tuple[str, str], ...] = (),
) -> NodeRecord:
    allocatable: dict[str, str] = {"cpu": cpu, "memory": "64Gi", "pods": str(pods)}
    if gpu:
        allocatable[GPU] = str(gpu)
    return NodeRecord(
        {
            "metadata": {"name": name},
            "spec": {
                "unschedulable": unschedulable,
                "taints": [{"key": k, "effect": effect} for k, effect in taints],
            },
            "status": {
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
    )


def pod(
    name: str,
    *,
    cpu: str = "1",
    gpu: int = 0,
    task: str | None = None,
    group: str = "a",
    node_name: str | None = None,
    phase: str = "Pending",
) -> PodRecord:
    requests: dict[str, Any] = {"cpu": cpu}
    if gpu:
        requests[GPU] = str(gpu)
    annotations = {"scheduling.k8s.io/group-name": group}
    if task:
        annotations["volcano.sh/task-spec"] = task
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    return PodRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
            "spec": spec,
            "status": {"phase": phase},
        }
    )


def snapshot(nodes: list[NodeRecord], bound: list[PodRecord] = ()) -> Snapshot:  # type: ignore[assignment]
    cache = ClusterCache()
    for n in nodes:
        cache.on_node_add(n)
    for p in bound:
        cache.on_pod_add(p)
    return cache.snapshot()


def gang(prefix: str, count: int, **kwargs: Any) -> list[PodRecord]:
    return [pod(f"{prefix}-{i}", group=prefix, **kwargs) for i in range(count)]


def assert_within_capacity(
    snap: Snapshot, plan: Plan, members: list[PodRecord], reserved: dict[str, ResourceVector]
) -> None:
    """Every slot is on a node, and no node is promised more than it has."""
    by_key = {p.key: p for p in members}
    assert plan.used == slot_usage(plan.slots, {k: by_key[k].requests for k in plan.slots})
    for name, used in plan.used.items():
        total = snap.node_requested.get(name, ResourceVector()) + reserved.get(
            name, ResourceVector()
        )
        assert (total + used).less_equal(snap.nodes[name].allocatable), name


# ------------------------------------------------------------------------------ the basics


def test_a_gang_that_fits_gets_a_slot_per_member() -> None:
    snap = snapshot([node("n1", gpu=4), node("n2", gpu=4)])
    members = gang("a", 4, gpu=2)
    plan = plan_gang(snap, members, 4, {})
    assert plan.ok and plan.reason == ""
    assert plan.placed == 4
    assert sorted(plan.slots.values()) == ["n1", "n1", "n2", "n2"]
    assert plan.used["n1"] == ResourceVector({"cpu": 2000, GPU: 4, "pods": 2})
    assert_within_capacity(snap, plan, members, {})


def test_two_gangs_that_fit_alone_but_not_together() -> None:
    snap = snapshot([node("n1", gpu=4), node("n2", gpu=2)])
    a, b = gang("a", 4, gpu=1), gang("b", 4, gpu=1)
    assert plan_gang(snap, b, 4, {}).ok  # B alone would fit ...
    plan_a = plan_gang(snap, a, 4, {})
    assert plan_a.ok
    reserved = reserved_by_node([plan_a.used])
    assert sum(v.get(GPU) for v in reserved.values()) == 4
    plan_b = plan_gang(snap, b, 4, reserved)  # ... but not beside A's reservation
    assert not plan_b.ok
    assert plan_b.reason == "not enough nvidia.com/gpu (need 4, free 2)"
    assert plan_b.slots == {} and plan_b.used == {}  # a failed plan reserves nothing
    assert plan_b.placed == 2
    # A finishes binding (or times out): its reservation goes, and B fits again.
    assert plan_gang(snap, b, 4, release(reserved, plan_a.used)).ok


def test_master_and_workers_where_only_workers_are_placeable() -> None:
    # minTaskMember master 1 + worker 3: the master needs 8 GPUs, no node has them.
    snap = snapshot([node("n1", gpu=4), node("n2", gpu=2)])
    master = [pod("master-0", gpu=8, task="master")]
    workers = [pod(f"worker-{i}", gpu=1, task="worker") for i in range(3)]
    plan = plan_gang(snap, master + workers, 4, {}, need_per_task={"master": 1, "worker": 3})
    assert not plan.ok
    assert plan.reason == (
        "task master: 0/1 members placeable: not enough nvidia.com/gpu (need 8, free 6)"
    )
    # Without the role minimum the job-level count alone decides, and 3 < 4 still fails.
    alone = plan_gang(snap, master + workers, 4, {})
    assert not alone.ok
    assert alone.placed == 3


def test_a_role_that_fits_in_total_but_not_on_any_node() -> None:
    snap = snapshot([node("n1", gpu=4), node("n2", gpu=4)])
    members = [pod("master-0", gpu=8, task="master"), pod("worker-0", gpu=1, task="worker")]
    plan = plan_gang(snap, members, 2, {}, need_per_task={"master": 1})
    assert not plan.ok
    assert plan.reason == (
        "task master: 0/1 members placeable: no node has 8 nvidia.com/gpu free (at most 4)"
    )


def test_role_minimums_are_placed_before_other_members() -> None:
    # One node with 4 GPUs. Given in this order, greedy placement would give the 4 GPUs to the
    # 4 workers; the master's minimum must win the capacity first.
    snap = snapshot([node("n1", gpu=4)])
    members = [pod(f"worker-{i}", gpu=1, task="worker") for i in range(4)]
    members.append(pod("master-0", gpu=1, task="master"))
    plan = plan_gang(snap, members, 2, {}, need_per_task={"master": 1, "worker": 1})
    assert plan.ok
    assert "ns/master-0" in plan.slots
    assert plan.placed == 4  # master + 3 workers: everything that fits


def test_a_member_bigger_than_any_node() -> None:
    snap = snapshot([node("n1", gpu=2), node("n2", gpu=2)])
    plan = plan_gang(snap, [pod("big", gpu=4)], 1, {})
    assert not plan.ok
    assert plan.reason == (
        "only 0 of 1 required members fit: no node has 4 nvidia.com/gpu free (at most 2)"
    )


def test_fragmented_capacity_is_reported_as_such() -> None:
    # Enough cpu on one node, enough GPUs on another, both together on none.
    snap = snapshot([node("cpu-rich", cpu="16", gpu=1), node("gpu-rich", cpu="4", gpu=4)])
    plan = plan_gang(snap, [pod("m", cpu="8", gpu=2)], 1, {})
    assert not plan.ok
    assert plan.reason == (
        "only 0 of 1 required members fit: free capacity is fragmented across nodes"
    )


def test_role_with_too_few_pending_members() -> None:
    snap = snapshot([node("n1")])
    members = [pod("worker-0", task="worker")]
    plan = plan_gang(snap, members, 1, {}, need_per_task={"worker": 2, "master": 1})
    assert plan.reason == (
        "task worker: 1/2 members placeable (only 1 pending); "
        "task master: 0/1 members placeable (only 0 pending)"
    )


def test_several_short_resources_are_all_named_in_report_order() -> None:
    snap = snapshot([node("n1", cpu="2", gpu=1)])
    plan = plan_gang(snap, gang("a", 2, cpu="2", gpu=1), 2, {})
    assert plan.reason == (
        "not enough cpu (need 4, free 2), not enough nvidia.com/gpu (need 2, free 1)"
    )


def test_more_required_than_pending() -> None:
    snap = snapshot([node("n1")])
    plan = plan_gang(snap, gang("a", 2), 3, {})
    assert not plan.ok
    assert plan.reason == "only 2 pending members for 3 required"


def test_elastic_members_beyond_need_are_placed_while_they_fit() -> None:
    snap = snapshot([node("n1", cpu="12")])
    members = gang("a", 4, cpu="4")
    plan = plan_gang(snap, members, 2, {})
    assert plan.ok
    assert sorted(plan.slots) == ["ns/a-0", "ns/a-1", "ns/a-2"]  # the first three, in order


def test_nothing_needed_is_trivially_ok() -> None:
    snap = snapshot([node("n1", cpu="1")])
    plan = plan_gang(snap, gang("a", 1, cpu="2"), 0, {})
    assert plan.ok and plan.slots == {}


# ------------------------------------------------------------------------- free capacity


def test_heterogeneous_nodes_binpack() -> None:
    snap = snapshot([node("a", gpu=2), node("b", gpu=4), node("c", gpu=8)])
    members = [pod(f"m{i}", gpu=4) for i in (1, 2)] + [pod(f"m{i}", gpu=2) for i in (3, 4, 5)]
    plan = plan_gang(snap, members, 5, {})
    assert plan.ok
    # 4-GPU members: tightest fit first: b (4 free) takes one, c (8) the other.
    # 2-GPU members then: a (2 free) takes one, c (4 left) the last two.
    assert plan.slots == {
        "ns/m1": "b",
        "ns/m2": "c",
        "ns/m3": "a",
        "ns/m4": "c",
        "ns/m5": "c",
    }
    assert_within_capacity(snap, plan, members, {})


def test_heterogeneous_nodes_spread() -> None:
    snap = snapshot([node("a", gpu=2), node("b", gpu=4), node("c", gpu=8)])
    members = [pod(f"m{i}", gpu=4) for i in (1, 2)] + [pod(f"m{i}", gpu=2) for i in (3, 4, 5)]
    plan = plan_gang(snap, members, 5, {}, prefer="spread")
    assert plan.ok
    # Emptiest first, one per node per round: c then b for the 4-GPU members; then free is
    # a 2, b 0, c 4: c, a, and in the next round c again.
    assert plan.slots == {
        "ns/m1": "c",
        "ns/m2": "b",
        "ns/m3": "c",
        "ns/m4": "a",
        "ns/m5": "c",
    }


def test_binpack_fills_one_node_spread_uses_all() -> None:
    snap = snapshot([node(f"n{i}", cpu="8") for i in range(4)])
    members = gang("a", 4, cpu="2")
    packed = plan_gang(snap, members, 4, {})
    spread = plan_gang(snap, members, 4, {}, prefer="spread")
    assert set(packed.slots.values()) == {"n0"}
    assert sorted(spread.slots.values()) == ["n0", "n1", "n2", "n3"]


def test_reserved_capacity_is_subtracted() -> None:
    snap = snapshot([node("n1", gpu=4)])
    reserved = {"n1": ResourceVector({GPU: 3})}
    plan = plan_gang(snap, [pod("m", gpu=2)], 1, reserved)
    assert not plan.ok
    assert plan.reason == "not enough nvidia.com/gpu (need 2, free 1)"
    assert plan_gang(snap, [pod("m", gpu=1)], 1, reserved).slots == {"ns/m": "n1"}


def test_bound_pods_are_subtracted() -> None:
    other = pod("busy", gpu=3, group="other", node_name="n1", phase="Running")
    finished = pod("done", gpu=4, group="other", node_name="n1", phase="Succeeded")
    snap = snapshot([node("n1", gpu=4)], [other, finished])
    plan = plan_gang(snap, [pod("m", gpu=2)], 1, {})
    assert plan.reason == "not enough nvidia.com/gpu (need 2, free 1)"


def test_pod_slots_count() -> None:
    snap = snapshot([node("n1", pods=2)])
    plan = plan_gang(snap, gang("a", 3, cpu="100m"), 3, {})
    assert plan.reason == "not enough pods (need 3, free 2)"


# ---------------------------------------------------------------------------- node checks


def test_default_node_check() -> None:
    assert schedulable_node(node("ok"))
    assert not schedulable_node(node("down", ready=False))
    assert not schedulable_node(node("cordoned", unschedulable=True))
    assert not schedulable_node(node("tainted", taints=(("gpu", "NoSchedule"),)))
    assert not schedulable_node(node("evicting", taints=(("x", "NoExecute"),)))
    assert schedulable_node(node("soft", taints=(("x", "PreferNoSchedule"),)))


def test_not_ready_node_is_excluded_unless_node_ok_says_otherwise() -> None:
    snap = snapshot([node("down", gpu=8, ready=False), node("up", gpu=1)])
    members = gang("a", 2, gpu=1)
    plan = plan_gang(snap, members, 2, {})
    assert not plan.ok
    assert plan.reason == "not enough nvidia.com/gpu (need 2, free 1)"
    anything = plan_gang(snap, members, 2, {}, node_ok=lambda n: True)
    assert anything.ok
    assert set(anything.slots.values()) <= {"down", "up"}


def test_tolerated_taint_through_node_ok() -> None:
    snap = snapshot([node("gpu-pool", gpu=4, taints=(("nvidia.com/gpu", "NoSchedule"),))])
    members = gang("a", 2, gpu=2)
    assert not plan_gang(snap, members, 2, {}).ok
    tolerates = plan_gang(
        snap,
        members,
        2,
        {},
        node_ok=lambda n: n.ready and all(k == "nvidia.com/gpu" for k, _v, _e in n.taints),
    )
    assert tolerates.ok


def test_no_schedulable_node() -> None:
    snap = snapshot([node("n1", ready=False)])
    plan = plan_gang(snap, gang("a", 1), 1, {})
    assert plan.reason == "no schedulable node: 0/1 nodes are available: 1 node(s) were not ready."


def test_bad_preference() -> None:
    with pytest.raises(ValueError, match="binpack"):
        plan_gang(snapshot([node("n1")]), gang("a", 1), 1, {}, prefer="random")  # type: ignore[arg-type]


# ------------------------------------------------------------------------- ledger helpers


def test_reservation_sums_and_release() -> None:
    one = {"n1": ResourceVector({GPU: 2, "pods": 2}), "n2": ResourceVector({GPU: 1, "pods": 1})}
    two = {"n1": ResourceVector({GPU: 1, "pods": 1})}
    total = reserved_by_node([one, two])
    assert total == {
        "n1": ResourceVector({GPU: 3, "pods": 3}),
        "n2": ResourceVector({GPU: 1, "pods": 1}),
    }
    assert release(total, one) == {"n1": ResourceVector({GPU: 1, "pods": 1})}
    assert release(release(total, one), two) == {}
    assert reserved_by_node([]) == {}


def test_slot_usage_skips_pods_that_are_gone() -> None:
    slots = {"ns/a": "n1", "ns/b": "n1", "ns/gone": "n2"}
    requests = {"ns/a": ResourceVector({"cpu": 500}), "ns/b": ResourceVector({"cpu": 250})}
    assert slot_usage(slots, requests) == {"n1": ResourceVector({"cpu": 750})}


# ------------------------------------------------------------------------ at cluster scale


@pytest.mark.parametrize("prefer", ["binpack", "spread"])
def test_a_thousand_members_on_five_thousand_nodes(prefer: str) -> None:
    # Functional only (no timing): the batched walk must place every member correctly.
    nodes = [node(f"n{i:04d}", cpu="4", gpu=2 if i % 5 == 0 else 0) for i in range(5000)]
    busy = [
        pod(f"busy-{i}", cpu="3", group="other", node_name=f"n{i:04d}", phase="Running")
        for i in range(0, 5000, 7)
    ]
    snap = snapshot(nodes, busy)
    members = [pod(f"w{i:04d}", cpu="2") for i in range(900)]
    members += [pod(f"g{i:04d}", cpu="1", gpu=1, task="gpu") for i in range(100)]
    plan = plan_gang(snap, members, 1000, {}, need_per_task={"gpu": 100}, prefer=prefer)  # type: ignore[arg-type]
    assert plan.ok, plan.reason
    assert len(plan.slots) == 1000
    assert_within_capacity(snap, plan, members, {})
    for key, name in plan.slots.items():
        if key.startswith("ns/g"):
            assert snap.nodes[name].allocatable.get(GPU) == 2
    if prefer == "binpack":
        # 100 GPU members fill 50 GPU nodes two by two (cpu 2 of 4 each, minus busy ones).
        assert len({plan.slots[m.key] for m in members if m.task == "gpu"}) <= 60
    else:
        assert len(set(plan.slots.values())) == 1000  # one member per node


def test_capacity_runs_out_at_scale() -> None:
    snap = snapshot([node(f"n{i:04d}", cpu="2") for i in range(5000)])
    members = [pod(f"w{i:04d}", cpu="2") for i in range(1000)]
    reserved = {f"n{i:04d}": ResourceVector({"cpu": 2000}) for i in range(4500)}
    plan = plan_gang(snap, members, 1000, reserved)
    assert not plan.ok
    assert plan.placed == 500
    assert plan.reason == "not enough cpu (need 2k, free 1k)"
