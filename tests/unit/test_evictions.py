"""plugins.actions.evictions: reclaim and preempt for a gang as pure decisions over a snapshot —
whole units, the filters (critical, preemptable read as Go's ParseBool, own job), placement-driven
stopping and the reprieve."""

from __future__ import annotations

from typing import Any

from core.cache import ClusterCache, Snapshot
from core.records import NodeRecord, PodGroupRecord, PodRecord
from core.resources import ResourceVector
from core.served import ServedPods
from plugins.actions.evictions import EvictionRequest, Planned, choose_evictions
from plugins.framework.config import default_config, parse_scheduler_config
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy
from plugins.model.victims import victim_units
from tests.session_harness import session

SESSION = build_policy(default_config())
SERVE_ALL = ServedPods.every()


def node(name: str, cpu: int = 4) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name},
            "status": {
                "allocatable": {"cpu": str(cpu), "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def group(name: str, members: int, created: str = "2026-01-01T00:00:00Z") -> PodGroupRecord:
    return PodGroupRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": {"minMember": members, "queue": "q"},
            "status": {"phase": "Running"},
        }
    )


def pod(
    name: str,
    group_name: str | None,
    node_name: str | None = None,
    *,
    cpu: int = 2,
    priority: int = 0,
    annotations: dict[str, str] | None = None,
    priority_class: str = "",
    scheduler: str | None = None,
) -> PodRecord:
    notes = dict(annotations or {})
    if group_name:
        notes["scheduling.k8s.io/group-name"] = group_name
    else:
        notes.setdefault("scheduling.volcano.sh/queue-name", "q")  # the gangs' queue
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
        "priority": priority,
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_name:
        spec["nodeName"] = node_name
    if scheduler:
        spec["schedulerName"] = scheduler
    return PodRecord(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "annotations": notes,
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending"},
        }
    )


def snapshot(
    nodes: list[NodeRecord], groups: list[PodGroupRecord], pods: list[PodRecord]
) -> Snapshot:
    cache = ClusterCache()
    for n in nodes:
        cache.on_node_add(n)
    for g in groups:
        cache.on_podgroup_add(g)
    for p in pods:
        cache.on_pod_add(p)
    return cache.snapshot()


def decide(
    snap: Snapshot,
    gang: PodGroupRecord,
    members: list[PodRecord],
    priority: int,
    policy: Policy = SESSION,
) -> Planned | None:
    request = EvictionRequest(
        need=len(members),
        per_task={},
        reserved={},
        demand=ResourceVector({"cpu": 2000 * len(members)}),
        priority=priority,
    )
    return choose_evictions(session(policy, snap, queue_of=lambda pod: "q"), gang, members, request)


def test_preempt_takes_whole_lower_priority_gangs_youngest_first_and_only_what_is_needed() -> None:
    old, young = group("old", 2, "2026-01-01T00:00:00Z"), group("young", 2, "2026-01-02T00:00:00Z")
    new = group("new", 2)
    pods = [
        pod("old-0", "old", "n1"),
        pod("old-1", "old", "n1"),
        pod("young-0", "young", "n2"),
        pod("young-1", "young", "n2"),
    ]
    members = [pod("new-0", "new", priority=10), pod("new-1", "new", priority=10)]
    snap = snapshot([node("n1"), node("n2")], [old, young, new], pods + members)
    chosen = decide(snap, new, members, priority=10)
    assert chosen is not None and chosen.evictions.action == "preempt"
    assert [u.group for u in chosen.evictions.units] == ["ns/young"]  # the younger gang, whole
    assert set(chosen.evictions.units[0].pods) == {"ns/young-0", "ns/young-1"}
    assert set(chosen.plan.slots.values()) == {"n2"}


def test_critical_non_preemptable_and_equal_priority_units_are_never_victims() -> None:
    new = group("new", 1)
    members = [pod("new-0", "new", priority=10, cpu=4)]
    for blocker in (
        pod("x", None, "n1", cpu=4, priority_class="system-node-critical"),
        pod("x", None, "n1", cpu=4, annotations={"volcano.sh/preemptable": "False"}),
        pod("x", None, "n1", cpu=4, annotations={"volcano.sh/preemptable": "0"}),
        pod("x", None, "n1", cpu=4, priority=10),  # not lower than the preemptor
    ):
        snap = snapshot([node("n1")], [new], [blocker, *members])
        assert decide(snap, new, members, priority=10) is None
    evictable = pod("x", None, "n1", cpu=4, annotations={"volcano.sh/preemptable": "True"})
    snap = snapshot([node("n1")], [new], [evictable, *members])
    chosen = decide(snap, new, members, priority=10)
    assert chosen is not None and chosen.evictions.units[0].pods == ("ns/x",)


def test_units_being_freed_are_no_victims() -> None:
    new = group("new", 1)
    members = [pod("new-0", "new", priority=10, cpu=4)]
    snap = snapshot([node("n1")], [new], [pod("x", None, "n1", cpu=4), *members])
    assert victim_units(snap, new.key, {"ns/x"}, lambda p: "q", SERVE_ALL) == []
    assert [u.pods for u in victim_units(snap, new.key, set(), lambda p: "q", SERVE_ALL)] == [
        ("ns/x",)
    ]


def test_an_action_left_out_of_the_conf_evicts_nothing() -> None:
    new = group("new", 1)
    members = [pod("new-0", "new", priority=10, cpu=4)]
    snap = snapshot([node("n1")], [new], [pod("x", None, "n1", cpu=4), *members])
    tiers = "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: proportion\n"

    def conf(actions: str) -> Policy:
        return build_policy(parse_scheduler_config(f'actions: "{actions}"\n{tiers}'))

    assert decide(snap, new, members, 10, conf("enqueue, allocate, reclaim")) is None
    assert decide(snap, new, members, 10, conf("enqueue, allocate, preempt")) is not None


def _with_spec(record: PodRecord, **spec: Any) -> PodRecord:
    """`record` again with more of a pod spec (host ports, tolerations ...)."""
    raw: dict[str, Any] = {
        "metadata": {
            "name": record.name,
            "namespace": record.namespace,
            "annotations": dict(record.annotations),
            "creationTimestamp": record.created,
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": str(record.requests.cpu // 1000)}},
                    **spec.pop("container", {}),
                }
            ],
            "priority": record.priority,
            **({"nodeName": record.node} if record.node else {}),
            **spec,
        },
        "status": {"phase": record.phase},
    }
    return PodRecord(raw)


def test_a_victim_holding_the_host_port_frees_it_and_victims_stay_on_usable_nodes() -> None:
    """The gang's member asks for hostPort 8080, which a low-priority pod holds on n1 although
    n1 has cpu to spare: evicting it frees the port (kube-scheduler's NodePorts). n2 is tainted:
    its pods are no victims, whatever they free."""
    port = {"ports": [{"containerPort": 80, "hostPort": 8080}]}
    holder = _with_spec(pod("holder", None, "n1", cpu=1), container=port)
    tainted = NodeRecord(
        {
            "metadata": {"name": "n2"},
            "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    elsewhere = pod("elsewhere", None, "n2", cpu=1)
    new = group("new", 1)
    member = _with_spec(pod("new-0", "new", priority=10, cpu=1), container=port)
    snap = snapshot([node("n1"), tainted], [new], [holder, elsewhere, member])
    chosen = decide(snap, new, [member], priority=10)
    assert chosen is not None and chosen.evictions.action == "preempt"
    assert [u.pods for u in chosen.evictions.units] == [("ns/holder",)]
    assert chosen.plan.slots == {"ns/new-0": "n1"}


def test_only_pods_vulcan_schedules_are_victims() -> None:
    """Another scheduler's pods are never victims, alone or as a gang; with a filter marker
    only the pods that carry it reach vulcan."""
    new = group("new", 1)
    other = group("other", 1)
    pods = [
        pod("plain-default", None, "n1", scheduler="default-scheduler"),
        pod("plain-ours", None, "n1", scheduler="volcano"),
        pod("gang-default", "other", "n2", scheduler="default-scheduler"),
        pod("new-0", "new", priority=10, scheduler="volcano"),
    ]
    snap = snapshot([node("n1"), node("n2")], [new, other], pods)
    served = ServedPods.of(["volcano"])
    units = victim_units(snap, new.key, set(), lambda p: "q", served)
    assert [u.pods for u in units] == [("ns/plain-ours",)]
    assert len(victim_units(snap, new.key, set(), lambda p: "q", SERVE_ALL)) == 3
    marked = ServedPods.of(["volcano"], marker="vulcan.sh/managed")
    assert victim_units(snap, new.key, set(), lambda p: "q", marked) == []
