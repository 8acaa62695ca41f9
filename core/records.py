"""Slim records: what scheduling and the controllers read of nodes, pods, PodGroups and Queues.

Decoded once from raw JSON (orjson dicts), never from kubernetes-asyncio models. `__slots__`
classes holding only strings, numbers, tuples and ResourceVectors: no reference cycles, ~1 KB a
pod instead of ~16 KB as a dict. Records are immutable by convention (an update is a new record).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from core.api import keys
from core.resources import ResourceVector, pod_requests

_NO_LABELS: dict[str, str] = {}


def _key(meta: dict[str, Any]) -> str:
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else meta["name"]


_VECTORS: dict[tuple[tuple[str, int], ...], ResourceVector] = {}
_intern = sys.intern


def pod_group_key(namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    """`namespace/name` of the PodGroup a pod belongs to: Volcano's annotation
    `scheduling.k8s.io/group-name`, else the coscheduling label `scheduling.x-k8s.io/pod-group`;
    None outside any group, and for pods carrying Kubernetes' native gang fields
    (`spec.schedulingGroup` / `spec.workloadRef`), which kube-scheduler's own plugin handles."""
    if spec.get("schedulingGroup") or spec.get("workloadRef"):
        return None
    name = (meta.get("annotations") or _NO_LABELS).get(keys.GROUP_NAME) or (
        meta.get("labels") or _NO_LABELS
    ).get(keys.COSCHEDULING_POD_GROUP)
    return f"{namespace}/{name}" if name else None


def shared_vector(vector: ResourceVector) -> ResourceVector:
    """One object for every equal vector: the pods of a job all request the same, and 100,000
    pods then hold a few hundred vectors instead of 100,000 (vectors are never mutated)."""
    signature = tuple(sorted(vector.items()))
    known = _VECTORS.get(signature)
    if known is None:
        if len(_VECTORS) > 100_000:  # a pathological variety of shapes: stop sharing
            return vector
        _VECTORS[signature] = known = vector
    return known


def _opt(value: Any) -> str | None:
    return _intern(value) if isinstance(value, str) and value else None


# ResourceQuota names that Volcano's controllers write into a PodGroup's minResources besides
# the resource names (a pod's quota usage: `count/pods`, `requests.cpu`, `limits.memory`, ...;
# spec/volcano.md §4.5). Volcano's scheduler reads only resource names, and so does vulcan.
_QUOTA_ONLY_PREFIXES = ("requests.", "limits.", "count/")


def _scheduling_names(resource_list: Any) -> Any:
    if not isinstance(resource_list, Mapping):
        return resource_list
    return {k: v for k, v in resource_list.items() if not k.startswith(_QUOTA_ONLY_PREFIXES)}


def _resources(resource_list: Any) -> ResourceVector | None:
    if not resource_list:
        return None
    try:
        return ResourceVector.from_resource_list(resource_list)
    except ValueError:
        return None


class NodeRecord:
    __slots__ = (
        "allocatable",
        "key",
        "labels",
        "name",
        "ready",
        "rv",
        "taints",
        "uid",
        "unschedulable",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        self.name: str = meta["name"]
        self.key = self.name
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.labels: dict[str, str] = meta.get("labels") or _NO_LABELS
        self.unschedulable = bool(spec.get("unschedulable"))
        self.taints: tuple[tuple[str, str, str], ...] = tuple(
            (t.get("key", ""), t.get("value", ""), t.get("effect", ""))
            for t in spec.get("taints") or ()
        )
        self.allocatable = (
            _resources(status.get("allocatable"))
            or _resources(status.get("capacity"))
            or ResourceVector()
        )
        self.ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )


class PodRecord:
    # No labels: nothing that reads pods from the cache needs them, and they are the biggest
    # part of a pod kept in memory. Repeated strings (namespace, node, phase, group ...) are
    # interned so 100,000 pods share them, and equal request vectors are shared.
    __slots__ = (
        "annotations_preemptable",
        "created",
        "deleting",
        "gates",
        "group",
        "key",
        "name",
        "namespace",
        "node",
        "nominated_node",
        "owner",
        "phase",
        "priority",
        "queue_annotation",
        "requests",
        "rv",
        "scheduler_name",
        "task",
        "uid",
        "unschedulable",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        annotations = meta.get("annotations") or _NO_LABELS
        labels = meta.get("labels") or _NO_LABELS
        self.namespace: str = _intern(meta.get("namespace", ""))
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.created: str = meta.get("creationTimestamp", "")
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.node: str | None = _opt(spec.get("nodeName"))
        self.nominated_node: str | None = _opt(status.get("nominatedNodeName"))
        self.phase: str = _intern(status.get("phase") or "Pending")
        self.priority = int(spec.get("priority") or 0)
        self.scheduler_name: str = _intern(spec.get("schedulerName") or "default-scheduler")
        self.gates: tuple[str, ...] = tuple(
            _intern(str(g.get("name", ""))) for g in spec.get("schedulingGates") or ()
        )
        # A scheduler tried this pending pod and gave up for now (PodScheduled False): it waits
        # in kube-scheduler's unschedulable pool until some event moves it.
        self.unschedulable = self.node is None and any(
            c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in status.get("conditions") or ()
        )
        group = pod_group_key(self.namespace, meta, spec)
        self.group: str | None = _intern(group) if group else None
        self.task: str | None = _opt(annotations.get(keys.TASK_SPEC) or labels.get(keys.TASK_SPEC))
        self.queue_annotation: str | None = _opt(annotations.get(keys.QUEUE_NAME))
        preemptable = annotations.get(keys.PREEMPTABLE, labels.get(keys.PREEMPTABLE))
        # Volcano: a pod is preemptable unless it says otherwise.
        self.annotations_preemptable = preemptable != "false"
        owner = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
        self.owner: tuple[str, str, str] | None = (
            (_intern(owner.get("kind", "")), _intern(owner.get("name", "")), owner.get("uid", ""))
            if owner
            else None
        )
        try:
            self.requests = shared_vector(pod_requests(spec))
        except (ValueError, TypeError):
            self.requests = shared_vector(ResourceVector({"pods": 1}))

    @property
    def gated(self) -> bool:
        """Held back from scheduling by a scheduling gate."""
        return bool(self.gates)

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def occupies_node(self) -> bool:
        """Counts against its node's capacity: bound and not finished (terminating pods still
        hold their resources until they are gone, as kube-scheduler counts them)."""
        return self.node is not None and not self.terminal


class PodGroupRecord:
    __slots__ = (
        "annotations",
        "created",
        "job_owned",
        "key",
        "min_member",
        "min_resources",
        "min_task_member",
        "name",
        "namespace",
        "phase",
        "priority_class",
        "queue",
        "rv",
        "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.annotations: dict[str, str] = meta.get("annotations") or _NO_LABELS
        self.created: str = meta.get("creationTimestamp", "")
        self.min_member = int(spec.get("minMember") or 0)
        self.min_task_member: dict[str, int] = dict(spec.get("minTaskMember") or {})
        self.min_resources = _resources(_scheduling_names(spec.get("minResources")))
        self.queue: str = spec.get("queue") or keys.DEFAULT_QUEUE
        self.priority_class: str | None = spec.get("priorityClassName") or None
        self.phase: str = (obj.get("status") or {}).get("phase") or "Pending"
        # Made by Volcano's job controller for a vcjob, whose pods exist only once it is Inqueue.
        self.job_owned = any(
            r.get("controller")
            and r.get("kind") == "Job"
            and str(r.get("apiVersion", "")).startswith("batch.volcano.sh/")
            for r in meta.get("ownerReferences") or ()
        )


class QueueRecord:
    __slots__ = (
        "capability",
        "created",
        "deserved",
        "guarantee",
        "key",
        "name",
        "parent",
        "priority",
        "reclaimable",
        "rv",
        "state",
        "uid",
        "weight",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        self.name: str = meta["name"]
        self.key = self.name
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.created: str = meta.get("creationTimestamp", "")
        self.weight = int(spec.get("weight") or 1)
        self.capability = _resources(spec.get("capability"))
        self.deserved = _resources(spec.get("deserved"))
        self.guarantee = _resources((spec.get("guarantee") or {}).get("resource"))
        self.reclaimable = spec.get("reclaimable") is not False
        self.parent: str | None = spec.get("parent") or None
        self.priority = int(spec.get("priority") or 0)
        self.state: str = (obj.get("status") or {}).get("state") or "Open"


def decode_key(obj: dict[str, Any]) -> str:
    return _key(obj["metadata"])


class NamespaceRecord:
    """A namespace as queue selection reads it: its `scheduling.volcano.sh/queue-name`."""

    __slots__ = ("key", "name", "queue", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.name: str = meta["name"]
        self.key = self.name
        self.rv: str = meta.get("resourceVersion", "")
        self.queue: str | None = _opt((meta.get("annotations") or _NO_LABELS).get(keys.QUEUE_NAME))
