"""Slim records of what the controllers read, decoded once from raw JSON (one per kind for every
controller of a process: they share one informer per resource).

Only the fields the controllers use are kept (a pod is a few hundred bytes, not ~16 KiB); the
few annotations and labels a PodGroup inherits are picked out at decode time. The pod's
ResourceQuota usage (the basis of `minResources`) is computed here too, once per pod version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.api import keys
from core.quota import pod_quota_usage

_EMPTY: dict[str, str] = {}

# Pod annotations a workload's PodGroup is built from (Volcano's pg-controller).
POD_ANNOTATIONS = (
    keys.GROUP_NAME,
    keys.QUEUE_NAME,
    keys.PREEMPTABLE,
    keys.COOLDOWN_TIME,
    keys.REVOCABLE_ZONE,
    keys.JDB_MIN_AVAILABLE,
    keys.JDB_MAX_UNAVAILABLE,
    keys.NETWORK_TOPOLOGY_MODE,
    keys.NETWORK_TOPOLOGY_HIGHEST_TIER,
)
# Kubernetes' StatefulSet controller labels each pod with the revision it was made from.
CONTROLLER_REVISION_HASH = "controller-revision-hash"
POD_LABELS = (keys.PREEMPTABLE, keys.COOLDOWN_TIME, CONTROLLER_REVISION_HASH)


def _pick(source: Mapping[str, str] | None, names: tuple[str, ...]) -> dict[str, str]:
    if not source:
        return _EMPTY
    picked = {name: source[name] for name in names if name in source}
    return picked or _EMPTY


def _meta_key(meta: Mapping[str, Any]) -> str:
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def controller_ref(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with `controller: true`, if any."""
    return next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)


class PodRecord:
    __slots__ = (
        "annotations",
        "deleting",
        "exit_code",
        "index",
        "job_name",
        "job_version",
        "key",
        "labels",
        "name",
        "namespace",
        "out_of_sync",
        "owner",
        "owner_refs",
        "phase",
        "priority_class",
        "ready",
        "restarts",
        "rv",
        "scheduler_name",
        "task",
        "uid",
        "usage",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.scheduler_name: str = spec.get("schedulerName") or "default-scheduler"
        self.priority_class: str = spec.get("priorityClassName") or ""
        self.annotations = _pick(meta.get("annotations"), POD_ANNOTATIONS)
        self.labels = _pick(meta.get("labels"), POD_LABELS)
        self.owner_refs: tuple[dict[str, Any], ...] = tuple(meta.get("ownerReferences") or ())
        self.owner = controller_ref(meta)
        status = obj.get("status") or {}
        phase = status.get("phase") or "Pending"
        self.phase: str = phase
        self.usage = pod_quota_usage(spec, terminal=phase in ("Succeeded", "Failed"))
        # What Volcano's job controller reads of its pods.
        annotations = meta.get("annotations") or _EMPTY
        self.job_name: str = annotations.get(keys.JOB_NAME, "")
        self.task: str = annotations.get(keys.TASK_SPEC, "")
        try:
            self.index = int(annotations.get(keys.TASK_INDEX, "-1"))
        except ValueError:
            self.index = -1
        # Marked by the job controller before it deletes the pod (not an eviction).
        self.out_of_sync = annotations.get("volcano.sh/controller-out-of-sync") == "true"
        try:
            self.job_version = int(annotations.get(keys.JOB_VERSION, "0") or 0)
        except ValueError:
            self.job_version = 0
        statuses = status.get("containerStatuses") or ()
        self.ready = bool(statuses) and all(c.get("ready") for c in statuses)
        self.restarts = sum(
            int(c.get("restartCount") or 0)
            for c in (*(status.get("initContainerStatuses") or ()), *statuses)
        )
        # The first container's exit code once it terminated (Volcano's PodFailed exitCode).
        first = (statuses[0].get("state") or {}).get("terminated") if statuses else None
        self.exit_code: int | None = int(first.get("exitCode") or 0) if first else None

    @property
    def group_name(self) -> str:
        return self.annotations.get(keys.GROUP_NAME, "")


class WorkloadRecord:
    """A ReplicaSet or StatefulSet (or a DaemonSet / batch Job read once): what a PodGroup
    inherits from its owner, and how many replicas it wants."""

    __slots__ = (
        "annotations",
        "key",
        "kind",
        "name",
        "namespace",
        "replicas",
        "revision",
        "rv",
        "uid",
    )

    def __init__(self, obj: dict[str, Any], kind: str = "") -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        # Items of a list carry no kind on a real API server: the informer says which it is.
        self.kind: str = kind or obj.get("kind", "")
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.rv: str = meta.get("resourceVersion", "")
        self.uid: str = meta.get("uid", "")
        annotations = meta.get("annotations") or _EMPTY
        # Only what a PodGroup takes from its owner: the min-member and volcano.sh/* keys.
        self.annotations = {
            k: v
            for k, v in annotations.items()
            if k == keys.GROUP_MIN_MEMBER or k.startswith("volcano.sh/")
        }
        # A ReplicaSet/StatefulSet without spec.replicas wants 1 (the API server's default).
        replicas = spec.get("replicas")
        self.replicas: int = 1 if replicas is None else int(replicas)
        self.revision: str = (obj.get("status") or {}).get("updateRevision") or ""


class NamespaceRecord:
    __slots__ = ("key", "queue", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key: str = meta["name"]
        self.rv: str = meta.get("resourceVersion", "")
        self.queue: str = (meta.get("annotations") or _EMPTY).get(keys.QUEUE_NAME, "")


class PodGroupRecord:
    """A PodGroup as both controllers need it: its queue and phase (queue accounting), and the
    spec fields the PodGroup controller keeps up to date."""

    __slots__ = (
        "annotations",
        "key",
        "labels",
        "min_member",
        "min_resources",
        "name",
        "namespace",
        "network_topology",
        "owner",
        "phase",
        "priority_class",
        "queue",
        "rv",
        "spec",
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
        self.annotations: dict[str, str] = meta.get("annotations") or _EMPTY
        self.labels: dict[str, str] = meta.get("labels") or _EMPTY
        self.min_member = int(spec.get("minMember") or 0)
        self.min_resources: dict[str, Any] | None = spec.get("minResources")
        self.priority_class: str = spec.get("priorityClassName") or ""
        self.network_topology: dict[str, Any] | None = spec.get("networkTopology")
        self.owner = controller_ref(meta)
        self.spec: dict[str, Any] = spec
        self.queue: str = spec.get("queue") or keys.DEFAULT_QUEUE
        self.phase: str = (obj.get("status") or {}).get("phase") or "Pending"


class QueueRecord:
    __slots__ = ("closed_by_parent", "key", "name", "parent", "rv", "state", "uid")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.name: str = meta["name"]
        self.key = self.name
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.parent: str = (obj.get("spec") or {}).get("parent") or ""
        # Raw: "" (never written) and values outside the enum mean different things.
        self.state: str = (obj.get("status") or {}).get("state") or ""
        self.closed_by_parent: str = (meta.get("annotations") or _EMPTY).get(
            keys.CLOSED_BY_PARENT, ""
        )


class CommandRecord:
    """A `bus.volcano.sh` Command: an action for a target object."""

    __slots__ = ("action", "key", "name", "namespace", "rv", "target", "uid")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.key = _meta_key(meta)
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.action: str = obj.get("action") or ""
        self.target: dict[str, Any] = obj.get("target") or {}


class JobRecord:
    """A `batch.volcano.sh` Job: identity, phase and version, and the raw object (jobs are
    few; the job controller reads the spec through the models when it reconciles)."""

    __slots__ = ("deleting", "key", "name", "namespace", "obj", "phase", "rv", "uid", "version")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        status = obj.get("status") or {}
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.phase: str = (status.get("state") or {}).get("phase") or ""
        self.version = int(status.get("version") or 0)
        self.obj = obj
