"""Kubernetes' strategic merge patch (`application/strategic-merge-patch+json`), following
k8s.io/apimachinery/pkg/util/strategicpatch/patch.go (`StrategicMergeMapPatch`, i.e. the
server-side options `MergeParallelList` and `IgnoreUnmatchedNulls`), as a pure function on
decoded JSON: `strategic_merge_patch` returns a new object and never mutates its inputs.

Separate from merge patch and JSON patch (sim.apiserver.patch dispatches among them) and from
the struct-tag tables it reads (sim.apiserver.patch_strategies): this is the merge algorithm,
its directives and Go's element ordering.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sim.apiserver.patch_common import PatchError, _copy, _require_object
from sim.apiserver.patch_strategies import MergeStrategy, _Schema, _strategies_for

_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ELEMENT_ORDER: Final = "$setElementOrder/"
_DELETE_FROM_PRIMITIVE_LIST: Final = "$deleteFromPrimitiveList/"
_DELETE: Final = "delete"
_REPLACE: Final = "replace"
_MERGE: Final = "merge"
# Marks "no value" where None is a legitimate JSON value.
_ABSENT: Final = object()


def strategic_merge_patch(
    target: dict[str, Any], patch: dict[str, Any], kind: str | None
) -> dict[str, Any]:
    """Apply a Kubernetes strategic merge patch to `target`, an object of Kind `kind`.

    Maps merge recursively and null deletes; lists merge or are replaced according to
    `LIST_MERGE_STRATEGIES`; the `$patch`, `$retainKeys`, `$setElementOrder/` and
    `$deleteFromPrimitiveList/` directives are honoured and never stored.
    """
    _require_object(patch, "a strategic merge patch")
    schema = _Schema(_strategies_for(kind))
    base = _copy(target) if isinstance(target, dict) else {}
    merged = _merge_map(base, patch, schema, "")
    # A top-level `$patch: delete` empties the object, as Go's mergeMap does.
    return {} if merged is None else merged


def _merge_map(
    original: dict[str, Any], patch: Mapping[str, Any], schema: _Schema, parent: str
) -> dict[str, Any] | None:
    """Merge `patch` into `original` (which we own). None means `$patch: delete`."""
    if _DIRECTIVE in patch:
        return _map_directive(patch, schema, parent)
    _apply_retain_keys(original, patch)
    # $setElementOrder orders relative to the list as it was before this patch: remember it.
    orders: dict[str, tuple[Any, list[Any]]] = {}
    for key, value in patch.items():
        if key.startswith(_SET_ELEMENT_ORDER):
            field = key.removeprefix(_SET_ELEMENT_ORDER)
            orders[field] = (value, _list_or_empty(original, field))
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            field = key.removeprefix(_DELETE_FROM_PRIMITIVE_LIST)
            _delete_from_primitive_list(original, field, value)
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # directives, handled above; they must never reach the stored object
        if value is None:
            original.pop(key, None)
            continue
        merged = _merge_field(original.get(key, _ABSENT), value, schema, parent, key)
        if merged is _ABSENT:
            original.pop(key, None)
        else:
            original[key] = merged
    for field, (order, before) in orders.items():
        _set_element_order(original, field, order, before, schema.strategy(parent, field))
    return original


def _map_directive(patch: Mapping[str, Any], schema: _Schema, parent: str) -> dict[str, Any] | None:
    directive = patch[_DIRECTIVE]
    if directive == _REPLACE:
        # The rest of the patch map becomes the value, cleaned of nulls and directives.
        rest = {k: v for k, v in patch.items() if k != _DIRECTIVE}
        return _merge_map({}, rest, schema, parent)
    if directive == _DELETE:
        return None
    raise PatchError(f"unknown patch type {directive!r} in map {dict(patch)!r}")


def _merge_field(current: Any, value: Any, schema: _Schema, parent: str, field: str) -> Any:
    """The new value of `field` (currently `current`, or _ABSENT); _ABSENT deletes it."""
    if isinstance(value, dict):
        # A differently-typed current value is replaced: merging into {} strips the patch's
        # nulls and directives, which Go leaves to the typed decoding that follows it.
        base = current if isinstance(current, dict) else {}
        merged = _merge_map(base, value, schema, field)
        # `$patch: delete` removes the field. Go leaves {} there, which its typed decoding drops
        # for map fields and keeps as an empty struct for pointers; absent is what clients mean.
        return _ABSENT if merged is None else merged
    if isinstance(value, list):
        base = current if isinstance(current, list) else []
        return _merge_list(base, value, schema, field, schema.strategy(parent, field))
    return value


def _apply_retain_keys(original: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """`$retainKeys`: drop every key of `original` not listed (kubectl apply on a union type)."""
    retain = patch.get(_RETAIN_KEYS, _ABSENT)
    if retain is _ABSENT:
        return
    if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
        raise PatchError(f"invalid {_RETAIN_KEYS} directive: {retain!r} is not a list of keys")
    keep = set(retain)
    for key, value in patch.items():
        if value is not None and not key.startswith("$") and key not in keep:
            raise PatchError(f"invalid {_RETAIN_KEYS} directive: {key!r} is not retained")
    for key in [k for k in original if k not in keep]:
        del original[key]


def _delete_from_primitive_list(original: dict[str, Any], field: str, values: Any) -> None:
    """`$deleteFromPrimitiveList/<field>`: remove these values from a list of primitives."""
    if not isinstance(values, list):
        raise PatchError(f"invalid {_DELETE_FROM_PRIMITIVE_LIST}{field} directive: not a list")
    current = original.get(field)
    if isinstance(current, list):
        doomed = _identities(values, None)
        original[field] = [v for v in current if _identity(v, None) not in doomed]


def _list_or_empty(original: Mapping[str, Any], field: str) -> list[Any]:
    current = original.get(field)
    return list(current) if isinstance(current, list) else []


def _merge_list(
    original: list[Any],
    patch: list[Any],
    schema: _Schema,
    field: str,
    strategy: MergeStrategy | None,
) -> list[Any]:
    if strategy is None:
        return _fresh_list(patch, schema, field)
    if not original and not patch:
        return original
    if any(isinstance(v, dict) for v in original) or any(isinstance(v, dict) for v in patch):
        if strategy.key is None:
            raise PatchError(f"cannot merge lists without merge key for {field!r}")
        return _merge_keyed_list(original, patch, schema, field, strategy.key)
    if any(isinstance(v, list) for v in patch):
        raise PatchError(f"lists of lists are not supported ({field!r})")
    return _merge_primitive_list(original, patch)


def _fresh_list(patch: list[Any], schema: _Schema, field: str) -> list[Any]:
    """A replacing list: the patch's elements, with nulls and directives removed from objects."""
    result = []
    for element in patch:
        if isinstance(element, dict):
            cleaned = _merge_map({}, element, schema, field)
            if cleaned is not None:
                result.append(cleaned)
        else:
            result.append(_copy(element))
    return result


def _merge_primitive_list(original: list[Any], patch: list[Any]) -> list[Any]:
    """Union of both lists (no duplicates), ordered the way Go's mergeSlice orders it."""
    merged: list[Any] = []
    seen: set[Any] = set()
    for value in (*original, *patch):
        identity = _identity(value, None)
        if identity not in seen:
            seen.add(identity)
            merged.append(value)
    return _order_like_go(merged, patch, original, None)


def _merge_keyed_list(
    original: list[Any], patch: list[Any], schema: _Schema, field: str, key: str
) -> list[Any]:
    """Element-wise merge by `key`: Go's mergeSliceWithSpecialElements + WithoutSpecialElements."""
    _require_objects(original, field)
    _require_objects(patch, field)
    plain: list[dict[str, Any]] = []
    replace = False
    for element in patch:
        directive = element.get(_DIRECTIVE, _ABSENT)
        if directive is _ABSENT:
            plain.append(element)
        elif directive == _DELETE:
            doomed = _identity(_merge_key(element, key, field), None)
            original = [e for e in original if _identity(e.get(key), None) != doomed]
        elif directive == _REPLACE:
            replace = True  # keep scanning: later `$patch` elements must not survive either
        elif directive == _MERGE:
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type {directive!r} in list {field!r}")
    if replace:
        return _fresh_list(plain, schema, field)
    merged = list(original)
    position = {}
    for index, element in enumerate(merged):
        position.setdefault(_identity(element.get(key), None), index)
    for element in plain:
        identity = _identity(_merge_key(element, key, field), None)
        index = position.get(identity)
        if index is None:
            fresh = _merge_map({}, element, schema, field)
            position[identity] = len(merged)
            merged.append(fresh)
        else:
            merged[index] = _merge_map(merged[index], element, schema, field)
    return _order_like_go(merged, plain, original, key)


def _require_objects(elements: list[Any], field: str) -> None:
    for element in elements:
        if not isinstance(element, dict):
            raise PatchError(f"list {field!r} mixes objects and other values: {element!r}")


def _merge_key(element: Mapping[str, Any], key: str, field: str) -> Any:
    if key not in element:
        raise PatchError(
            f"map: {dict(element)!r} does not contain declared merge key: {key} (in {field!r})"
        )
    return element[key]


def _identity(value: Any, key: str | None) -> Any:
    """What identifies a list element: its merge key value, or itself for a primitive.

    bool is tagged so that True and 1 (equal in Python, different in JSON) stay apart.
    """
    if key is not None:
        value = value.get(key) if isinstance(value, dict) else _ABSENT
    if isinstance(value, bool):
        return (bool, value)
    if isinstance(value, dict | list):
        raise PatchError(f"list elements and merge keys must be scalars, got {value!r}")
    return value


def _identities(values: list[Any], key: str | None) -> dict[Any, int]:
    """Position of each element's identity in `values` (first occurrence wins)."""
    positions: dict[Any, int] = {}
    for index, value in enumerate(values):
        positions.setdefault(_identity(value, key), index)
    return positions


def _order_like_go(
    merged: list[Any], order: list[Any], server_order: list[Any], key: str | None
) -> list[Any]:
    """Go's partition + normalizeElementOrder: elements named in `order` (the patch list or a
    $setElementOrder list) come in that order; the others ("server-only") keep their order in
    `server_order` (the list before the patch); the two runs are then interleaved by
    mergeSortedSlice. Note Go's interleave puts an element new to the server *before* the
    server-only elements still pending, so a new container or condition goes first, not last.
    """
    wanted = _identities(order, key)
    at_server = _identities(server_order, key)
    ordered: list[Any] = []
    server_only: list[Any] = []
    for element in merged:
        (ordered if _identity(element, key) in wanted else server_only).append(element)
    ordered.sort(key=lambda e: wanted[_identity(e, key)])
    # Server-only elements absent from the old list (only possible with an inconsistent
    # $setElementOrder) go last, keeping their relative order.
    server_only.sort(key=lambda e: at_server.get(_identity(e, key), len(at_server)))
    return _interleave(server_only, ordered, at_server, key)


def _interleave(
    server_only: list[Any], ordered: list[Any], at_server: Mapping[Any, int], key: str | None
) -> list[Any]:
    """Go's mergeSortedSlice(left=server_only, right=ordered, serverOrder)."""
    result: list[Any] = []
    i = j = 0
    while i < len(server_only) and j < len(ordered):
        left = at_server.get(_identity(server_only[i], key))
        right = at_server.get(_identity(ordered[j], key))
        if left is not None and right is not None and left < right:
            result.append(server_only[i])
            i += 1
        else:
            result.append(ordered[j])
            j += 1
    result.extend(server_only[i:])
    result.extend(ordered[j:])
    return result


def _set_element_order(
    original: dict[str, Any],
    field: str,
    order: Any,
    before: list[Any],
    strategy: MergeStrategy | None,
) -> None:
    """`$setElementOrder/<field>`: reorder the merged list as kubectl apply asks.

    Used for ordering only: elements named in `order` but absent from the list are not added.
    Replaced (non-merging) lists already have the patch's order, so they are left alone.
    """
    if not isinstance(order, list):
        raise PatchError(f"invalid {_SET_ELEMENT_ORDER}{field} directive: not a list")
    current = original.get(field)
    if strategy is None or not isinstance(current, list):
        return
    key = strategy.key if any(isinstance(e, dict) for e in current) else None
    if key is not None:
        _require_objects(order, f"{_SET_ELEMENT_ORDER}{field}")
    original[field] = _order_like_go(current, order, before, key)
