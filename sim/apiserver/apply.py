"""Server-side apply (`PATCH` with `application/apply-patch+yaml`) on plain JSON objects, after
sigs.k8s.io/structured-merge-diff's `merge.Updater.Apply` and kube-apiserver's field manager.

`apply_configuration(live, config, ...)` returns the object to store, with its managedFields:

1. merge: the configuration is merged into the live object. Maps merge by key, associative lists
   by their key fields (items keep the live order, the configuration's items in its order),
   sets as sets, atomic lists and maps and scalars are replaced; a null removes the field.
2. the applier's set becomes exactly the fields its configuration specifies.
3. removal: what the applier's previous configuration had and this one has not is removed from
   the object, unless another manager (or this configuration) still owns it.
4. conflicts: a field that the apply changes (or adds) and another manager owns is a conflict:
   409 with structured-merge-diff's message and one `FieldManagerConflict` cause per field, or,
   with `force`, the field leaves that manager. Fields the apply removes leave every manager.

Faithful in what users see: the merge and removal rules, the conflict message and causes, a
no-op apply not refreshing the applier's time, `status` being ignored unless applying the status
subresource (resetFields). Simplified: the live order of items merged in a list is kept as
structured-merge-diff keeps it for the common cases (appends, unchanged orders), not in every
reordering; conversions between API versions do not exist here (one version per kind).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from sim.apiserver import errors
from sim.apiserver.field_sets import (
    Tree,
    difference_into,
    has_children,
    intersection,
    is_member,
    path_string,
    paths,
    union_into,
)
from sim.apiserver.field_shapes import ATOMIC, Shape
from sim.apiserver.field_walk import ShapeError, compare, field_set, item_element
from sim.apiserver.managed_fields import (
    APPLY,
    Identifier,
    Managers,
    Writer,
    decode,
    entry,
    identifier_key,
    print_manager,
    set_entries,
    strip,
    without,
)
from sim.apiserver.store_core import now_rfc3339

_ABSENT: Final = object()


def apply_configuration(
    live: dict[str, Any] | None,
    config: dict[str, Any],
    *,
    writer: Writer,
    force: bool,
    shape: Shape,
    status: str,
) -> dict[str, Any]:
    """The object after `writer` applies `config` to `live` (None: the object does not exist).

    `status` is what the write may change of `.status`: "all" (a kind without a status
    subresource), "none" (the object of a kind with one) or "only" (its status subresource).
    Raises ApiError (409 on conflicts). Neither input is modified.
    """
    if (config.get("metadata") or {}).get("managedFields") is not None:
        raise errors.bad_request("metadata.managedFields must be nil")
    base = dict(live) if live is not None else {}
    meta = dict(base.get("metadata") or {})
    entries = meta.pop("managedFields", None)
    meta.pop("resourceVersion", None)  # only the configuration's, if any, is a precondition
    base["metadata"] = meta
    managers = decode(entries) or {}

    applied = field_set(config, shape)
    strip(applied)
    if status == "none":
        applied.pop("f:status", None)
        merged = merge(base, {k: v for k, v in config.items() if k != "status"}, shape)
    elif status == "only":
        applied = {"f:status": applied["f:status"]} if "f:status" in applied else {}
        merged = merge(base, {"status": config["status"]} if "status" in config else {}, shape)
    else:
        merged = merge(base, config, shape)

    me: Identifier = (writer.manager, APPLY, "", writer.subresource)
    previous = managers.pop(me, None)
    if applied:
        managers[me] = entry(me, writer.api_version, applied, (previous or {}).get("time"))
    if previous is not None and previous.get("fieldsV1"):
        owned: Tree = {}
        for item in managers.values():
            union_into(owned, item.get("fieldsV1") or {})
        stale = orjson.loads(orjson.dumps(previous["fieldsV1"]))
        difference_into(stale, owned)
        if stale:
            merged = _remove(merged, stale, owned, shape)

    comparison = compare(base, merged, shape)
    changed = comparison.changed()
    conflicts = _conflicts(managers, changed, me)
    if conflicts and not force:
        raise conflict_error(conflicts)
    managers = without(without(managers, changed, keep=me), comparison.removed, keep=me)
    if applied and not comparison.empty():
        managers[me] = entry(me, writer.api_version, applied, now_rfc3339())
    merged_meta = dict(merged.get("metadata") or {})
    set_entries(merged_meta, managers)
    merged["metadata"] = merged_meta
    return merged


# --------------------------------------------------------------------------- merge


def merge(live: Any, config: Any, shape: Shape) -> Any:
    """`config` merged into `live` (a new value; unchanged parts are shared, not copied)."""
    if isinstance(config, dict):
        if not isinstance(live, dict) or shape.atomic_map():
            return _without_nulls(config)
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)  # explicitly null: the applier owns the field, unset
                continue
            out[key] = merge(live.get(key, _ABSENT), value, shape.field(key))
        return out
    if isinstance(config, list):
        list_type = shape.list_type()
        if list_type.kind == ATOMIC or not isinstance(live, list):
            return config
        return _merge_list(live, config, shape)
    return config


def _without_nulls(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if v is not None}


def _merge_list(live: list[Any], config: list[Any], shape: Shape) -> list[Any]:
    """structured-merge-diff's merge of two granular lists: live-only items stay where they
    are, the configuration's items merge into theirs and come in the configuration's order."""
    list_type = shape.list_type()
    item_shape = shape.item()
    right = [item_element(item, list_type, i, "") for i, item in enumerate(config)]
    by_right = dict(zip(right, config, strict=False))
    if len(by_right) < len(right):
        dup = next(e for i, e in enumerate(right) if e in right[:i])
        raise ShapeError(f"duplicate entries for key {dup[2:]}")
    left: list[tuple[str, Any]] = []
    by_left: dict[str, Any] = {}
    for index, item in enumerate(live):
        try:
            element = item_element(item, list_type, index, "")
        except ShapeError:
            return config  # a live list that is not keyable is replaced whole
        left.append((element, item))
        by_left.setdefault(element, item)
    shared = [element for element in right if element in by_left]
    out: list[Any] = []
    merged: set[str] = set()
    li = ri = si = 0
    while li < len(left) or ri < len(right):
        if li < len(left) and ri < len(right):
            element = left[li][0]
            if element == right[ri]:
                out.append(merge(left[li][1], by_right[element], item_shape))
                merged.add(element)
                li, ri, si = li + 1, ri + 1, si + 1
                continue
            if element in by_right and si < len(shared) and shared[si] != element:
                li += 1  # a shared item the configuration wants later: it comes with it
                continue
        if li < len(left):
            element, item = left[li]
            if element not in by_right:
                out.append(item)  # only in the live list: stays in place
                li += 1
                continue
            if element in merged:
                li += 1
        if ri < len(right):
            element = right[ri]
            out.append(merge(by_left.get(element, _ABSENT), by_right[element], item_shape))
            merged.add(element)
            if si < len(shared) and shared[si] == element:
                si += 1
            ri += 1
    return out


# --------------------------------------------------------------------------- removal


def _remove(value: Any, stale: Tree, owned: Tree, shape: Shape) -> Any:
    """`value` without the member paths of `stale` (a new value). A declared field that someone
    still owns something under is kept, and emptied maps disappear, as Go's omitempty does."""
    if isinstance(value, dict):
        out = dict(value)
        for element, node in stale.items():
            if not element.startswith("f:"):
                continue
            key = element[2:]
            if key not in out:
                continue
            below = owned.get(element) or {}
            if is_member(node) and not (has_children(below) and shape.declared(key)):
                del out[key]
                continue
            if has_children(node):
                out[key] = _remove(out[key], node, below, shape.field(key))
                if isinstance(out[key], dict) and not out[key] and value[key]:
                    del out[key]
        return out
    if isinstance(value, list) and shape.list_type().kind != ATOMIC:
        list_type = shape.list_type()
        item_shape = shape.item()
        kept = []
        for index, item in enumerate(value):
            try:
                element = item_element(item, list_type, index, "")
            except ShapeError:
                kept.append(item)
                continue
            node = stale.get(element)
            if node is None:
                kept.append(item)
            elif is_member(node):
                continue
            else:
                kept.append(_remove(item, node, owned.get(element) or {}, item_shape))
        return kept
    return value


# --------------------------------------------------------------------------- conflicts


def _conflicts(managers: Managers, changed: Tree, me: Identifier) -> list[tuple[Identifier, str]]:
    out = []
    for ident, item in managers.items():
        if ident == me:
            continue
        clash = intersection(item.get("fieldsV1") or {}, changed)
        out += [(ident, path_string(path)) for path in paths(clash)]
    out.sort(key=lambda c: identifier_key(c[0]))  # stable: paths keep their set order
    return out


def conflict_error(conflicts: list[tuple[Identifier, str]]) -> errors.ApiError:
    """internal.NewConflictError: 409 Conflict, the message of merge.Conflicts and one
    FieldManagerConflict cause per field."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {print_manager(ident)}",
            "field": path,
        }
        for ident, path in conflicts
    ]
    if len(conflicts) == 1:
        ident, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {print_manager(ident)}: {path}"
    else:
        lines: list[str] = []
        last: Identifier | None = None
        for ident, path in conflicts:
            if ident != last:
                lines.append(f"conflicts with {print_manager(ident)}:")
                last = ident
            lines.append(f"- {path}")
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    error = errors.ApiError(409, "Conflict", message)
    error.details = {"causes": causes}
    return error
