"""The kube-scheduler stand-in's pure parts: configuration, filters, sampling, scoring, queue."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

import pytest

from sim.scheduler.config import ConfigError, SchedulerConfig, parse_config, sim_config
from sim.scheduler.framework import (
    UNRESOLVABLE,
    UNSCHEDULABLE,
    SchedNode,
    SchedPod,
    fit_error_message,
    fits,
    least_allocated,
    num_feasible_nodes_to_find,
    run_filters,
)
from sim.scheduler.preemption import Preemptor
from sim.scheduler.queue import ACTIVE, BACKOFF, SchedulingQueue
from sim.scheduler.queue import UNSCHEDULABLE as POOL
from sim.scheduler.scheduler import FitError, Scheduler, _NodeObject


def node(
    name: str = "n1",
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
    **extended: str,
) -> SchedNode:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **extended}
    return SchedNode(
        {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": allocatable, "capacity": allocatable},
        }
    )


def pod(
    name: str = "p",
    cpu: str | None = "1",
    memory: str | None = None,
    priority: int = 0,
    created: str = "2026-11-21T00:00:00Z",
    node_name: str | None = None,
    **spec: Any,
) -> SchedPod:
    requests = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    body: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
        "priority": priority,
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    return SchedPod(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"uid-{name}",
                "creationTimestamp": created,
            },
            "spec": body,
            "status": {"phase": "Pending"},
        }
    )


# ------------------------------------------------------------------------------ config


def test_config_reads_extenders_profiles_and_percentage() -> None:
    config = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "percentageOfNodesToScore": 30,
            "podMaxBackoffSeconds": 20,
            "profiles": [
                {"schedulerName": "default-scheduler"},
                {"schedulerName": "volcano", "percentageOfNodesToScore": 100},
            ],
            "extenders": [
                {"urlPrefix": "http://b/v1/", "bindVerb": "bind", "ignorable": True},
                {
                    "urlPrefix": "http://a/v1",
                    "filterVerb": "filter",
                    "prioritizeVerb": "prioritize",
                    "weight": 2,
                    "httpTimeout": "2s",
                    "nodeCacheCapable": True,
                    "managedResources": [{"name": "vulcan.sh/gang", "ignoredByScheduler": True}],
                },
            ],
        }
    )
    assert config.scheduler_names == ("default-scheduler", "volcano")
    assert config.percentage_for("volcano") == 100
    assert config.percentage_for("default-scheduler") == 30
    assert config.pod_max_backoff == 20
    # Ignorable extenders move behind the others (k/k#78258).
    assert [e.url_prefix for e in config.extenders] == ["http://a/v1", "http://b/v1/"]
    first, second = config.extenders
    assert first.http_timeout == 2.0 and first.weight == 2 and first.node_cache_capable
    assert second.http_timeout == 5.0  # the default
    assert second.url("bind") == "http://b/v1/bind"  # trailing slashes stripped
    assert config.ignored_resources == {"vulcan.sh/gang"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"extenders": [{"urlPrefix": "http://a", "prioritizeVerb": "p"}]}, "positive weight"),
        (
            {"extenders": [{"urlPrefix": "http://a", "enableHttps": True}]},
            'unknown field "enableHttps"',
        ),
        (
            {
                "extenders": [
                    {"urlPrefix": "http://a", "bindVerb": "b"},
                    {"urlPrefix": "http://b", "bindVerb": "b"},
                ]
            },
            "only one extender can implement bind",
        ),
        ({"extenders": [{"filterVerb": "f"}]}, "extenders[0].urlPrefix: Required value"),
        ({"percentageOfNodesToScore": 101}, "not in valid range"),
        ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, "Duplicate value"),
        ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "apiVersion: Unsupported value"),
    ],
)
def test_config_rejects_what_kube_scheduler_rejects(change: dict[str, Any], message: str) -> None:
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    doc.update(change)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_config(doc)


def test_sim_config_round_trips_through_the_parser() -> None:
    config = parse_config(sim_config("http://127.0.0.1:8888"))
    assert [e.url("filter") for e in config.extenders if e.filter_verb] == [
        "http://127.0.0.1:8888/v1/filter"
    ]
    binder = [e for e in config.extenders if e.bind_verb]
    assert len(binder) == 1 and binder[0].http_timeout > config.extenders[0].http_timeout


# ------------------------------------------------------------------------------ filters


def test_resources_fit_counts_requests_and_pod_slots() -> None:
    n = node(cpu="2", pods="2")
    assert run_filters(pod(cpu="2"), n) is None
    n.add(pod("a", cpu="1", node_name="n1"))
    assert run_filters(pod(cpu="2"), n) == (UNSCHEDULABLE, ["Insufficient cpu"])
    n.add(pod("b", cpu="500m", node_name="n1"))
    assert run_filters(pod(cpu="100m"), n) == (UNSCHEDULABLE, ["Too many pods"])
    n.remove(pod("b", cpu="500m", node_name="n1"))
    assert run_filters(pod(cpu="1"), n) is None


def test_extended_resource_missing_on_node_is_insufficient_unless_ignored() -> None:
    gpu_pod = SchedPod(
        {
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
            },
        }
    )
    assert run_filters(gpu_pod, node()) == (UNSCHEDULABLE, ["Insufficient nvidia.com/gpu"])
    assert run_filters(gpu_pod, node(**{"nvidia.com/gpu": "1"})) is None
    assert run_filters(gpu_pod, node(), frozenset({"nvidia.com/gpu"})) is None


def test_fast_path_agrees_with_the_filters() -> None:
    """The filter loop's shortcut (`open` node, `placeable_anywhere` pod, `fits`) passes a
    node exactly when every in-tree filter does."""
    taint = {"key": "a", "value": "b", "effect": "NoSchedule"}
    nodes = [
        node(cpu="2", pods="2"),
        node(cpu="1"),
        node(taints=[taint]),
        node(unschedulable=True),
        node(labels={"zone": "a"}),
        node(**{"nvidia.com/gpu": "1"}),
    ]
    nodes[0].add(pod("a", cpu="1", node_name="n1"))
    nodes[0].add(pod("b", cpu="500m", node_name="n1"))  # pod slots full
    assert [n.open for n in nodes] == [True, True, False, False, True, True]
    pods = [
        pod(cpu="1"),
        pod(cpu="2"),
        pod(nodeSelector={"zone": "a"}),
        pod(tolerations=[{"key": "a", "operator": "Exists"}]),
        SchedPod(
            {
                "metadata": {"name": "g", "namespace": "default"},
                "spec": {
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
                },
            }
        ),
    ]
    assert [p.placeable_anywhere for p in pods] == [True, True, False, True, True]
    for p in pods:
        for n in nodes:
            shortcut = p.placeable_anywhere and n.open and fits(p, n)
            if shortcut:
                assert run_filters(p, n) is None
            if p.placeable_anywhere and n.open:
                assert shortcut == (run_filters(p, n) is None)


def _node_object(
    name: str, cpu: int, gpus: int, taints: list[dict[str, Any]], unschedulable: bool
) -> _NodeObject:
    allocatable = {"cpu": str(cpu), "memory": "16Gi", "pods": "4"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return _NodeObject(
        {
            "metadata": {"name": name, "labels": {}},
            "spec": {"taints": taints, "unschedulable": unschedulable},
            "status": {"allocatable": allocatable, "capacity": allocatable},
        }
    )


def test_vector_scan_finds_what_the_node_loop_finds() -> None:
    """NodeColumns.scan (numpy columns) against the per-node loop, on random clusters with
    full, tainted, unschedulable and GPU nodes, from every start, as pods come and go and
    nodes change or leave: the same feasible nodes, in the same order, the same count of
    nodes looked at and the same infeasible ones."""
    rng = random.Random(7)
    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    scheduler = Scheduler(None, SchedulerConfig())  # type: ignore[arg-type]
    for i in range(60):
        scheduler._node_added(
            _node_object(
                f"n{i:02d}",
                cpu=rng.choice((1, 2, 4)),
                gpus=rng.choice((0, 0, 1, 2)),
                taints=[taint] if rng.random() < 0.15 else [],
                unschedulable=rng.random() < 0.05,
            )
        )
    shapes = [
        pod("small", cpu="500m"),
        pod("big", cpu="3"),
        pod("tolerant", cpu="1", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
        SchedPod(
            {
                "metadata": {"name": "gpu", "namespace": "default"},
                "spec": {
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
                },
            }
        ),
    ]
    ignored = scheduler.ignored_resources
    compared = 0
    for step in range(40):
        # Change the cluster: bind a pod somewhere, delete one, or change a node.
        names = list(scheduler.node_order)
        action = rng.random()
        if action < 0.6:
            target = rng.choice(names)
            scheduler._pod_changed(None, pod(f"p{step}", cpu="1", node_name=target))
        elif action < 0.8 and len(names) > 40:
            scheduler._node_deleted(_NodeObject({"metadata": {"name": rng.choice(names)}}))
        else:
            name = rng.choice(names)
            scheduler._node_updated(
                _NodeObject({"metadata": {"name": name}}),
                _node_object(name, cpu=rng.choice((1, 8)), gpus=1, taints=[], unschedulable=False),
            )
        total = len(scheduler.node_order)
        for shape in shapes:
            for to_find in (1, 5, total):
                for start in range(total):
                    expected = scheduler._scan_nodes(shape, start, to_find)
                    got = scheduler.columns.scan(
                        shape,
                        scheduler.node_order,
                        scheduler.nodes,
                        start,
                        to_find,
                        ignored,
                        lambda p, n: run_filters(p, n, ignored) is None,
                    )
                    assert got is not None
                    assert [n.name for n in got[0]] == [n.name for n in expected[0]]
                    assert got[1:] == expected[1:]
                    compared += 1
    assert compared > 10_000


def test_taints_and_tolerations() -> None:
    tainted = node(taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    assert run_filters(pod(), tainted) == (
        UNRESOLVABLE,
        ["node(s) had untolerated taint {dedicated: gpu}"],
    )
    tolerating = pod(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"}])
    assert run_filters(tolerating, tainted) is None
    soft = node(taints=[{"key": "x", "effect": "PreferNoSchedule"}])
    assert run_filters(pod(), soft) is None


def test_not_ready_node_is_kept_out_by_its_taint() -> None:
    not_ready = node(taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
    assert run_filters(pod(), not_ready) == (
        UNRESOLVABLE,
        ["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"],
    )


def test_unschedulable_node() -> None:
    cordoned = node(unschedulable=True)
    assert run_filters(pod(), cordoned) == (UNRESOLVABLE, ["node(s) were unschedulable"])
    tolerant = pod(
        tolerations=[
            {
                "key": "node.kubernetes.io/unschedulable",
                "operator": "Exists",
                "effect": "NoSchedule",
            }
        ]
    )
    assert run_filters(tolerant, cordoned) is None


def test_node_selector_and_required_affinity() -> None:
    gpu = node(labels={"accelerator": "a100", "gen": "4"})
    selected = pod(nodeSelector={"accelerator": "a100"})
    assert run_filters(selected, gpu) is None
    assert run_filters(selected, node()) == (
        UNRESOLVABLE,
        ["node(s) didn't match Pod's node affinity/selector"],
    )

    def affinity(*terms: dict[str, Any]) -> SchedPod:
        return pod(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": list(terms)
                    }
                }
            }
        )

    def expr(key: str, op: str, *values: str) -> dict[str, Any]:
        return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}

    assert run_filters(affinity(expr("accelerator", "In", "a100", "h100")), gpu) is None
    assert run_filters(affinity(expr("accelerator", "NotIn", "a100")), gpu) is not None
    assert run_filters(affinity(expr("gen", "Gt", "3")), gpu) is None
    assert run_filters(affinity(expr("gen", "Lt", "3")), gpu) is not None
    assert run_filters(affinity(expr("zone", "DoesNotExist")), gpu) is None
    # Terms are ORed; an empty term matches nothing.
    assert run_filters(affinity({}, expr("accelerator", "Exists")), gpu) is None
    assert run_filters(affinity({}), gpu) is not None
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    assert run_filters(affinity(by_name), gpu) is None


def test_filter_order_reports_the_first_failing_plugin() -> None:
    # Tainted *and* too small: TaintToleration runs before NodeResourcesFit.
    n = node(cpu="1", taints=[{"key": "a", "value": "b", "effect": "NoExecute"}])
    assert run_filters(pod(cpu="2"), n) == (
        UNRESOLVABLE,
        ["node(s) had untolerated taint {a: b}"],
    )


# ------------------------------------------------------------------------------ sampling


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (0, 50, 50),  # small clusters: every node
        (0, 99, 99),
        (0, 1000, 420),  # adaptive: 50 - 1000/125 = 42 %
        (0, 5000, 500),  # 50 - 40 = 10 %
        (0, 10000, 500),  # floored at 5 %
        (0, 150, 100),  # 49 % of 150 = 73, below the minimum of 100
        (10, 500, 100),  # never fewer than 100
        (100, 1000, 1000),
        (30, 1000, 300),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def test_least_allocated_prefers_emptier_nodes() -> None:
    empty, busy = node("a"), node("b")
    busy.add(pod("x", cpu="3", memory="6Gi", node_name="b"))
    incoming = pod(cpu="1", memory="1Gi")
    assert least_allocated(incoming, empty) > least_allocated(incoming, busy)
    # (4-1)/4*100 = 75 for cpu, (8-1)/8*100 = 87 for memory -> (75 + 87) // 2
    assert least_allocated(incoming, empty) == (75 + 87) // 2


def test_fit_error_message_is_kube_schedulers() -> None:
    statuses = {
        "a": (UNSCHEDULABLE, ["Insufficient cpu", "Insufficient memory"]),
        "b": (UNSCHEDULABLE, ["Insufficient cpu"]),
        "c": (UNRESOLVABLE, ["node(s) didn't match Pod's node affinity/selector"]),
    }
    assert fit_error_message(3, statuses) == (
        "0/3 nodes are available: 1 Insufficient memory, 1 node(s) didn't match Pod's node "
        "affinity/selector, 2 Insufficient cpu."
    )
    assert fit_error_message(3, statuses, "preemption: 0/3 nodes are available: 3 x").endswith(
        "2 Insufficient cpu. preemption: 0/3 nodes are available: 3 x."
    )


# ------------------------------------------------------------------------------ queue


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_post_filter_counts_nodes_where_preemption_cannot_help() -> None:
    """DefaultPreemption's reasons: only nodes refused as plain Unschedulable are tried; nodes
    refused as unresolvable and nodes with no status (not sampled) are 'not helpful'."""
    nodes = {n.name: n for n in (node("a", cpu="1"), node("b"), node("c"), node("d"))}
    holder = pod("holder", cpu="1", priority=10, node_name="a")
    nodes["a"].add(holder)
    scheduler = SimpleNamespace(
        nodes=nodes,
        node_order=list(nodes),
        pods_on=lambda name: [holder] if name == "a" else [],
        ignored_resources=frozenset(),
        extenders=[],
    )
    preemptor = Preemptor(scheduler)  # type: ignore[arg-type]
    waiting = pod("member", cpu="1", priority=0)
    refused = {
        "b": (UNRESOLVABLE, ["gang default/g: waiting for admission"]),
        "c": (UNRESOLVABLE, ["gang default/g: waiting for admission"]),
        "elsewhere": (UNRESOLVABLE, ["not a node"]),  # a key that names no node is ignored
    }
    message, nominated = await preemptor.post_filter(waiting, FitError(4, refused))
    assert nominated is None
    assert message == (
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling"
    )
    # A node full of a higher-priority pod is worth a dry run, which finds no victims.
    full = {**refused, "a": (UNSCHEDULABLE, ["Insufficient cpu"])}
    message, nominated = await preemptor.post_filter(waiting, FitError(4, full))
    assert nominated is None
    assert message == (
        "preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, "
        "3 Preemption is not helpful for scheduling"
    )


async def test_queue_pops_by_priority_then_time_in_queue() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock=clock)
    q.add(pod("low-first", priority=0, created="2026-01-02T00:00:00Z"))
    clock.now += 1
    q.add(pod("high", priority=10, created="2026-01-03T00:00:00Z"))
    clock.now += 1
    q.add(pod("low-second", priority=0, created="2026-01-01T00:00:00Z"))  # made earlier, came later
    order = [(await q.pop()).pod.name for _ in range(3)]  # type: ignore[union-attr]
    assert order == ["high", "low-first", "low-second"]


async def test_a_refused_pod_goes_behind_the_pods_of_its_priority_that_waited_meanwhile() -> None:
    """kube-scheduler refreshes a pod's queue Timestamp when an attempt sends it back: an old pod
    refused again and again never keeps a newer one of its priority waiting (issue 31's soak:
    admitted members of new gangs waited minutes behind old, never-admitted ones)."""
    clock = FakeClock()
    q = SchedulingQueue(clock=clock)
    q.add(pod("old", created="2026-01-01T00:00:00Z"))
    refused = await q.pop()
    assert refused is not None
    clock.now += 1
    q.add(pod("new", created="2026-01-02T00:00:00Z"))
    clock.now += 1
    q.requeue_unschedulable(refused, q.scheduling_cycle)
    clock.now += 10  # past its backoff: the next event sends it straight to activeQ
    q.move_all()
    assert q.location("default/old") == ACTIVE
    order = [(await q.pop()).pod.name for _ in range(2)]  # type: ignore[union-attr]
    assert order == ["new", "old"]


async def test_queue_backoff_doubles_to_the_cap() -> None:
    q = SchedulingQueue(initial_backoff=1, max_backoff=10)
    assert [q.backoff_duration(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


async def test_unschedulable_pods_move_on_cluster_events() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock=clock)
    q.add(pod("a"))
    queued = await q.pop()
    assert queued is not None
    q.requeue_unschedulable(queued, q.scheduling_cycle)
    assert q.location("default/a") == POOL
    q.move_all()  # within its 1 s backoff (from its last attempt): it waits that out first
    assert q.location("default/a") == BACKOFF
    q.close()


async def test_unschedulable_pods_past_their_backoff_go_straight_to_active() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock=clock)
    q.add(pod("a"))
    queued = await q.pop()
    assert queued is not None
    q.requeue_unschedulable(queued, q.scheduling_cycle)
    clock.now += 5
    q.move_all()
    assert q.location("default/a") == ACTIVE


async def test_event_during_the_attempt_sends_the_pod_to_backoff_not_the_pool() -> None:
    q = SchedulingQueue()
    q.add(pod("a"))
    queued = await q.pop()
    assert queued is not None
    cycle = q.scheduling_cycle
    q.move_all()  # e.g. a node was added while the pod was being scheduled
    q.requeue_unschedulable(queued, cycle)
    assert q.location("default/a") == BACKOFF


async def test_an_update_of_the_pod_during_its_attempt_is_not_lost() -> None:
    q = SchedulingQueue()
    q.add(pod("a"))
    q.add(pod("b"))
    first = await q.pop()
    second = await q.pop()
    assert first is not None and second is not None
    # e.g. vulcan stamped the pod's gang as admitted while the filter was rejecting it.
    q.update(first.pod, relevant=True)
    q.update(second.pod, relevant=False)  # a status write changes nothing
    cycle = q.scheduling_cycle
    q.requeue_unschedulable(first, cycle)
    q.requeue_unschedulable(second, cycle)
    assert q.location(first.pod.key) == BACKOFF
    assert q.location(second.pod.key) == POOL
    q.close()


async def test_errors_back_off_then_return_to_active() -> None:
    q = SchedulingQueue(initial_backoff=0.05, max_backoff=0.05)
    q.add(pod("a"))
    queued = await q.pop()
    assert queued is not None
    q.requeue_error(queued)
    assert q.location("default/a") == BACKOFF
    again = await asyncio.wait_for(q.pop(), 5)
    assert again is not None and again.attempts == 2
    q.close()


async def test_deleted_pods_leave_the_queue() -> None:
    q = SchedulingQueue()
    q.add(pod("a"))
    q.add(pod("b"))
    q.delete("default/a")
    queued = await q.pop()
    assert queued is not None and queued.pod.name == "b"
    assert len(q) == 0


async def test_an_ungated_pod_keeps_the_time_it_was_first_queued() -> None:
    """kube-scheduler adds a gated pod at its creation (PreEnqueue parks it): once its gates go
    it enters activeQ with that Timestamp, before the pods of its priority refused since."""
    clock = FakeClock()
    q = SchedulingQueue(clock=clock)
    gated = pod("gated")
    q.hold_gated(gated.key)
    assert q.location(gated.key) is None
    clock.now += 1
    q.add(pod("churning"))
    refused = await q.pop()
    assert refused is not None
    clock.now += 1
    q.requeue_unschedulable(refused, q.scheduling_cycle)
    clock.now += 10
    q.move_all()
    q.hold_gated(gated.key)  # an update that leaves the gates: still the first time
    q.add(pod("gated"))  # the gates removed
    order = [(await q.pop()).pod.name for _ in range(2)]  # type: ignore[union-attr]
    assert order == ["gated", "churning"]
