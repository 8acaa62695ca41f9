"""The soak's view of the cluster: slim records of the objects it watches (pods, PodGroups,
queues, nodes, Volcano Jobs, HyperNodes), decoded from the API server's JSON, and resource
arithmetic on plain dicts (`{"cpu": millicores, "memory": bytes, "pods": count}`).

Only what the invariants need is kept; the checker (`bench.soak_checker`) reads these records
and nothing else, so its unit tests build them directly."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.api.topology import HyperNode
from core.resources_parse import cpu_milli, to_int

GROUP_NAME = "scheduling.k8s.io/group-name"
JOB_NAME = "volcano.sh/job-name"
TERMINAL = ("Succeeded", "Failed")
JOB_FINAL = ("Completed", "Failed", "Terminated", "Aborted")

Resources = dict[str, int]


def parse_resources(raw: dict[str, Any] | None) -> Resources:
    """cpu in millicores, everything else as an integer (memory in bytes)."""
    out: Resources = {}
    for name, value in (raw or {}).items():
        out[name] = cpu_milli(value) if name == "cpu" else to_int(value)
    return out


def add(a: Resources, b: Resources) -> Resources:
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) + value
    return out


def sub(a: Resources, b: Resources) -> Resources:
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) - value
    return out


def over(used: Resources, limit: Resources) -> dict[str, tuple[int, int]]:
    """The dimensions of `limit` that `used` exceeds: name -> (used, limit)."""
    return {n: (used.get(n, 0), cap) for n, cap in limit.items() if used.get(n, 0) > cap}


def fits(need: Resources, room: Resources) -> bool:
    return all(value <= room.get(name, 0) for name, value in need.items() if value > 0)


def show(res: Resources) -> str:
    parts = []
    for name, value in sorted(res.items()):
        if name == "cpu":
            parts.append(f"cpu={value / 1000:g}")
        elif name == "memory":
            parts.append(f"memory={value / 2**30:g}Gi")
        else:
            parts.append(f"{name}={value}")
    return ",".join(parts)


@dataclass(slots=True)
class Pod:
    key: str  # namespace/name
    uid: str = ""
    rv: str = ""
    group: str = ""  # namespace/podgroup, or "" for a pod of no gang
    job: str = ""  # namespace/vcjob that owns the pod, if any
    node: str = ""
    phase: str = "Pending"
    deleting: bool = False
    requests: Resources = field(default_factory=dict)
    restarts: int = 0
    created: str = ""
    disruption: str = ""  # why the system took the pod away (DisruptionTarget, NodeLost, ...)
    priority: int = 0  # spec.priority, as priority admission resolved its priorityClassName
    labels: dict[str, str] = field(default_factory=dict)  # (a subgroup is chosen by them)

    @property
    def live_bound(self) -> bool:
        """Bound, not terminating, not finished: a member that counts towards its gang."""
        return bool(self.node) and not self.deleting and self.phase not in TERMINAL

    @property
    def occupies(self) -> bool:
        """Holds room on its node (a terminating pod still does, as kube-scheduler counts it)."""
        return bool(self.node) and self.phase not in TERMINAL

    @property
    def waiting(self) -> bool:
        return not self.node and not self.deleting and self.phase not in TERMINAL


@dataclass(slots=True)
class Group:
    key: str
    rv: str = ""
    min_member: int = 1
    queue: str = "default"
    min_resources: Resources = field(default_factory=dict)
    phase: str = ""
    job: str = ""  # namespace/vcjob that owns the PodGroup, if any
    message: str = ""  # its last condition's message (why it waits)
    created: str = ""
    topology: dict[str, Any] | None = None  # spec.networkTopology
    subgroups: list[dict[str, Any]] = field(default_factory=list)  # spec.subGroupPolicy


@dataclass(slots=True)
class Queue:
    key: str
    rv: str = ""
    weight: int = 1
    capability: Resources = field(default_factory=dict)
    state: str = "Open"
    allocated: Resources = field(default_factory=dict)  # status.allocated, as vulcan wrote it


@dataclass(slots=True)
class Node:
    key: str
    rv: str = ""
    allocatable: Resources = field(default_factory=dict)
    ready: bool = True
    schedulable: bool = True  # no NoSchedule/NoExecute taint, not cordoned
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class HyperNodeRecord:
    key: str
    rv: str = ""
    spec: HyperNode | None = None  # None: one the webhook would refuse (never placed on)


@dataclass(slots=True)
class Job:
    key: str
    rv: str = ""
    uid: str = ""
    phase: str = ""
    retries: int = 0
    replicas: int = 0
    min_available: int = 0
    queue: str = "default"


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: dict[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def _owner(obj: dict[str, Any], kind: str) -> str:
    meta = _meta(obj)
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == kind:
            return f"{meta.get('namespace', '')}/{ref.get('name', '')}"
    return ""


def pod_requests(spec: dict[str, Any]) -> Resources:
    total: Resources = {}
    for container in spec.get("containers") or ():
        total = add(total, parse_resources((container.get("resources") or {}).get("requests")))
    for container in spec.get("initContainers") or ():
        init = parse_resources((container.get("resources") or {}).get("requests"))
        total = {n: max(total.get(n, 0), init.get(n, 0)) for n in set(total) | set(init)}
    total["pods"] = 1
    return total


def decode_pod(obj: dict[str, Any]) -> Pod:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    ns = meta.get("namespace", "")
    group = (meta.get("annotations") or {}).get(GROUP_NAME, "")
    job = (meta.get("labels") or {}).get(JOB_NAME, "") or _owner(obj, "Job").split("/")[-1]
    restarts = sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or ())
    disruption = next(
        (
            c.get("reason") or "DisruptionTarget"
            for c in status.get("conditions") or ()
            if c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        ),
        status.get("reason")
        if status.get("reason") in ("NodeLost", "Evicted", "Preempted")
        else "",
    )
    return Pod(
        key=_key(obj),
        uid=meta.get("uid", ""),
        rv=meta.get("resourceVersion", ""),
        group=f"{ns}/{group}" if group else "",
        job=f"{ns}/{job}" if job else "",
        node=spec.get("nodeName") or "",
        phase=status.get("phase") or "Pending",
        deleting=bool(meta.get("deletionTimestamp")),
        requests=pod_requests(spec),
        restarts=restarts,
        created=meta.get("creationTimestamp", ""),
        disruption=disruption or "",
        priority=int(spec.get("priority") or 0),
        labels=dict(meta.get("labels") or {}),
    )


def decode_group(obj: dict[str, Any]) -> Group:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    conditions = status.get("conditions") or ()
    return Group(
        key=_key(obj),
        rv=meta.get("resourceVersion", ""),
        min_member=int(spec.get("minMember") or 1),
        queue=spec.get("queue") or "default",
        min_resources=parse_resources(spec.get("minResources")),
        phase=status.get("phase") or "",
        job=_owner(obj, "Job"),
        message=(conditions[-1].get("message") or "") if conditions else "",
        created=meta.get("creationTimestamp", ""),
        topology=spec.get("networkTopology") or None,
        subgroups=[p for p in spec.get("subGroupPolicy") or () if isinstance(p, dict)],
    )


def decode_queue(obj: dict[str, Any]) -> Queue:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    return Queue(
        key=_key(obj),
        rv=meta.get("resourceVersion", ""),
        weight=int(spec.get("weight") or 1),
        capability=parse_resources(spec.get("capability")),
        state=status.get("state") or "Open",
        allocated=parse_resources(status.get("allocated")),
    )


def decode_node(obj: dict[str, Any]) -> Node:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    tainted = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or ())
    return Node(
        key=_key(obj),
        rv=meta.get("resourceVersion", ""),
        allocatable=parse_resources(status.get("allocatable")),
        ready=ready,
        schedulable=ready and not tainted and not spec.get("unschedulable"),
        labels=dict(meta.get("labels") or {}),
    )


def decode_hypernode(obj: dict[str, Any]) -> HyperNodeRecord:
    meta = _meta(obj)
    try:
        spec: HyperNode | None = HyperNode.model_validate(obj)
    except ValueError:
        spec = None
    return HyperNodeRecord(key=_key(obj), rv=meta.get("resourceVersion", ""), spec=spec)


def decode_job(obj: dict[str, Any]) -> Job:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    tasks = spec.get("tasks") or ()
    return Job(
        key=_key(obj),
        rv=meta.get("resourceVersion", ""),
        uid=meta.get("uid", ""),
        phase=(status.get("state") or {}).get("phase") or "",
        retries=int(status.get("retryCount") or 0),
        replicas=sum(int(t.get("replicas") or 0) for t in tasks),
        min_available=int(spec.get("minAvailable") or 0),
        queue=spec.get("queue") or "default",
    )
