"""Records of the cluster-scoped kinds: nodes, namespaces, PriorityClasses and Volcano Queues."""

from __future__ import annotations

from typing import Any

from core.api import keys
from core.records.common import NO_LABELS, opt, resources
from core.resources import ResourceVector


class NodeRecord:
    __slots__ = (
        "allocatable",
        "blocking_taints",
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
        self.labels: dict[str, str] = meta.get("labels") or NO_LABELS
        self.unschedulable = bool(spec.get("unschedulable"))
        self.taints: tuple[tuple[str, str, str], ...] = tuple(
            (t.get("key", ""), t.get("value", ""), t.get("effect", ""))
            for t in spec.get("taints") or ()
        )
        # The taints kube-scheduler's TaintToleration filter reads (PreferNoSchedule only
        # scores): most nodes have none, and the planner's fast path checks this empty tuple.
        self.blocking_taints = tuple(t for t in self.taints if t[2] in ("NoSchedule", "NoExecute"))
        self.allocatable = (
            resources(status.get("allocatable"))
            or resources(status.get("capacity"))
            or ResourceVector()
        )
        self.ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )


class NamespaceRecord:
    """A namespace as queue selection reads it: its `scheduling.volcano.sh/queue-name`."""

    __slots__ = ("key", "name", "queue", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.name: str = meta["name"]
        self.key = self.name
        self.rv: str = meta.get("resourceVersion", "")
        self.queue: str | None = opt((meta.get("annotations") or NO_LABELS).get(keys.QUEUE_NAME))


class QueueRecord:
    """A Volcano Queue: its share inputs (the scheduler) and its state and tree (the queue
    controller). `state` and `parent` are kept raw: "" (never written) and values outside the
    enum mean different things to the controller; the scheduler reads "" as Open."""

    __slots__ = (
        "capability",
        "closed_by_parent",
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
        self.capability = resources(spec.get("capability"))
        self.deserved = resources(spec.get("deserved"))
        self.guarantee = resources((spec.get("guarantee") or {}).get("resource"))
        self.reclaimable = spec.get("reclaimable") is not False
        self.parent: str = spec.get("parent") or ""
        self.priority = int(spec.get("priority") or 0)
        self.state: str = (obj.get("status") or {}).get("state") or ""
        self.closed_by_parent: str = (meta.get("annotations") or NO_LABELS).get(
            keys.CLOSED_BY_PARENT, ""
        )

    @property
    def scheduling_state(self) -> str:
        """The state as the scheduler reads it: never written counts as Open."""
        return self.state or "Open"


class PriorityClassRecord:
    """A PriorityClass as job priority reads it (Volcano's scheduler cache resolves a PodGroup's
    `priorityClassName` to this value; `globalDefault` when it names none)."""

    __slots__ = ("global_default", "key", "name", "rv", "value")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.name: str = meta["name"]
        self.key = self.name
        self.rv: str = meta.get("resourceVersion", "")
        self.value = int(obj.get("value") or 0)
        self.global_default = bool(obj.get("globalDefault"))
