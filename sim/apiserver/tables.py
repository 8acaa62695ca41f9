"""Server-side `Table` answers for `kubectl get` (meta.k8s.io/v1), so kubectl shows the columns
users know: a pod's READY/STATUS/RESTARTS, a node's STATUS, and every CRD's printer columns
(a Volcano Job's STATUS/minAvailable/RUNNINGS, a PodGroup's phase)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from sim.apiserver.registry import ResourceType

TABLE_ACCEPT = "as=Table"

Column = tuple[str, str, Callable[[dict[str, Any]], Any], int]  # name, type, value, priority


def wants_table(accept: str) -> bool:
    return TABLE_ACCEPT in accept and "g=meta.k8s.io" in accept


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """Kubernetes' HumanDuration of the time since `timestamp` (`45s`, `3m`, `2d5h`, `10d`)."""
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    return human_duration(seconds)


def human_duration(seconds: int) -> str:
    """Kubernetes' duration.HumanDuration."""
    if seconds < 0:
        return "<invalid>"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 365 * 2 else f"{days // 365}y"


def _dig(obj: Any, path: str) -> Any:
    for part in path.strip(".").split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _pod_status(pod: dict[str, Any]) -> str:
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in status.get("containerStatuses") or ():
        state = container.get("state") or {}
        for kind in ("waiting", "terminated"):
            detail = state.get(kind)
            if detail and detail.get("reason"):
                reason = detail["reason"]
    return reason


def _pod_ready(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    total = len((pod.get("spec") or {}).get("containers") or ())
    ready = sum(1 for c in statuses if c.get("ready"))
    return f"{ready}/{total}"


def _pod_restarts(pod: dict[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    return sum(int(c.get("restartCount") or 0) for c in statuses)


def _node_status(node: dict[str, Any]) -> str:
    conditions = (node.get("status") or {}).get("conditions") or ()
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    text = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(node: dict[str, Any]) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = [k[len(prefix) :] for k in node["metadata"].get("labels") or {} if k.startswith(prefix)]
    return ",".join(sorted(roles)) or "<none>"


_AGE: Column = ("Age", "string", lambda o: age(o["metadata"].get("creationTimestamp")), 0)


def _since(timestamp: str | None) -> str:
    """An age for a Time or a MicroTime (`2006-01-02T15:04:05.000000Z`); `<unknown>` if unset."""
    if timestamp and "." in timestamp:
        timestamp = timestamp.split(".", 1)[0] + "Z"
    return age(timestamp)


def _event_first(e: dict[str, Any]) -> str:
    return _since(e.get("firstTimestamp") or e.get("eventTime"))


def _event_last(e: dict[str, Any]) -> str:
    series = e.get("series")
    if isinstance(series, dict) and series.get("lastObservedTime"):
        return _since(series["lastObservedTime"])
    return _since(e["lastTimestamp"]) if e.get("lastTimestamp") else _event_first(e)


def _event_count(e: dict[str, Any]) -> int:
    series = e.get("series")
    if isinstance(series, dict) and series.get("count"):
        return int(series["count"])
    return int(e.get("count") or 1)  # a singleton of the new API has no count


def _event_object(e: dict[str, Any]) -> str:
    ref = e.get("involvedObject") or {}
    kind = str(ref.get("kind") or "").lower()
    return f"{kind}/{ref['name']}" if ref.get("name") else kind


def _event_source(e: dict[str, Any]) -> str:
    """kubectl's formatEventSource: component (or reporting controller), then host/instance."""
    source = e.get("source") or {}
    component = source.get("component") or e.get("reportingComponent") or ""
    host = source.get("host") or e.get("reportingInstance") or ""
    return f"{component}, {host}" if host else component


# What kube-apiserver's event printer shows (no Name column first: kubectl get events shows
# LAST SEEN, TYPE, REASON, OBJECT, MESSAGE; -o wide adds the rest). Both event APIs print the
# stored (core/v1) object.
_EVENT_COLUMNS: list[Column] = [
    ("Last Seen", "string", _event_last, 0),
    ("Type", "string", lambda e: e.get("type") or "", 0),
    ("Reason", "string", lambda e: e.get("reason") or "", 0),
    ("Object", "string", _event_object, 0),
    ("Subobject", "string", lambda e: (e.get("involvedObject") or {}).get("fieldPath") or "", 1),
    ("Source", "string", _event_source, 1),
    ("Message", "string", lambda e: str(e.get("message") or "").strip(), 0),
    ("First Seen", "string", _event_first, 1),
    ("Count", "integer", _event_count, 1),
    ("Name", "string", lambda e: e["metadata"]["name"], 1),
]


def _count(obj: dict[str, Any], section: str, field: str) -> int:
    return int((obj.get(section) or {}).get(field) or 0)


def _containers(obj: dict[str, Any], what: str) -> str:
    containers = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or ()
    return ",".join(str(c.get(what) or "") for c in containers)


def _selector(obj: dict[str, Any]) -> str:
    selector = (obj.get("spec") or {}).get("selector") or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        values = ",".join(expr.get("values") or ())
        parts.append(f"{expr.get('key')} {str(expr.get('operator', '')).lower()} ({values})")
    return ",".join(parts) or "<none>"


# kube-apiserver's printers for the workloads (pkg/printers/internalversion).
_DEPLOYMENT_COLUMNS: list[Column] = [
    (
        "Ready",
        "string",
        lambda o: f"{_count(o, 'status', 'readyReplicas')}/{_count(o, 'spec', 'replicas')}",
        0,
    ),
    ("Up-to-date", "integer", lambda o: _count(o, "status", "updatedReplicas"), 0),
    ("Available", "integer", lambda o: _count(o, "status", "availableReplicas"), 0),
    _AGE,
    ("Containers", "string", lambda o: _containers(o, "name"), 1),
    ("Images", "string", lambda o: _containers(o, "image"), 1),
    ("Selector", "string", _selector, 1),
]
_REPLICASET_COLUMNS: list[Column] = [
    ("Desired", "integer", lambda o: _count(o, "spec", "replicas"), 0),
    ("Current", "integer", lambda o: _count(o, "status", "replicas"), 0),
    ("Ready", "integer", lambda o: _count(o, "status", "readyReplicas"), 0),
    _AGE,
    ("Containers", "string", lambda o: _containers(o, "name"), 1),
    ("Images", "string", lambda o: _containers(o, "image"), 1),
    ("Selector", "string", _selector, 1),
]
_BUILTIN_COLUMNS: dict[tuple[str, str], list[Column]] = {
    ("apps", "Deployment"): _DEPLOYMENT_COLUMNS,
    ("apps", "ReplicaSet"): _REPLICASET_COLUMNS,
    ("", "Pod"): [
        ("Ready", "string", _pod_ready, 0),
        ("Status", "string", _pod_status, 0),
        ("Restarts", "integer", _pod_restarts, 0),
        _AGE,
        ("IP", "string", lambda o: (o.get("status") or {}).get("podIP") or "<none>", 1),
        ("Node", "string", lambda o: (o.get("spec") or {}).get("nodeName") or "<none>", 1),
        (
            "Nominated Node",
            "string",
            lambda o: (o.get("status") or {}).get("nominatedNodeName") or "<none>",
            1,
        ),
    ],
    ("", "Node"): [
        ("Status", "string", _node_status, 0),
        ("Roles", "string", _node_roles, 0),
        _AGE,
        (
            "Version",
            "string",
            lambda o: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or "",
            0,
        ),
    ],
    ("", "Namespace"): [
        ("Status", "string", lambda o: (o.get("status") or {}).get("phase"), 0),
        _AGE,
    ],
    ("", "Event"): _EVENT_COLUMNS,
    ("events.k8s.io", "Event"): _EVENT_COLUMNS,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): [
        ("Webhooks", "integer", lambda o: len(o.get("webhooks") or ()), 0),
        _AGE,
    ],
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): [
        ("Webhooks", "integer", lambda o: len(o.get("webhooks") or ()), 0),
        _AGE,
    ],
}


def _columns(rtype: ResourceType) -> list[Column]:
    if rtype.custom and rtype.printer_columns:
        out: list[Column] = []
        for col in rtype.printer_columns:
            path, kind = col["jsonPath"], col.get("type", "string")
            if kind == "date":
                out.append(
                    (
                        col["name"],
                        "string",
                        lambda o, p=path: age(_dig(o, p)),
                        int(col.get("priority", 0)),
                    )
                )
            else:
                out.append(
                    (col["name"], kind, lambda o, p=path: _dig(o, p), int(col.get("priority", 0)))
                )
        return out
    return _BUILTIN_COLUMNS.get((rtype.group, rtype.kind), [_AGE])


def table(
    rtype: ResourceType,
    objects: Iterable[dict[str, Any]],
    resource_version: str,
    include_object: str = "Metadata",
    served: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict:
    """A meta.k8s.io/v1 Table. Each row embeds its object as `includeObject` asks, as
    kube-apiserver does: `Metadata` (the default) a PartialObjectMetadata, `Object` the whole
    object as this API serves it (`served` converts from the storage format; kubectl asks for it
    to `--sort-by` a field), `None` nothing."""
    columns = _columns(rtype)
    if rtype.kind != "Event":  # the event printer has its own Name column, last
        columns = [("Name", "string", lambda o: o["metadata"]["name"], 0), *columns]
    rows = []
    for obj in objects:
        cells = []
        for _, _, value, _ in columns:
            cell = value(obj)
            cells.append("" if cell is None else cell)
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = served(obj) if served is not None else obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {
                "name": name,
                "type": kind,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": priority,
            }
            for name, kind, _, priority in columns
        ],
        "rows": rows,
    }


# The printers of StatefulSets, DaemonSets and Jobs live beside (they use the helpers above).
from sim.apiserver.tables_workloads import WORKLOAD_COLUMNS  # noqa: E402

_BUILTIN_COLUMNS.update(WORKLOAD_COLUMNS)
