"""The three PATCH content types of the Kubernetes API, as pure functions on decoded JSON.

- `merge_patch`: RFC 7386 JSON merge patch (`application/merge-patch+json`).
- `json_patch`: RFC 6902 JSON patch (`application/json-patch+json`), via the `jsonpatch` library.
- `strategic_merge_patch`: Kubernetes' strategic merge patch
  (`application/strategic-merge-patch+json`), following
  k8s.io/apimachinery/pkg/util/strategicpatch/patch.go (`StrategicMergeMapPatch`, i.e. the
  server-side options `MergeParallelList` and `IgnoreUnmatchedNulls`). Go reads each field's
  `patchStrategy` / `patchMergeKey` struct tags; we have no Go types, so `LIST_MERGE_STRATEGIES`
  records those tags for the built-in fields that kubectl and kube-scheduler patch.

Every function returns a new object and never mutates its inputs: the server keeps the stored
object and the request body around, and aliasing either into the result would let a later edit of
the result corrupt them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import jsonpatch
import jsonpointer
import orjson

__all__ = [
    "JSON_PATCH",
    "KIND_LIST_MERGE_STRATEGIES",
    "LIST_MERGE_STRATEGIES",
    "MERGE_PATCH",
    "PATCH_CONTENT_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "MergeStrategy",
    "PatchError",
    "UnsupportedPatchType",
    "apply_patch",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
]

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
PATCH_CONTENT_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)


class PatchError(ValueError):
    """A patch that cannot be applied; the message says why."""


class UnsupportedPatchType(PatchError):
    """The request's Content-Type is none of the patch types this server applies."""


# --------------------------------------------------------------------------- helpers


def _copy(value: Any) -> Any:
    """Deep copy of decoded JSON (dicts, lists, scalars); much cheaper than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _require_object(patch: Any, what: str) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise PatchError(f"{what} must be a JSON object, got {type(patch).__name__}")
    return patch


# --------------------------------------------------------------------------- merge patch


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply an RFC 7386 JSON merge patch: null deletes, objects merge, anything else replaces."""
    _require_object(patch, "a merge patch")
    return _merge_into(_copy(target) if isinstance(target, dict) else {}, patch)


def _merge_into(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 MergePatch on an object `target` we own (mutated and returned)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            # A non-object target value is replaced by the patch object with its nulls removed,
            # which is what merging into an empty object yields.
            target[key] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = _copy(value)
    return target


# --------------------------------------------------------------------------- JSON patch


def json_patch(target: dict[str, Any], operations: list[Any]) -> dict[str, Any]:
    """Apply an RFC 6902 JSON patch; any failing operation (including `test`) is a PatchError."""
    if not isinstance(operations, list):
        raise PatchError(f"a JSON patch must be a list, got {type(operations).__name__}")
    # Copy the operations too: jsonpatch inserts their values by reference.
    document: Any = _copy(target)
    for index, operation in enumerate(_copy(operations)):
        document = _apply_operation(document, index, operation)
    if not isinstance(document, dict):
        raise PatchError("the JSON patch did not produce a JSON object")
    return document


def _apply_operation(document: Any, index: int, operation: Any) -> Any:
    """One operation at a time, so an error can name the operation that failed."""
    if not isinstance(operation, dict):
        raise PatchError(f"JSON patch operation {index} is not an object: {operation!r}")
    described = f"JSON patch operation {index} ({operation.get('op')!r} {operation.get('path')!r})"
    try:
        return jsonpatch.JsonPatch([operation]).apply(document, in_place=True)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise PatchError(f"{described}: test failed: {exc}") from None
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise PatchError(f"{described} failed: {exc}") from None
    except (TypeError, KeyError, IndexError, ValueError) as exc:
        # Malformed operations can surface as plain Python errors inside the library.
        raise PatchError(f"{described} is invalid: {exc!r}") from None


# --------------------------------------------------------------------------- strategic merge


@dataclass(frozen=True, slots=True)
class MergeStrategy:
    """`patchStrategy:"merge"` on a list field.

    `key` is the field's `patchMergeKey`: elements (objects) with the same key value are merged.
    `key=None` is a merging list of primitives (e.g. `finalizers`): the union of both lists.
    List fields without a MergeStrategy are replaced wholesale, as Go does for untagged fields.
    """

    key: str | None = None


_BY_NAME: Final = MergeStrategy("name")
_BY_TYPE: Final = MergeStrategy("type")
_BY_IP: Final = MergeStrategy("ip")
_PRIMITIVE_SET: Final = MergeStrategy(None)

# The struct tags of k8s.io/api, keyed by (parent field, list field): the same field name means
# different things in different places (a container's `ports` merge by `containerPort`, an
# Endpoints subset's `ports` are replaced), and the nearest enclosing field tells them apart.
# The parent of a field inside a list element is the list's field; "" is the object's top
# level; "*" matches any parent. Untagged lists (tolerations, taints, containerStatuses,
# readinessGates, ...) are deliberately absent: Kubernetes replaces them.
LIST_MERGE_STRATEGIES: Final[Mapping[tuple[str, str], MergeStrategy]] = MappingProxyType(
    {
        # metav1.ObjectMeta
        ("metadata", "finalizers"): _PRIMITIVE_SET,
        ("metadata", "ownerReferences"): MergeStrategy("uid"),
        # core/v1 PodSpec (also inside every workload's pod template)
        ("*", "containers"): _BY_NAME,
        ("*", "initContainers"): _BY_NAME,
        ("*", "ephemeralContainers"): _BY_NAME,
        ("*", "volumes"): _BY_NAME,  # merge,retainKeys: $retainKeys is honoured wherever it appears
        ("*", "imagePullSecrets"): _BY_NAME,
        ("*", "hostAliases"): _BY_IP,
        ("*", "topologySpreadConstraints"): MergeStrategy("topologyKey"),
        ("*", "resourceClaims"): _BY_NAME,
        ("*", "schedulingGates"): _BY_NAME,
        # core/v1 Container and EphemeralContainer
        ("containers", "ports"): MergeStrategy("containerPort"),
        ("initContainers", "ports"): MergeStrategy("containerPort"),
        ("ephemeralContainers", "ports"): MergeStrategy("containerPort"),
        ("*", "env"): _BY_NAME,
        ("*", "volumeMounts"): MergeStrategy("mountPath"),
        ("*", "volumeDevices"): MergeStrategy("devicePath"),
        # Status conditions of every built-in kind (PodCondition, NodeCondition, metav1.Condition,
        # DeploymentCondition, JobCondition, ...) are merged by type; kube-scheduler relies on it.
        ("status", "conditions"): _BY_TYPE,
        # core/v1 PodStatus
        ("status", "podIPs"): _BY_IP,
        ("status", "hostIPs"): _BY_IP,
        ("status", "resourceClaimStatuses"): _BY_NAME,
    }
)

# Fields that exist with these tags only in one kind. With `kind=None` all of them apply (no two
# collide), so an unknown kind still gets the most likely behaviour.
KIND_LIST_MERGE_STRATEGIES: Final[Mapping[str, Mapping[tuple[str, str], MergeStrategy]]] = (
    MappingProxyType(
        {
            "Service": MappingProxyType({("spec", "ports"): MergeStrategy("port")}),
            "Node": MappingProxyType(
                {
                    ("status", "addresses"): _BY_TYPE,
                    ("spec", "podCIDRs"): _PRIMITIVE_SET,
                }
            ),
            "ServiceAccount": MappingProxyType({("", "secrets"): _BY_NAME}),
        }
    )
)

_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ELEMENT_ORDER: Final = "$setElementOrder/"
_DELETE_FROM_PRIMITIVE_LIST: Final = "$deleteFromPrimitiveList/"
_DELETE: Final = "delete"
_REPLACE: Final = "replace"
_MERGE: Final = "merge"
# Marks "no value" where None is a legitimate JSON value.
_ABSENT: Final = object()


@functools.lru_cache(maxsize=64)
def _strategies_for(kind: str | None) -> Mapping[tuple[str, str], MergeStrategy]:
    table = dict(LIST_MERGE_STRATEGIES)
    if kind is None:
        for extra in KIND_LIST_MERGE_STRATEGIES.values():
            table.update(extra)
    else:
        table.update(KIND_LIST_MERGE_STRATEGIES.get(kind, {}))
    return MappingProxyType(table)


@dataclass(frozen=True, slots=True)
class _Schema:
    """What Go's LookupPatchMetadata answers, from the tables above."""

    table: Mapping[tuple[str, str], MergeStrategy]

    def strategy(self, parent: str, field: str) -> MergeStrategy | None:
        found = self.table.get((parent, field))
        return found if found is not None else self.table.get(("*", field))


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


# --------------------------------------------------------------------------- dispatch

_Applier = Callable[[dict[str, Any], Any, str | None], dict[str, Any]]

_APPLIERS: Final[Mapping[str, _Applier]] = MappingProxyType(
    {
        JSON_PATCH: lambda target, body, _kind: json_patch(target, body),
        MERGE_PATCH: lambda target, body, _kind: merge_patch(target, body),
        STRATEGIC_MERGE_PATCH: strategic_merge_patch,
    }
)


def apply_patch(
    target: dict[str, Any], content_type: str, body: bytes | str | Any, kind: str | None = None
) -> dict[str, Any]:
    """Apply a PATCH request body of Content-Type `content_type` to `target` (of Kind `kind`).

    `body` is the raw request body (bytes or str, JSON) or an already decoded value.
    Raises UnsupportedPatchType for any other media type and PatchError for a bad patch.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    applier = _APPLIERS.get(media_type)
    if applier is None:
        raise UnsupportedPatchType(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(PATCH_CONTENT_TYPES)}"
        )
    return applier(target, _decode(body), kind)


def _decode(body: bytes | str | Any) -> Any:
    if not isinstance(body, bytes | bytearray | memoryview | str):
        return body
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PatchError(f"the patch body is not valid JSON: {exc}") from None
