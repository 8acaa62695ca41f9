"""Property: whatever the gang planner places, kube-scheduler's filters accept.

Random clusters (nodes with labels, taints, cordons; running pods with labels, host ports and
required anti-affinity) and random gangs (tolerations, nodeSelector, node affinity, host ports,
pod affinity / anti-affinity, hard topology spread). For every plan that succeeds, the members
are admitted one by one in the order the planner placed them, each checked on its node by the
rules below, against the running pods and the members admitted before it.

The rules are written here from kube-scheduler's plugin documentation (kubernetes.io: "Taints
and Tolerations", "Assigning Pods to Nodes", "Pod Topology Spread Constraints", and the
NodePorts / NodeResourcesFit filter descriptions), over the raw pod and node JSON, and share no
code with the product (plugins.model.feasibility, plugins.model.gang_fit).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cache import ClusterCache
from core.records import NodeRecord, PodRecord
from core.resources import ResourceVector
from plugins.model.placement import plan_gang

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
TAINTS = [
    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "batch", "effect": "NoExecute"},
    {"key": "soft", "value": "y", "effect": "PreferNoSchedule"},
]
TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"},
    {"key": "dedicated", "operator": "Equal", "value": "batch"},
    {"operator": "Exists"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]

# ------------------------------------------------------------- the rules, from the docs


def tolerated(taint: dict[str, str], tolerations: list[dict[str, str]]) -> bool:
    """A toleration matches a taint when the keys are the same (an empty key with Exists
    matches every key) and the effects are the same (an empty effect matches every effect),
    and the operator is Exists, or Equal (the default) with the same value."""
    for t in tolerations:
        if t.get("key") and t["key"] != taint["key"]:
            continue
        if not t.get("key") and t.get("operator") != "Exists":
            continue
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def expression_ok(expr: dict[str, Any], value: str | None) -> bool:
    op, values = expr["operator"], expr.get("values") or []
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op == "Gt":
        return value is not None and int(value) > int(values[0])
    if op == "Lt":
        return value is not None and int(value) < int(values[0])
    raise AssertionError(op)


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(
        expression_ok(e, labels.get(e["key"])) for e in selector.get("matchExpressions") or ()
    )


def node_selected(spec: dict[str, Any], node: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return True
    for term in required["nodeSelectorTerms"]:
        fields = {"metadata.name": node["metadata"]["name"]}
        if all(
            expression_ok(e, labels.get(e["key"])) for e in term.get("matchExpressions", [])
        ) and all(expression_ok(e, fields.get(e["key"])) for e in term.get("matchFields", [])):
            return True
    return False


def host_ports(spec: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [
        (p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", p["hostPort"])
        for c in spec["containers"]
        for p in c.get("ports") or ()
        if p.get("hostPort")
    ]


def terms(pod: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return ((pod["spec"].get("affinity") or {}).get(kind) or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []


def term_selects(term: dict[str, Any], owner: dict[str, Any], other: dict[str, Any]) -> bool:
    namespaces = term.get("namespaces") or [owner["metadata"]["namespace"]]
    return other["metadata"]["namespace"] in namespaces and selects(
        term.get("labelSelector"), other["metadata"].get("labels") or {}
    )


def cpu_of(pod: dict[str, Any]) -> int:
    return sum(int(c["resources"]["requests"]["cpu"]) for c in pod["spec"]["containers"])


def admits(
    nodes: dict[str, dict[str, Any]],
    placed: list[tuple[dict[str, Any], str]],
    pod: dict[str, Any],
    at: str,
) -> str | None:
    """None when kube-scheduler's filters let `pod` onto node `at`, with `placed` (pod, node)
    already there; else the rule that refuses it."""
    node = nodes[at]
    spec = pod["spec"]
    labels_of = {name: n["metadata"].get("labels") or {} for name, n in nodes.items()}
    here = labels_of[at]
    tolerations = spec.get("tolerations") or []
    if node["spec"].get("unschedulable") and not tolerated(
        {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"},
        tolerations,
    ):
        return "unschedulable"
    for taint in node["spec"].get("taints") or ():
        if taint["effect"] in ("NoSchedule", "NoExecute") and not tolerated(taint, tolerations):
            return "taint"
    if not node_selected(spec, node):
        return "node affinity"
    for ip, proto, port in host_ports(spec):
        for other, where in placed:
            if where != at:
                continue
            for oip, oproto, oport in host_ports(other["spec"]):
                if (port == oport and proto == oproto and "0.0.0.0" in (ip, oip)) or (
                    ip,
                    proto,
                    port,
                ) == (oip, oproto, oport):
                    return "ports"
    used = sum(cpu_of(other) for other, where in placed if where == at) + cpu_of(pod)
    if used > int(node["status"]["allocatable"]["cpu"]):
        return "cpu"
    # Topology spread (DoNotSchedule): on eligible nodes (having the key and, by default,
    # matching the pod's node selector/affinity), skew = matching pods in the node's domain
    # (+1 when the pod matches itself) - the least in any domain, at most maxSkew.
    for c in spec.get("topologySpreadConstraints") or ():
        key = c["topologyKey"]
        if key not in here:
            return "spread label"
        eligible = {
            name
            for name, n in nodes.items()
            if all(k["topologyKey"] in labels_of[name] for k in spec["topologySpreadConstraints"])
            and node_selected(spec, n)
        }
        counts = {labels_of[name][key]: 0 for name in eligible}
        for other, where in placed:
            if (
                where in eligible
                and other["metadata"]["namespace"] == pod["metadata"]["namespace"]
                and selects(c.get("labelSelector"), other["metadata"].get("labels") or {})
            ):
                counts[labels_of[where][key]] += 1
        own = 1 if selects(c.get("labelSelector"), pod["metadata"].get("labels") or {}) else 0
        low = min(counts.values()) if counts else 0
        if counts.get(here[key], 0) + own - low > c["maxSkew"]:
            return "spread"
    # Required pod affinity: every term has a matching pod in the node's domain; unless no
    # pod anywhere matches and the pod matches its own terms (the first of a series).
    affinity = terms(pod, "podAffinity")
    if affinity:
        if any(t["topologyKey"] not in here for t in affinity):
            return "affinity label"
        satisfied = all(
            any(
                term_selects(t, pod, other)
                and labels_of[where].get(t["topologyKey"]) == here[t["topologyKey"]]
                for other, where in placed
            )
            for t in affinity
        )
        if not satisfied:
            anyone = any(term_selects(t, pod, other) for t in affinity for other, _ in placed)
            self_match = all(term_selects(t, pod, pod) for t in affinity)
            if anyone or not self_match:
                return "affinity"
    # Required anti-affinity, both ways: no pod it selects in the node's domain, and no pod
    # whose anti-affinity selects it in that pod's domain.
    for t in terms(pod, "podAntiAffinity"):
        value = here.get(t["topologyKey"])
        for other, where in placed:
            if (
                value is not None
                and labels_of[where].get(t["topologyKey"]) == value
                and term_selects(t, pod, other)
            ):
                return "anti-affinity"
    for other, where in placed:
        for t in terms(other, "podAntiAffinity"):
            value = labels_of[where].get(t["topologyKey"])
            if (
                value is not None
                and here.get(t["topologyKey"]) == value
                and term_selects(t, other, pod)
            ):
                return "existing anti-affinity"
    return None


# ------------------------------------------------------------------------- strategies


@st.composite
def node_objs(draw: st.DrawFn, i: int) -> dict[str, Any]:
    labels = {HOST: f"n{i}"}
    zone = draw(st.sampled_from(["a", "b", "c", None]))
    if zone:
        labels[ZONE] = zone
    if draw(st.booleans()):
        labels["disk"] = draw(st.sampled_from(["ssd", "hdd"]))
    labels["gen"] = str(draw(st.integers(1, 4)))
    return {
        "metadata": {"name": f"n{i}", "labels": labels},
        "spec": {
            "unschedulable": draw(st.booleans()) and draw(st.booleans()),
            "taints": draw(
                st.lists(st.sampled_from(TAINTS), max_size=2, unique_by=lambda t: t["key"])
            ),
        },
        "status": {
            "allocatable": {
                "cpu": str(draw(st.sampled_from([2, 4, 8]))),
                "memory": "64Gi",
                "pods": "110",
            },
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def anti_term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


ports_st = st.sampled_from(
    [
        None,
        {"containerPort": 80, "hostPort": 8080},
        {"containerPort": 80, "hostPort": 8080, "protocol": "UDP"},
        {"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"},
        {"containerPort": 81, "hostPort": 9090},
    ]
)


def pod_obj(
    name: str, spec: dict[str, Any], labels: dict[str, str], port: Any, group: str | None
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": "1"}}}
    if port:
        container["ports"] = [port]
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels, "annotations": annotations},
        "spec": {"containers": [container], **spec},
        "status": {"phase": "Running" if spec.get("nodeName") else "Pending"},
    }


@st.composite
def running_pods(draw: st.DrawFn, nodes: list[str]) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(0, 5))):
        spec: dict[str, Any] = {"nodeName": draw(st.sampled_from(nodes))}
        app = draw(st.sampled_from(["a", "b", "w"]))
        if draw(st.booleans()) and draw(st.booleans()):
            key = draw(st.sampled_from([HOST, ZONE]))
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        anti_term(draw(st.sampled_from(["a", "w"])), key)
                    ]
                }
            }
        out.append(pod_obj(f"run-{i}", spec, {"app": app}, draw(ports_st), None))
    return out


@st.composite
def task_spec(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str], Any]:
    spec: dict[str, Any] = {}
    labels = {"app": draw(st.sampled_from(["w", "a"]))}
    tolerations = draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2))
    if tolerations:
        spec["tolerations"] = tolerations
    if draw(st.booleans()) and draw(st.booleans()):
        spec["nodeSelector"] = {"disk": draw(st.sampled_from(["ssd", "hdd"]))}
    affinity: dict[str, Any] = {}
    if draw(st.booleans()) and draw(st.booleans()):
        op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
        key = "gen" if op in ("Gt", "Lt") else draw(st.sampled_from([ZONE, "disk"]))
        expr: dict[str, Any] = {"key": key, "operator": op}
        if op in ("In", "NotIn"):
            expr["values"] = draw(
                st.lists(st.sampled_from(["a", "b", "ssd"]), min_size=1, max_size=2)
            )
        elif op in ("Gt", "Lt"):
            expr["values"] = [str(draw(st.integers(1, 4)))]
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr]}]
            }
        }
    if draw(st.booleans()):
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                anti_term(
                    draw(st.sampled_from(["w", "a", "b"])), draw(st.sampled_from([HOST, ZONE]))
                )
            ]
        }
    if draw(st.booleans()) and draw(st.booleans()):
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                anti_term(draw(st.sampled_from(["w", "b"])), draw(st.sampled_from([HOST, ZONE])))
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    if draw(st.booleans()):
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": draw(st.integers(1, 2)),
                "topologyKey": draw(st.sampled_from([HOST, ZONE])),
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": draw(st.sampled_from(["w", "a"]))}},
            }
        ]
    return spec, labels, draw(ports_st)


@st.composite
def clusters(
    draw: st.DrawFn,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], int, str]:
    nodes = [draw(node_objs(i)) for i in range(draw(st.integers(1, 6)))]
    running = draw(running_pods([n["metadata"]["name"] for n in nodes]))
    members = []
    for t in range(draw(st.integers(1, 2))):
        spec, labels, port = draw(task_spec())
        for i in range(draw(st.integers(1, 4))):
            members.append(pod_obj(f"g-{t}-{i}", spec, labels, port, "g"))
    need = draw(st.integers(1, len(members)))
    prefer = draw(st.sampled_from(["binpack", "spread"]))
    return nodes, running, members, need, prefer


def cluster_cache(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache()
    for n in nodes:
        cache.on_node_add(NodeRecord(n))
    for p in pods:
        cache.on_pod_add(PodRecord(p))
    return cache


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_whatever_the_planner_places_kube_scheduler_accepts(case: Any) -> None:
    nodes, running, members, need, prefer = case
    cache = cluster_cache(nodes, running + members)
    snapshot = cache.snapshot()
    records = [snapshot.pods[f"ns/{m['metadata']['name']}"] for m in members]
    plan = plan_gang(snapshot, records, need, {}, prefer=prefer)
    if not plan.ok:
        return
    assert len(plan.slots) >= need
    by_name = {n["metadata"]["name"]: n for n in nodes}
    raw = {f"ns/{m['metadata']['name']}": m for m in members}
    placed = [(p, p["spec"]["nodeName"]) for p in running]
    for key, at in plan.slots.items():  # in the order the planner placed them
        refused = admits(by_name, placed, raw[key], at)
        assert refused is None, f"{key} on {at}: kube-scheduler refuses ({refused})"
        placed.append((raw[key], at))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_a_plan_on_the_live_view_is_the_plan_on_a_copy(case: Any, data: Any) -> None:
    """The live view's free amounts come from the cache's numpy node columns
    (`plugins.model.free_rows`), a copy's node by node: the same plan either way, with room
    reserved on some nodes by other gangs."""
    nodes, running, members, need, prefer = case
    cache = cluster_cache(nodes, running + members)
    names = [n["metadata"]["name"] for n in nodes]
    reserved = {
        name: ResourceVector({"cpu": data.draw(st.integers(0, 4000)), "pods": 1})
        for name in data.draw(st.lists(st.sampled_from([*names, "gone"]), unique=True))
    }
    live, copy = cache.live_view(), cache.snapshot()
    assert live.node_columns() is not None and copy.node_columns() is None
    records = [copy.pods[f"ns/{m['metadata']['name']}"] for m in members]
    on_copy = plan_gang(copy, records, need, reserved, prefer=prefer)
    assert plan_gang(live, records, need, reserved, prefer=prefer) == on_copy
