"""One storage for Events, two APIs: core/v1 `events` and `events.k8s.io/v1` `events`.

kube-apiserver keeps Events once and serves both group versions from that storage by conversion,
so what a controller records through events.k8s.io/v1 (client-go's events library, vulcan's
`core.kube.events`) is what `kubectl get events` and `kubectl describe` show through core/v1, and
the other way round. The conversion is a renaming (`pkg/apis/events/v1/conversion.go`):

    events.k8s.io/v1           core/v1
    regarding                  involvedObject
    note                       message
    reportingController        reportingComponent
    deprecatedSource           source
    deprecatedFirstTimestamp   firstTimestamp
    deprecatedLastTimestamp    lastTimestamp
    deprecatedCount            count

(eventTime, series, action, reason, related, type, reportingInstance are the same in both).
The storage format is core/v1. Objects come out shaped as Go's encoder writes them: empty
structs as `{}`, empty timestamps as null, the two core strings without omitempty as "".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from sim.apiserver.registry import Registry, ResourceType

TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
TO_EVENTS = {core: new for new, core in TO_CORE.items()}
_CORE_ORDER = (
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "type",
    "eventTime",
    "series",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
)
_EVENTS_ORDER = (
    "eventTime",
    "series",
    "reportingController",
    "reportingInstance",
    "action",
    "reason",
    "regarding",
    "related",
    "note",
    "type",
    "deprecatedSource",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "deprecatedCount",
)
# How Go writes a zero value of each field (absent = omitted).
_CORE_ZERO = {
    "involvedObject": {},
    "source": {},
    "firstTimestamp": None,
    "lastTimestamp": None,
    "eventTime": None,
    "reportingComponent": "",
    "reportingInstance": "",
}
_EVENTS_ZERO = {
    "eventTime": None,
    "regarding": {},
    "deprecatedSource": {},
    "deprecatedFirstTimestamp": None,
    "deprecatedLastTimestamp": None,
}


def _empty(value: Any) -> bool:
    """Go's omitempty: nil, "", 0 (and an empty struct, which Go writes as {} anyway)."""
    return value is None or value == "" or value == {} or (type(value) is int and value == 0)


def _convert(
    obj: dict[str, Any],
    names: dict[str, str],
    order: tuple[str, ...],
    zero: dict[str, Any],
    api_version: str,
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if key in names:
            fields[names[key]] = value
        elif key in names.values():
            continue  # the other API's name for a field: not a field of this one
        elif key in order:
            fields[key] = value  # named alike in both
        else:
            extra[key] = value  # a field neither API has: kept as written
    out: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": api_version,
        "metadata": obj.get("metadata") or {},
    }
    for key in order:
        value = fields.get(key)
        if _empty(value):
            if key in zero:
                out[key] = zero[key]
            continue
        out[key] = value
    out.update(extra)
    return out


def to_core(obj: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event as core/v1 (the storage format)."""
    return _convert(obj, TO_CORE, _CORE_ORDER, _CORE_ZERO, "v1")


def to_events(obj: dict[str, Any]) -> dict[str, Any]:
    """A stored (core/v1) Event as events.k8s.io/v1."""
    return _convert(obj, TO_EVENTS, _EVENTS_ORDER, _EVENTS_ZERO, "events.k8s.io/v1")


def field_aliases(fields: dict[str, str]) -> None:
    """A core Event's selectable fields also under the events.k8s.io names (`regarding.name`,
    `reportingController`), so a field selector of either API matches the stored object."""
    for key in [k for k in fields if k.startswith("involvedObject.")]:
        fields["regarding." + key.removeprefix("involvedObject.")] = fields[key]
    fields["reportingController"] = fields.get("reportingComponent", "")


@dataclass(frozen=True, slots=True)
class StorageView:
    """A resource served from another resource's storage, converting both ways."""

    storage: ResourceType
    api_version: str
    kind: str

    def into(self, obj: Any) -> Any:
        """A request body (this API's format) in the storage's format."""
        return to_core(obj) if isinstance(obj, dict) else obj

    def out(self, obj: dict[str, Any]) -> dict[str, Any]:
        return to_events(obj)

    def out_raw(self, raw: bytes) -> bytes:
        return orjson.dumps(to_events(orjson.loads(raw)))

    def out_lines(self, chunk: bytes) -> bytes:
        """Watch lines from the storage, re-encoded for this API."""
        lines = []
        for line in chunk.splitlines():
            event = orjson.loads(line)
            obj = event.get("object")
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
                event["object"] = to_events(obj)
            elif event.get("type") == "BOOKMARK" and isinstance(obj, dict):
                obj["apiVersion"], obj["kind"] = self.api_version, self.kind
            lines.append(orjson.dumps(event) + b"\n")
        return b"".join(lines)


def storage_views(registry: Registry) -> dict[ResourceType, StorageView]:
    """events.k8s.io/v1 events are served from the core/v1 events storage."""
    core = registry.get("", "v1", "events")
    new = registry.get("events.k8s.io", "v1", "events")
    if core is None or new is None:
        return {}
    return {new: StorageView(core, new.api_version, new.kind)}
