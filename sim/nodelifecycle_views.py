"""What the node lifecycle controller (`sim.nodelifecycle`) reads of Nodes, Leases and Pods
(its informers' records), and the API's time format it reads and writes.

Separate because both halves of the controller, node health (`sim.nodelifecycle_health`) and
NoExecute eviction (`sim.nodelifecycle_eviction`), read the same records; neither half imports
the other.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sim.taints import NO_EXECUTE


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _NodeView:
    __slots__ = ("conditions", "heartbeat", "key", "ready", "rv", "taints", "uid")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key: str = meta["name"]
        self.rv: str = meta.get("resourceVersion", "")
        self.uid: str = meta.get("uid", "")
        self.taints: list[dict[str, Any]] = list((obj.get("spec") or {}).get("taints") or ())
        self.conditions: list[dict[str, Any]] = list(
            (obj.get("status") or {}).get("conditions") or ()
        )
        self.ready: str | None = None
        self.heartbeat: str | None = None
        for condition in self.conditions:
            if condition.get("type") == "Ready":
                self.ready = condition.get("status")
                self.heartbeat = condition.get("lastHeartbeatTime")

    def no_execute(self) -> list[dict[str, Any]]:
        return [t for t in self.taints if t.get("effect") == NO_EXECUTE]


class _LeaseView:
    __slots__ = ("key", "name", "renew", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.name: str = meta["name"]
        self.key = f"{meta.get('namespace') or ''}/{self.name}"
        self.rv: str = meta.get("resourceVersion", "")
        self.renew: str | None = (obj.get("spec") or {}).get("renewTime")


class _PodView:
    __slots__ = (
        "deleting",
        "key",
        "name",
        "namespace",
        "node",
        "phase",
        "ready",
        "rv",
        "tolerations",
        "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        self.namespace: str = meta.get("namespace") or ""
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.rv: str = meta.get("resourceVersion", "")
        self.uid: str = meta.get("uid", "")
        self.node: str = spec.get("nodeName") or ""
        status = obj.get("status") or {}
        self.phase: str = status.get("phase") or "Pending"
        # Its Ready condition's status (None: it has none yet).
        self.ready: str | None = next(
            (c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"),
            None,
        )
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.tolerations: list[dict[str, Any]] = list(spec.get("tolerations") or ())

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")
