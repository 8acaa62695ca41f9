"""plugins.model.feasibility and the gang planner's use of it (plugins.model.gang_fit through
plugins.model.placement.plan_gang): kube-scheduler's filters with hand-computed outcomes, and the
cases of issue 32 (tainted GPU nodes, node affinity, host ports, anti-affinity)."""

from __future__ import annotations

from typing import Any

import pytest

from core.cache import ClusterCache
from core.records import NodeRecord, PodRecord
from core.records.constraints import HostPort, Toleration
from plugins.model.feasibility import (
    fit_error,
    node_affinity_matches,
    ports_conflict,
    selector_matches,
    static_reason,
    tolerates,
)
from plugins.model.placement import plan_gang

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(
    name: str,
    *,
    cpu: str = "16",
    taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    unschedulable: bool = False,
) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name, "labels": {HOST: name, **(labels or {})}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {
                "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def pod(
    name: str,
    *,
    group: str | None = "g",
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    cpu: str = "1",
    ports: list[dict[str, Any]] | None = None,
    namespace: str = "ns",
    **spec: Any,
) -> PodRecord:
    container: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    if ports:
        container["ports"] = ports
    body: dict[str, Any] = {"containers": [container], **spec}
    if node_name:
        body["nodeName"] = node_name
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return PodRecord(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels or {},
                "annotations": annotations,
            },
            "spec": body,
            "status": {"phase": "Running" if node_name else "Pending"},
        }
    )


def cluster(nodes: list[NodeRecord], pods: list[PodRecord] = ()):  # type: ignore[assignment]
    cache = ClusterCache()
    for n in nodes:
        cache.on_node_add(n)
    for p in pods:
        cache.on_pod_add(p)
    return cache.snapshot()


def anti(labels: dict[str, str], key: str = HOST) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
            ]
        }
    }


# ------------------------------------------------------------------------ predicates


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("a", "Equal", "x", "NoSchedule"), ("a", "x", "NoSchedule"), True),
        (Toleration("a", "Equal", "y", "NoSchedule"), ("a", "x", "NoSchedule"), False),
        (Toleration("a", "", "x", ""), ("a", "x", "NoExecute"), True),  # "" effect: all
        (Toleration("a", "Exists", "", "NoExecute"), ("a", "x", "NoSchedule"), False),
        (Toleration("a", "Exists", "", ""), ("a", "anything", "NoSchedule"), True),
        (Toleration("", "Exists", "", ""), ("b", "x", "NoExecute"), True),  # tolerates all
        (Toleration("", "Exists", "", "NoSchedule"), ("b", "x", "NoExecute"), False),
        (Toleration("b", "Exists", "", ""), ("a", "x", "NoSchedule"), False),
    ],
)
def test_toleration_matching(toleration: Toleration, taint: Any, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_static_filters_in_kube_scheduler_words() -> None:
    tainted = node("g", taints=[GPU_TAINT])
    plain = pod("p").constraints
    untolerated = "node(s) had untolerated taint {nvidia.com/gpu: present}"
    assert static_reason(tainted, plain) == untolerated
    tolerant = pod("t", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert static_reason(tainted, tolerant.constraints) is None
    soft = node("s", taints=[{"key": "x", "effect": "PreferNoSchedule"}])
    assert static_reason(soft, None) is None  # PreferNoSchedule only scores
    cordoned = node("c", unschedulable=True)
    assert static_reason(cordoned, None) == "node(s) were unschedulable"
    cordon_ok = pod(
        "u",
        tolerations=[
            {
                "key": "node.kubernetes.io/unschedulable",
                "operator": "Exists",
                "effect": "NoSchedule",
            }
        ],
    )
    assert static_reason(cordoned, cordon_ok.constraints) is None
    selector = pod("n", nodeSelector={"disk": "ssd"})
    assert static_reason(node("h"), selector.constraints) == (
        "node(s) didn't match Pod's node affinity/selector"
    )
    assert static_reason(node("h", labels={"disk": "ssd"}), selector.constraints) is None


def _affinity(*terms: dict[str, Any]) -> Any:
    return pod(
        "a",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        },
    ).constraints


def test_node_affinity_operators() -> None:
    n = node("n1", labels={"zone": "a", "gen": "5"})
    expr = lambda key, op, *values: {  # noqa: E731
        "matchExpressions": [{"key": key, "operator": op, "values": list(values)}]
    }
    assert node_affinity_matches(_affinity(expr("zone", "In", "a", "b")), n)
    assert not node_affinity_matches(_affinity(expr("zone", "NotIn", "a")), n)
    assert node_affinity_matches(_affinity(expr("rack", "NotIn", "a")), n)  # absent label
    assert node_affinity_matches(_affinity(expr("zone", "Exists")), n)
    assert node_affinity_matches(_affinity(expr("rack", "DoesNotExist")), n)
    assert node_affinity_matches(_affinity(expr("gen", "Gt", "4")), n)
    assert not node_affinity_matches(_affinity(expr("gen", "Lt", "5")), n)
    name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    assert node_affinity_matches(_affinity(name), n)
    other = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    assert not node_affinity_matches(_affinity(other), n)
    # Terms are ORed, the requirements of one term ANDed; an empty term matches nothing.
    assert node_affinity_matches(_affinity(other, expr("zone", "In", "a")), n)
    assert not node_affinity_matches(_affinity({}), n)


def test_selector_and_ports() -> None:
    assert selector_matches(pod("x").constraints and None, {}) is False  # None: no pod
    any_ip = HostPort("0.0.0.0", "TCP", 8080)
    assert ports_conflict([any_ip], [HostPort("10.0.0.1", "TCP", 8080)])
    assert not ports_conflict([any_ip], [HostPort("0.0.0.0", "UDP", 8080)])
    assert not ports_conflict(
        [HostPort("10.0.0.1", "TCP", 8080)], [HostPort("10.0.0.2", "TCP", 8080)]
    )
    assert fit_error(3, {"Insufficient cpu": 1, "node(s) were unschedulable": 2}) == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable."
    )


def test_pod_without_constraints_has_none_and_ports_are_read() -> None:
    assert pod("plain", ports=[{"containerPort": 80}]).constraints is None
    with_port = pod("hp", ports=[{"containerPort": 80, "hostPort": 8080}])
    assert with_port.constraints is not None
    assert with_port.constraints.host_ports == (HostPort("0.0.0.0", "TCP", 8080),)


# ------------------------------------------------------------------ the gang planner


def test_gpu_gang_tolerating_the_taint_is_placed_on_tainted_nodes() -> None:
    nodes = [node(f"gpu-{i}", taints=[GPU_TAINT]) for i in range(2)]
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    members = [pod(f"m{i}", tolerations=tolerations) for i in range(4)]
    plan = plan_gang(cluster(nodes), members, 4, {})
    assert plan.ok and set(plan.slots.values()) <= {"gpu-0", "gpu-1"}
    refused = plan_gang(cluster(nodes), [pod(f"m{i}") for i in range(4)], 4, {})
    assert not refused.ok
    assert refused.reason == (
        "no schedulable node: 0/2 nodes are available: 2 node(s) had untolerated taint "
        "{nvidia.com/gpu: present}."
    )


def test_node_affinity_gang_goes_where_pinned() -> None:
    nodes = [node("hollow-node-0"), node("hollow-node-1")]
    pinned = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": HOST, "operator": "In", "values": ["hollow-node-1"]}
                        ]
                    }
                ]
            }
        }
    }
    members = [pod(f"m{i}", affinity=pinned) for i in range(3)]
    plan = plan_gang(cluster(nodes), members, 3, {})
    assert plan.ok and set(plan.slots.values()) == {"hollow-node-1"}
    too_many = [pod(f"m{i}", affinity=pinned, cpu="6") for i in range(3)]
    failed = plan_gang(cluster(nodes), too_many, 3, {})
    assert not failed.ok
    assert "1 node(s) didn't match Pod's node affinity/selector" in failed.reason
    assert "1 Insufficient cpu" in failed.reason


def test_host_port_members_land_on_distinct_nodes() -> None:
    nodes = [node(f"n{i}") for i in range(8)]
    port = [{"containerPort": 8080, "hostPort": 8080}]
    members = [pod(f"m{i}", ports=port) for i in range(8)]
    plan = plan_gang(cluster(nodes), members, 8, {})
    assert plan.ok and len(set(plan.slots.values())) == 8
    few = plan_gang(cluster(nodes[:3]), members, 8, {})
    assert not few.ok and few.placed == 3
    assert "3 node(s) didn't have free ports for the requested pod ports" in few.reason
    # A port in use on a node (a bound pod) or promised there (another gang's reservation).
    bound = pod("web", group=None, node_name="n0", ports=port)
    reserved = pod("other", group="h", ports=port)
    snap = cluster(nodes[:3], [bound, reserved])
    plan = plan_gang(snap, members[:1], 1, {}, held={"ns/other": "n1"}.get)
    assert plan.ok and plan.slots == {"ns/m0": "n2"}


def test_anti_affinity_members_land_on_distinct_nodes() -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    members = [pod(f"m{i}", labels={"app": "w"}, affinity=anti({"app": "w"})) for i in range(4)]
    plan = plan_gang(cluster(nodes), members, 4, {})
    assert plan.ok and len(set(plan.slots.values())) == 4
    failed = plan_gang(cluster(nodes[:3]), members, 4, {})
    assert not failed.ok
    assert "3 node(s) didn't match pod anti-affinity rules" in failed.reason


def test_existing_pods_anti_affinity_keeps_members_away() -> None:
    nodes = [node("n0"), node("n1")]
    lonely = pod("lonely", group=None, node_name="n0", affinity=anti({"app": "w"}))
    members = [pod(f"m{i}", labels={"app": "w"}) for i in range(2)]
    plan = plan_gang(cluster(nodes, [lonely]), members, 2, {})
    assert plan.ok and set(plan.slots.values()) == {"n1"}
    other = [pod(f"o{i}", labels={"app": "x"}) for i in range(2)]
    assert plan_gang(cluster(nodes, [lonely]), other, 2, {}).ok


def test_pod_affinity_follows_the_first_member_into_its_zone() -> None:
    nodes = [node(f"n{i}", labels={ZONE: "ab"[i % 2]}) for i in range(4)]
    together = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": ZONE}
            ]
        }
    }
    members = [pod(f"m{i}", labels={"app": "w"}, affinity=together, cpu="6") for i in range(4)]
    plan = plan_gang(cluster(nodes), members, 4, {})
    assert plan.ok
    zones = {dict(n.labels)[ZONE] for n in nodes if n.name in plan.slots.values()}
    assert len(zones) == 1
    # An existing matching pod pins the series to its zone.
    anchor = pod("anchor", group=None, node_name="n1", labels={"app": "w"}, cpu="1")
    plan = plan_gang(cluster(nodes, [anchor]), members[:2], 2, {})
    assert plan.ok and set(plan.slots.values()) <= {"n1", "n3"}  # zone b


def test_topology_spread_counts_members_as_they_land() -> None:
    nodes = [node(f"n{i}", labels={ZONE: "abc"[i % 3]}) for i in range(6)]
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "s"}},
        }
    ]
    members = [
        pod(f"m{i}", labels={"app": "s"}, topologySpreadConstraints=spread) for i in range(6)
    ]
    plan = plan_gang(cluster(nodes), members, 6, {})
    assert plan.ok
    per_zone: dict[str, int] = {}
    for name in plan.slots.values():
        zone = "abc"[int(name[1:]) % 3]
        per_zone[zone] = per_zone.get(zone, 0) + 1
    assert per_zone == {"a": 2, "b": 2, "c": 2}


def test_tasks_with_different_tolerations_each_go_where_they_may() -> None:
    """A GPU task that tolerates the GPU nodes' taint and a CPU task that does not: two
    profiles, each member on a node its own filters accept."""
    nodes = [node("gpu-0", taints=[GPU_TAINT]), node("cpu-0"), node("cpu-1")]
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    gpu = [pod(f"g{i}", tolerations=tolerations, nodeSelector={"pool": "gpu"}) for i in range(2)]
    cpu = [pod(f"c{i}", cpu="10") for i in range(2)]
    nodes[0] = node("gpu-0", taints=[GPU_TAINT], labels={"pool": "gpu"})
    plan = plan_gang(cluster(nodes), [*gpu, *cpu], 4, {})
    assert plan.ok
    assert {plan.slots["ns/g0"], plan.slots["ns/g1"]} == {"gpu-0"}
    assert {plan.slots["ns/c0"], plan.slots["ns/c1"]} == {"cpu-0", "cpu-1"}


def test_members_differing_only_in_a_per_pod_label_are_one_profile() -> None:
    from plugins.model.gang_fit import GangFit

    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    members = [pod(f"m{i}", labels={"index": str(i)}, tolerations=tolerations) for i in range(3)]
    snap = cluster([node("gpu-0", taints=[GPU_TAINT])])
    assert GangFit(snap, members).fast  # the batched walk, not one member at a time
    assert plan_gang(snap, members, 3, {}).ok
