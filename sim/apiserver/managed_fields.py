"""`metadata.managedFields`: which manager owns which fields of an object, kept up to date on
every write as kube-apiserver's field manager keeps it
(k8s.io/apimachinery/pkg/util/managedfields/internal).

An entry is one manager's set for one (manager, operation, apiVersion, subresource); appliers are
identified without their apiVersion. A non-apply write (create, update, any non-apply patch)
records an `Update` for its manager, the `fieldManager` query parameter or else the User-Agent's
prefix (`prefixFromUserAgent`): the fields it added or changed move to it from every other
manager (appliers included, without conflict), the fields it removed leave every manager, and the
entry's time is refreshed when it took something. Server-side apply (sim.apiserver.apply) uses the
same entries.

Faithful: the identifiers, which request's entries are used (the body's unless empty, a
subresource always the live object's, `[]` resets), the metadata fields no set may hold
(stripmeta.go), the cap of 10 update entries (older ones merge into "ancient-changes"), the
entries' order and `printManager`'s wording used by conflict messages.
A write of the `scale` subresource is recorded on the scaled object (subresource "scale", the
object's apiVersion, `.spec.replicas`), as the ScaleHandler maps it. Like kube-apiserver, the
writes that bypass the field manager record nothing: pods/binding, and what a deletion sets.
Simplified: an invalid managedFields in a request is ignored rather than reported; timestamps have
second precision (as the real server's RFC 3339 output does anyway).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from sim.apiserver.field_sets import (
    Tree,
    difference_into,
    has_children,
    is_member,
    sort_tree,
    union_into,
)
from sim.apiserver.field_shapes import Shape
from sim.apiserver.field_walk import compare, created
from sim.apiserver.store_core import now_rfc3339

APPLY: Final = "Apply"
UPDATE: Final = "Update"
FIELD_MANAGER_MAX_LENGTH: Final = 128
MAX_UPDATE_MANAGERS: Final = 10
ANCIENT_CHANGES: Final = "ancient-changes"
# (manager, operation, apiVersion ("" for appliers), subresource)
Identifier = tuple[str, str, str, str]
Managers = dict[Identifier, dict[str, Any]]
# What no manager may own (stripmeta.go): the type fields and server-owned metadata.
_STRIPPED: Final[Tree] = {
    "f:apiVersion": {},
    "f:kind": {},
    "f:metadata": {
        ".": {},
        "f:creationTimestamp": {},
        "f:generation": {},
        "f:managedFields": {},
        "f:name": {},
        "f:namespace": {},
        "f:resourceVersion": {},
        "f:selfLink": {},
        "f:uid": {},
    },
}


@dataclass(frozen=True, slots=True)
class Writer:
    """Who writes, as the field manager records it: the manager's name, the API version the
    request used and the subresource written ("" for the object itself)."""

    manager: str
    api_version: str
    subresource: str = ""


def prefix_from_user_agent(agent: str) -> str:
    """kube-apiserver's default manager name: the User-Agent up to its first "/", printable
    characters only, at most 128 bytes."""
    out: list[str] = []
    size = 0
    for char in agent.split("/", 1)[0]:
        if not _printable(char):
            continue
        width = len(char.encode())
        if size + width > FIELD_MANAGER_MAX_LENGTH:
            break
        out.append(char)
        size += width
    return "".join(out)


def _printable(char: str) -> bool:
    # Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space.
    return char == " " or unicodedata.category(char)[0] in "LMNPS"


def field_manager_causes(name: str) -> list[dict[str, str]]:
    """ValidateFieldManager's errors for a `fieldManager` query parameter."""
    causes = []
    if len(name.encode()) > FIELD_MANAGER_MAX_LENGTH:
        causes.append(
            {
                "reason": "FieldValueTooLong",
                "field": "fieldManager",
                "message": f"Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes",
            }
        )
    for index, char in enumerate(name):
        if not _printable(char):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": "fieldManager",
                    "message": f'Invalid value: "{name}": invalid character '
                    f"U+{ord(char):04X} (at position {index})",
                }
            )
    return causes


# --------------------------------------------------------------------------- entries


def identifier(entry: dict[str, Any]) -> Identifier:
    operation = entry.get("operation") or ""
    return (
        entry.get("manager") or "",
        operation,
        "" if operation == APPLY else entry.get("apiVersion") or "",
        entry.get("subresource") or "",
    )


def identifier_key(ident: Identifier) -> str:
    """The identifier as kube-apiserver encodes it (BuildManagerIdentifier); conflicts are
    grouped in the order of these strings."""
    manager, operation, api_version, subresource = ident
    fields = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "subresource": subresource,
    }
    return orjson.dumps({k: v for k, v in fields.items() if v}).decode()


def print_manager(ident: Identifier) -> str:
    """printManager: `"kubectl"`, `"kubectl" with subresource "scale" using apps/v1`."""
    manager, operation, api_version, subresource = ident
    shown = orjson.dumps(manager).decode()
    if subresource:
        shown += f' with subresource "{subresource}"'
    if operation == UPDATE:
        shown += f" using {api_version}"
    return shown


def entry(ident: Identifier, api_version: str, fields: Tree, time: str | None) -> dict[str, Any]:
    """A ManagedFieldsEntry, its keys in Go's field order."""
    manager, operation, _, subresource = ident
    out: dict[str, Any] = {"manager": manager, "operation": operation, "apiVersion": api_version}
    if time:
        out["time"] = time
    out["fieldsType"] = "FieldsV1"
    out["fieldsV1"] = fields
    if subresource:
        out["subresource"] = subresource
    return out


def decode(value: Any) -> Managers | None:
    """The entries of a managedFields list by identifier; None when it is not a valid list.
    Entries are not copied: callers replace an entry's `fieldsV1` rather than edit it."""
    if not isinstance(value, list):
        return None
    out: Managers = {}
    for item in value:
        if not isinstance(item, dict) or item.get("operation") not in (APPLY, UPDATE):
            return None
        if not item.get("apiVersion") or item.get("fieldsType") != "FieldsV1":
            return None
        fields = item.get("fieldsV1", {})
        if not isinstance(fields, dict):
            return None
        out[identifier(item)] = item
    return out


def encode(managers: Managers) -> list[dict[str, Any]]:
    """The entries in kube-apiserver's order: operation, time, manager, apiVersion,
    subresource."""
    return sorted(
        managers.values(),
        key=lambda e: (
            e["operation"],
            e.get("time") or "",
            e["manager"],
            e["apiVersion"],
            e.get("subresource") or "",
        ),
    )


def set_entries(meta: dict[str, Any], managers: Managers) -> None:
    if managers:
        meta["managedFields"] = encode(managers)
    else:
        meta.pop("managedFields", None)


def strip(fields: Tree) -> None:
    """Remove what no manager may own (in place)."""
    difference_into(fields, _STRIPPED)


def overlaps(fields: Tree, other: Tree) -> bool:
    """Whether some member path of `other` is one of `fields`."""
    for key, theirs in other.items():
        mine = fields.get(key)
        if mine is None or key == ".":
            continue
        if is_member(theirs) and is_member(mine):
            return True
        if has_children(theirs) and has_children(mine) and overlaps(mine, theirs):
            return True
    return False


def without(managers: Managers, fields: Tree, keep: Identifier | None = None) -> Managers:
    """Every manager (but `keep`) minus `fields`; managers left with nothing are dropped. The
    entries that change are new dicts, so the input's stay intact."""
    if not fields:
        return dict(managers)
    out: Managers = {}
    for ident, item in managers.items():
        if ident != keep and overlaps(item.get("fieldsV1") or {}, fields):
            remaining = orjson.loads(orjson.dumps(item.get("fieldsV1") or {}))
            difference_into(remaining, fields)
            if not remaining:
                continue
            item = {**item, "fieldsV1": remaining}
        out[ident] = item
    return out


def _base(live: Any, sent: Any, subresource: str) -> Managers:
    """decodeLiveOrNew: the request's entries unless it has none (or writes a subresource);
    `[]` (or one empty entry) resets them."""
    if not subresource and sent != live:
        if sent == [] or sent == [{}]:
            return {}
        decoded = decode(sent)
        if decoded:
            try:
                return _canonical(decoded)
            except ValueError:
                pass  # an unreadable time: the request's entries are not used
    return decode(live) or {}


def _canonical(managers: Managers) -> Managers:
    """Entries from a request as kube-apiserver would have re-encoded them: times in RFC 3339
    UTC seconds, sets in FieldsV1 order (a client may have reordered either)."""
    out: Managers = {}
    for ident, item in managers.items():
        time = item.get("time")
        if time is not None:
            parsed = datetime.fromisoformat(str(time).replace("Z", "+00:00"))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            time = parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        out[ident] = entry(ident, item["apiVersion"], sort_tree(item.get("fieldsV1") or {}), time)
    return out


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    writer: Writer,
    shape: Shape,
    *,
    ignore_status: bool = False,
) -> None:
    """An Update by `writer` from `old` (None for a create) to `new`: sets
    `new.metadata.managedFields`. `ignore_status`: `.status` is not the writer's to set (the
    object of a kind with a status subresource; kube-apiserver's reset fields)."""
    meta = new.setdefault("metadata", {})
    live = ((old or {}).get("metadata") or {}).get("managedFields")
    managers = _base(live, meta.get("managedFields"), writer.subresource)
    if old is None:
        comparison = created(new, shape)
    else:
        only = "status" if writer.subresource == "status" else None
        comparison = compare(old, new, shape, only)
    if ignore_status:
        for tree in (comparison.added, comparison.modified, comparison.removed):
            tree.pop("f:status", None)
    if not comparison.empty():
        changed = comparison.changed()
        managers = without(without(managers, changed), comparison.removed)
        strip(changed)
        if changed:
            me: Identifier = (writer.manager, UPDATE, writer.api_version, writer.subresource)
            previous = managers.get(me)
            if previous is not None:
                # Taken as they are: the previous entry is dropped and `changed` only stored.
                union_into(changed, previous.get("fieldsV1") or {}, adopt=True)
            managers[me] = entry(me, writer.api_version, changed, now_rfc3339())
            _cap_update_managers(managers)
    set_entries(meta, managers)


def _cap_update_managers(managers: Managers) -> None:
    """capManagersManager: past 10 update entries, the oldest merge into one "ancient-changes"
    entry per API version."""
    updaters = [i for i, e in managers.items() if e["operation"] == UPDATE]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda i: (managers[i].get("time") or "", identifier_key(i)))
    first_of_version: dict[str, Identifier] = {}
    length = len(updaters)
    for ident in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        item = managers[ident]
        version = item["apiVersion"]
        bucket: Identifier = (ANCIENT_CHANGES, UPDATE, version, "")
        first = first_of_version.get(version)
        if first is None:
            first_of_version[version] = ident
            continue
        if bucket not in managers:
            moved = managers.pop(first)
            managers[bucket] = entry(bucket, version, moved["fieldsV1"], moved.get("time"))
        fields = orjson.loads(orjson.dumps(managers[bucket]["fieldsV1"]))
        union_into(fields, item["fieldsV1"])
        managers[bucket] = entry(bucket, version, fields, item.get("time"))
        del managers[ident]
        length -= 1
