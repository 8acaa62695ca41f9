"""plugins.builtin.task_topology / plugins.builtin.task_topology_buckets: Volcano's task-topology
plugin (annotation parsing with Volcano's own test cases, buckets, task order, node score) and the
whole-gang placement that honours its buckets, with hand-computed outcomes."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from core.records import PodRecord
from core.resources import ResourceVector
from plugins.builtin.task_topology import (
    TaskTopology,
    TaskTopologyError,
    TaskTopologyPlugin,
    build_buckets,
    parse_task_topology,
    plan_topology_gang,
)
from plugins.framework.config import ConfigError
from plugins.model.placement import plan_gang
from tests.unit.test_gang_placement import GPU, assert_within_capacity, node, pod, snapshot

AFF = "volcano.sh/task-topology-affinity"
ANTI = "volcano.sh/task-topology-anti-affinity"
ORDER = "volcano.sh/task-topology-task-order"
TF_TASKS = {"ps", "worker", "chief", "evaluator"}


def topo(
    affinity: str | None = None, anti: str | None = None, order: str | None = None
) -> TaskTopology:
    annotations = {
        key: value
        for key, value in ((AFF, affinity), (ANTI, anti), (ORDER, order))
        if value is not None
    }
    result = parse_task_topology(annotations, {"ps", "worker", "chief", "master", ""})
    assert result is not None
    return result


def ps_and_workers(workers: int, *, cpu: str = "1", ps: int = 1) -> list[PodRecord]:
    return [pod(f"ps-{i}", cpu=cpu, task="ps") for i in range(ps)] + [
        pod(f"worker-{i}", cpu=cpu, task="worker") for i in range(workers)
    ]


def names(pods: Iterable[PodRecord]) -> list[str]:
    return [p.name for p in pods]


def free(cpu: int) -> ResourceVector:
    return ResourceVector({"cpu": cpu, "memory": 64 << 30, "pods": 110})


# ------------------------------------------------------------------------------- parsing
# Volcano's Test_readTopologyFromPgAnnotations cases, then our messages.


def test_volcanos_correct_annotation() -> None:
    annotations = {AFF: "ps,worker;ps,chief", ANTI: "ps;worker,chief", ORDER: "ps,worker,chief"}
    assert parse_task_topology(annotations, TF_TASKS) == TaskTopology(
        affinity=(("ps", "worker"), ("ps", "chief")),
        anti_affinity=(("ps",), ("worker", "chief")),
        task_order=("ps", "worker", "chief"),
    )


def test_volcanos_task_names_with_dashes() -> None:
    tasks = {"ps-some", "worker-another-some", "chief-kk", "evaluator-tt"}
    annotations = {
        AFF: "ps-some,worker-another-some;ps-some,chief-kk",
        ANTI: "ps-some;worker-another-some,chief-kk",
        ORDER: "ps-some,worker-another-some,chief-kk,evaluator-tt",
    }
    result = parse_task_topology(annotations, tasks)
    assert result is not None
    assert result.affinity == (("ps-some", "worker-another-some"), ("ps-some", "chief-kk"))
    assert result.task_order == ("ps-some", "worker-another-some", "chief-kk", "evaluator-tt")


def test_no_annotation_means_no_topology() -> None:
    assert parse_task_topology({}, TF_TASKS) is None
    assert parse_task_topology({"volcano.sh/task-topology": "x"}, TF_TASKS) is None


def test_volcanos_invalid_annotation_reports_the_affinity_first() -> None:
    annotations = {
        AFF: "$%GF$^trtqwrg^",
        ANTI: "ps;worker,chief;#@FGEW^vfa897bgs;;",
        ORDER: "ps,worker,chief,evaluator,,,",
    }
    with pytest.raises(TaskTopologyError) as caught:
        parse_task_topology(annotations, TF_TASKS)
    assert str(caught.value) == (
        'volcano.sh/task-topology-affinity: task "$%GF$^trtqwrg^" does not exist in the job '
        '(its tasks: "chief", "evaluator", "ps", "worker")'
    )
    assert isinstance(caught.value, ValueError)


def test_volcanos_unknown_task_in_the_task_order() -> None:
    annotations = {AFF: "ps,worker", ANTI: "ps", ORDER: "ps,worker,chief"}
    with pytest.raises(TaskTopologyError, match=r'task-order: task "chief" does not exist'):
        parse_task_topology(annotations, {"ps", "worker"})


def test_volcanos_duplicate_task() -> None:
    annotations = {AFF: "ps,worker", ANTI: "ps,ps", ORDER: "ps,worker"}
    with pytest.raises(TaskTopologyError) as caught:
        parse_task_topology(annotations, {"ps", "worker"})
    assert str(caught.value) == (
        'volcano.sh/task-topology-anti-affinity: task "ps" is listed twice in "ps,ps"'
    )
    with pytest.raises(TaskTopologyError, match=r'task-order: task "ps" is listed twice'):
        parse_task_topology({ORDER: "ps,worker,ps"}, {"ps", "worker"})


def test_volcanos_redundant_punctuation_is_kept_and_accepted() -> None:
    # Empty names are skipped by Volcano's check (not an error) and kept in the topology.
    annotations = {
        AFF: "ps,worker;ps,,chief,;",
        ANTI: "ps;worker,chief;;;",
        ORDER: "ps,worker,chief,evaluator,,,",
    }
    assert parse_task_topology(annotations, TF_TASKS) == TaskTopology(
        affinity=(("ps", "worker"), ("ps", "", "chief", ""), ("",)),
        anti_affinity=(("ps",), ("worker", "chief"), ("",), ("",), ("",)),
        task_order=("ps", "worker", "chief", "evaluator", "", "", ""),
    )


def test_a_task_may_appear_in_several_groups_but_spaces_are_not_trimmed() -> None:
    assert topo(affinity="ps,worker;ps,chief").affinity == (("ps", "worker"), ("ps", "chief"))
    with pytest.raises(TaskTopologyError, match='task " worker" does not exist'):
        parse_task_topology({AFF: "ps, worker"}, {"ps", "worker"})


def test_a_job_without_tasks_names_none() -> None:
    with pytest.raises(TaskTopologyError, match=r"\(its tasks: none\)"):
        parse_task_topology({ORDER: "ps"}, {""})


# ------------------------------------------------------------------------------- buckets


def test_affine_tasks_share_one_bucket() -> None:
    buckets = build_buckets(topo(affinity="ps,worker"), ps_and_workers(3))
    assert [names(b.pending) for b in buckets.buckets] == [
        ["ps-0", "worker-0", "worker-1", "worker-2"]
    ]
    assert buckets.max_size == 4
    assert buckets.buckets[0].tasks == {"ps": 1, "worker": 3}
    assert buckets.buckets[0].request.get("cpu") == 4000


def test_self_anti_affinity_splits_workers_and_the_ps_joins_the_first() -> None:
    # worker's strongest relation (self anti-affinity, 4) beats ps's (inter affinity, 3), so
    # workers join first, each in its own bucket; ps scores +1 with every bucket: the first.
    buckets = build_buckets(topo(affinity="ps,worker", anti="worker"), ps_and_workers(4))
    assert [names(b.pending) for b in buckets.buckets] == [
        ["worker-0", "ps-0"],
        ["worker-1"],
        ["worker-2"],
        ["worker-3"],
    ]
    assert buckets.max_size == 2


def test_task_order_annotation_changes_the_buckets() -> None:
    # ps first: worker-1 scores +1 (ps) -1 (worker-0) = 0 with bucket 0, which is not negative.
    buckets = build_buckets(
        topo(affinity="ps,worker", anti="worker", order="ps,worker"), ps_and_workers(4)
    )
    assert [names(b.pending) for b in buckets.buckets] == [
        ["ps-0", "worker-0", "worker-1"],
        ["worker-2"],
        ["worker-3"],
    ]


def test_equal_affinity_goes_to_the_bucket_requesting_least() -> None:
    buckets = build_buckets(topo(affinity="ps,worker", anti="ps"), ps_and_workers(4, ps=2))
    assert [names(b.pending) for b in buckets.buckets] == [
        ["ps-0", "worker-0", "worker-2"],
        ["ps-1", "worker-1", "worker-3"],
    ]


def test_pods_without_a_related_task_are_in_no_bucket() -> None:
    members = [*ps_and_workers(1), pod("chief-0", task="chief"), pod("loose")]
    buckets = build_buckets(topo(affinity="ps,worker", order="chief,ps"), members)
    assert [buckets.of(p) is None for p in members] == [False, False, True, True]


def test_a_bound_member_anchors_its_nodes_bucket() -> None:
    bound = pod("ps-0", task="ps", node_name="n2", phase="Running")
    pending = [pod(f"worker-{i}", task="worker") for i in range(2)]
    buckets = build_buckets(topo(affinity="ps,worker"), [bound, *pending])
    (bucket,) = buckets.buckets
    assert bucket.bound == {"n2": 1} and names(bucket.pending) == ["worker-0", "worker-1"]
    assert bucket.size == 3 and buckets.max_size == 3
    assert buckets.node_tasks == {"n2": {"ps": 1}}


# ---------------------------------------------------------------------------- task order


def test_task_order_buckets_first_larger_then_older_then_affinity_order() -> None:
    members = [
        pod("loose-b"),
        *reversed(ps_and_workers(4)),
        pod("chief-0", task="chief"),
        pod("loose-a"),
    ]
    buckets = build_buckets(topo(affinity="ps,worker", anti="worker"), members)
    ordered = sorted(members, key=buckets.task_order_key)
    # Bucket 0 (2 pending: worker before ps, the stronger relation), buckets 1..3, then the
    # pods in no bucket in the caller's order (Volcano leaves them to the next plugin).
    assert names(ordered) == [
        "worker-0",
        "ps-0",
        "worker-1",
        "worker-2",
        "worker-3",
        "loose-b",
        "chief-0",
        "loose-a",
    ]


def test_task_order_annotation_orders_inside_a_bucket() -> None:
    members = ps_and_workers(2)
    buckets = build_buckets(topo(affinity="ps,worker", order="worker,ps"), members)
    assert names(sorted(members, key=buckets.task_order_key)) == ["worker-0", "worker-1", "ps-0"]


# ---------------------------------------------------------------------------- node score


def test_node_score_counts_bucket_members_there_and_what_fits() -> None:
    members = ps_and_workers(3)
    buckets = build_buckets(topo(affinity="ps,worker"), members)
    score = TaskTopologyPlugin({"task-topology.weight": 2}).member_scorer(
        buckets, members[0], {"ns/worker-0": "n1"}
    )
    # (bucket members there + pending members of the bucket - left out) x 2 x 100 / 4
    assert score("n1", free(16000)) == (1 + 3) * 2 * 100 / 4
    assert score("n2", free(16000)) == 3 * 2 * 100 / 4
    assert score("n3", free(2000)) == (3 - 1) * 2 * 100 / 4  # one worker left out to fit
    assert score("n4", free(500)) == 0.0  # the pod itself does not fit


def test_node_score_anti_affinity_penalty_and_pods_in_no_bucket() -> None:
    members = [*ps_and_workers(4), pod("loose")]
    buckets = build_buckets(topo(affinity="ps,worker", anti="worker"), members)
    placed = {"ns/worker-0": "n1", "ns/ps-0": "n1"}
    score = buckets.node_scorer(members[2], placed)  # worker-1, alone in bucket 1
    assert score("n1", free(16000)) == 0.0  # 1 pending - 1 worker there
    assert score("n2", free(16000)) == 1 * 100 / 2
    assert buckets.node_scorer(members[-1], placed)("n2", free(16000)) == 0.0


def test_plugin_weight_argument() -> None:
    assert TaskTopologyPlugin({}).weight == 1
    assert TaskTopologyPlugin({"task-topology.weight": 10}).weight == 10
    assert TaskTopologyPlugin({"task-topology.weight": "10"}).weight == 10
    # Volcano keeps zero and negative weights (no check in calculateWeight).
    assert TaskTopologyPlugin({"task-topology.weight": -3}).weight == -3
    assert not TaskTopologyPlugin({"task-topology.weight": 0}).co_locates
    assert TaskTopologyPlugin({}).name == "task-topology"
    with pytest.raises(ConfigError, match=r"task-topology\.weight"):
        TaskTopologyPlugin({"task-topology.weight": "ten"})


# ----------------------------------------------------------------------------- placement


def test_ps_and_workers_land_on_the_one_node_with_room_for_all() -> None:
    snap = snapshot([node("n1", cpu="4"), node("n2", cpu="8"), node("n3", cpu="16")])
    members = ps_and_workers(4, cpu="2")  # 10 cpu: only n3 holds them all
    plan = plan_topology_gang(snap, members, 5, {}, topo(affinity="ps,worker"))
    assert plan.ok and plan.placed == 5
    assert set(plan.slots.values()) == {"n3"}
    assert_within_capacity(snap, plan, members, {})
    # Plain binpack fills the tightest nodes first and splits them.
    assert len(set(plan_gang(snap, members, 5, {}).slots.values())) > 1


def test_the_tightest_node_with_room_for_the_whole_bucket() -> None:
    snap = snapshot([node("n1", cpu="4"), node("n2", cpu="16"), node("n3", cpu="12")])
    plan = plan_topology_gang(snap, ps_and_workers(4, cpu="2"), 5, {}, topo(affinity="ps,worker"))
    assert set(plan.slots.values()) == {"n3"}


def test_pending_workers_join_the_node_of_their_running_ps() -> None:
    running = pod("ps-0", task="ps", node_name="n2", phase="Running")
    snap = snapshot([node("n1", cpu="4"), node("n2", cpu="16")], [running])
    members = [pod(f"worker-{i}", task="worker") for i in range(3)]
    plan = plan_topology_gang(snap, members, 3, {}, topo(affinity="ps,worker"))
    assert plan.ok and set(plan.slots.values()) == {"n2"}
    assert set(plan_gang(snap, members, 3, {}).slots.values()) == {"n1"}  # binpack: tightest


def test_a_bucket_too_big_for_one_node_spills_to_as_few_nodes_as_possible() -> None:
    snap = snapshot([node("n1", cpu="6"), node("n2", cpu="6"), node("n3", cpu="4")])
    members = ps_and_workers(4, cpu="2")  # 10 cpu, at most 6 per node
    plan = plan_topology_gang(snap, members, 5, {}, topo(affinity="ps,worker"))
    assert plan.ok
    per_node: dict[str, int] = {}
    for name in plan.slots.values():
        per_node[name] = per_node.get(name, 0) + 1
    # The largest run first (3 on n1), the rest on the tightest node that holds it (n3).
    assert per_node == {"n1": 3, "n3": 2}
    assert_within_capacity(snap, plan, members, {})


def test_anti_affinity_spreads_workers_across_nodes() -> None:
    snap = snapshot([node(f"n{i}") for i in range(1, 5)])
    members = [pod(f"worker-{i}", task="worker") for i in range(4)]
    plan = plan_topology_gang(snap, members, 4, {}, topo(anti="worker"))
    assert plan.ok and sorted(plan.slots.values()) == ["n1", "n2", "n3", "n4"]
    assert set(plan_gang(snap, members, 4, {}).slots.values()) == {"n1"}


def test_anti_affine_workers_share_nodes_evenly_when_they_must() -> None:
    snap = snapshot([node("n1"), node("n2"), node("n3", cpu="500m")])  # n3: no room
    members = [pod(f"worker-{i}", task="worker") for i in range(4)]
    plan = plan_topology_gang(snap, members, 4, {}, topo(anti="worker"))
    assert plan.ok and sorted(plan.slots.values()) == ["n1", "n1", "n2", "n2"]


def test_ps_with_one_worker_the_other_workers_spread() -> None:
    snap = snapshot([node(f"n{i}") for i in range(1, 6)])
    members = ps_and_workers(4)
    plan = plan_topology_gang(snap, members, 5, {}, topo(affinity="ps,worker", anti="worker"))
    assert plan.slots["ns/ps-0"] == plan.slots["ns/worker-0"]
    assert len({plan.slots[f"ns/worker-{i}"] for i in range(4)}) == 4


def test_reserved_and_unschedulable_nodes_are_avoided() -> None:
    snap = snapshot([node("n1", unschedulable=True), node("n2", cpu="4"), node("n3", cpu="8")])
    reserved = {"n3": ResourceVector({"cpu": 6000})}
    members = ps_and_workers(2)
    plan = plan_topology_gang(snap, members, 3, reserved, topo(affinity="ps,worker"))
    assert plan.ok and set(plan.slots.values()) == {"n2"}
    assert_within_capacity(snap, plan, members, reserved)
    only_n3 = plan_topology_gang(
        snap, members, 2, {}, topo(affinity="ps,worker"), node_ok=lambda n: n.name == "n3"
    )
    assert set(only_n3.slots.values()) == {"n3"}


def test_role_minimums_are_met_before_the_buckets_take_the_room() -> None:
    # Task order puts the workers' bucket first and it fills the node; the master (in no
    # bucket) must still get its minimum: a second attempt places required members first.
    snap = snapshot([node("n1", cpu="4")])
    members = [pod(f"worker-{i}", task="worker") for i in range(4)]
    members.append(pod("master-0", task="master"))
    plan = plan_topology_gang(
        snap, members, 2, {}, topo(affinity="worker"), need_per_task={"master": 1, "worker": 1}
    )
    assert plan.ok and "ns/master-0" in plan.slots
    assert plan.placed == 4 and set(plan.slots.values()) == {"n1"}


def test_when_no_topology_placement_meets_the_minimums_binpack_does() -> None:
    # The running ps pulls the worker onto n1, where the master (in no bucket) then has no
    # room, in task order and with required members first alike (buckets go before pods in
    # none). The buckets are a preference, so plan_gang's placement is taken.
    running = pod("ps-0", task="ps", node_name="n1", phase="Running")
    snap = snapshot([node("n1", cpu="3"), node("n2", cpu="1")], [running])
    members = [pod("master-0", cpu="2", task="master"), pod("worker-0", task="worker")]
    per_task = {"master": 1, "worker": 1}
    plan = plan_topology_gang(
        snap, members, 2, {}, topo(affinity="ps,worker"), need_per_task=per_task
    )
    assert plan.ok and plan.slots == {"ns/master-0": "n1", "ns/worker-0": "n2"}
    assert plan == plan_gang(snap, members, 2, {}, need_per_task=per_task)


def test_an_elastic_gang_gets_what_fits_beyond_its_need() -> None:
    snap = snapshot([node("n1", cpu="3")])
    plan = plan_topology_gang(snap, ps_and_workers(4), 2, {}, topo(affinity="ps,worker"))
    assert plan.ok and plan.placed == 3


def test_reason_when_the_gang_does_not_fit() -> None:
    snap = snapshot([node("n1", gpu=2), node("n2", gpu=2)])
    members = [pod(f"worker-{i}", gpu=2, task="worker") for i in range(4)]
    plan = plan_topology_gang(snap, members, 4, {}, topo(affinity="worker"))
    assert not plan.ok and plan.slots == {} and plan.used == {}
    assert plan.placed == 2
    assert plan.reason == "not enough nvidia.com/gpu (need 8, free 4)"
    short = plan_topology_gang(snap, members[:2], 3, {}, topo(affinity="worker"))
    assert short.reason == "only 2 pending members for 3 required"
    role = plan_topology_gang(
        snap, members, 1, {}, topo(affinity="worker"), need_per_task={"master": 1}
    )
    assert role.reason == "task master: 0/1 members placeable (only 0 pending)"


@pytest.mark.parametrize("seed", range(40))
def test_random_gangs_never_overcommit_and_meet_their_requirements(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [
        node(f"n{i}", cpu=str(rng.choice([2, 4, 8])), gpu=rng.choice([0, 2, 4]), pods=6)
        for i in range(rng.randint(1, 6))
    ]
    tasks = ["ps", "worker", "chief", None]
    members = [
        pod(f"m-{i}", cpu=rng.choice(["500m", "1", "2"]), gpu=rng.choice([0, 0, 1]), task=task)
        for i, task in enumerate(rng.choice(tasks) for _ in range(rng.randint(1, 12)))
    ]
    bound = [pod("ps-bound", task="ps", node_name="n0", phase="Running")] if seed % 3 else []
    snap = snapshot(nodes, bound)
    reserved = {"n0": ResourceVector({"cpu": 1000})} if seed % 2 else {}
    topology = topo(
        affinity=rng.choice(["ps,worker", "worker", "ps,worker;chief"]),
        anti=rng.choice([None, "worker", "ps;chief,worker"]),
        order=rng.choice([None, "chief,ps"]),
    )
    need = rng.randint(0, len(members))
    per_task = {"worker": 1} if seed % 4 == 0 else None
    plan = plan_topology_gang(snap, members, need, reserved, topology, need_per_task=per_task)
    baseline = plan_gang(snap, members, need, reserved, need_per_task=per_task)
    assert plan.ok or not baseline.ok  # never fails a gang plain binpack can place
    if plan.ok:
        assert plan.placed == len(plan.slots) >= need
        assert set(plan.slots) <= {p.key for p in members}
        assert_within_capacity(snap, plan, members, reserved)
        for task, n in (per_task or {}).items():
            assert sum(1 for p in members if p.task == task and p.key in plan.slots) >= n
    else:
        assert plan.reason and plan.slots == {}


def test_requests_in_extended_resources_are_packed_by_the_scarce_one() -> None:
    # Both nodes hold the bucket; n2 is left with fewer GPUs (the scarce dimension) free.
    snap = snapshot([node("n1", cpu="8", gpu=8), node("n2", cpu="32", gpu=4)])
    members = [pod(f"worker-{i}", gpu=1, task="worker") for i in range(2)]
    plan = plan_topology_gang(snap, members, 2, {}, topo(affinity="worker"))
    assert set(plan.slots.values()) == {"n2"}
    assert plan.used["n2"].get(GPU) == 2
