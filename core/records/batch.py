"""Records of the kinds only the controllers read: workloads, Volcano Jobs and Commands."""

from __future__ import annotations

from typing import Any

from core.api import keys
from core.records.common import NO_LABELS, OwnerRef, controller_of, meta_key, owner_refs


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
        annotations = meta.get("annotations") or NO_LABELS
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


class CommandRecord:
    """A `bus.volcano.sh` Command: an action for a target object."""

    __slots__ = ("action", "key", "name", "namespace", "rv", "target", "uid")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.key = meta_key(meta)
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


class FlowObjectRecord:
    """A `flow.volcano.sh` JobFlow or JobTemplate: identity, what a change of it means to its
    controller (generation, annotations, deletion), the labels Jobs are found by, and the raw
    object (they are few; the controllers read them through the models when they reconcile)."""

    __slots__ = (
        "annotations",
        "deleting",
        "finalizers",
        "generation",
        "key",
        "labels",
        "name",
        "namespace",
        "obj",
        "owner",
        "phase",
        "rv",
        "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.generation = int(meta.get("generation") or 0)
        self.annotations: dict[str, str] = meta.get("annotations") or NO_LABELS
        self.labels: dict[str, str] = meta.get("labels") or NO_LABELS
        self.finalizers: tuple[str, ...] = tuple(meta.get("finalizers") or ())
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.owner: OwnerRef | None = controller_of(owner_refs(meta))
        self.phase: str = ((obj.get("status") or {}).get("state") or {}).get("phase") or ""
        self.obj = obj
