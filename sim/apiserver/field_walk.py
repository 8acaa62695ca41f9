"""The two walks of an object that field ownership is computed from, after
sigs.k8s.io/structured-merge-diff's typed package:

- `field_set(obj, shape)` (`TypedValue.ToFieldSet`): the fields an applied configuration
  specifies. Scalars, nulls, empty maps, atomic lists and maps and every item of a set or an
  associative list are members; a map that is not a declared field (an entry of a map, as under
  `additionalProperties`) is a member too. Empty non-atomic lists are not, as in Go.
- `compare(old, new, shape)` (`TypedValue.Compare`): the paths added, modified and removed between
  two versions of an object. A path present on one side only is marked with everything below it;
  an atomic value or a type change is one modified path. `created(new, shape)` is the comparison
  of a create, from the zero object of the kind (the hot path: one walk, nothing compared).

Both work on plain JSON values guided by a `Shape` (sim.apiserver.field_shapes). The comparison
skips equal subtrees with one `==` (so a status update costs about the size of what changed) and
never looks at the metadata fields no manager may own (`managedFields`, `resourceVersion`, ...).

`item_element` names list items; an item lacking a key field and without a default fails the way
kube-apiserver fails it (`ShapeError`).
"""

from __future__ import annotations

from typing import Any, Final

from sim.apiserver.field_sets import (
    SELF,
    Tree,
    element_order,
    field_element,
    insert,
    key_element,
    union_into,
    value_element,
    value_order,
)
from sim.apiserver.field_shapes import ATOMIC, MAP, ListType, Shape

_ABSENT: Final = object()
# metadata fields only the server sets (most also stripped from every set, stripmeta.go): no
# manager owns them, so they are never compared.
SERVER_METADATA: Final = frozenset(
    {
        "managedFields",
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)


class ShapeError(ValueError):
    """A value that does not fit its type (e.g. a list item without its key field)."""


def item_element(item: Any, list_type: ListType, index: int, where: str) -> str:
    """The path element of a list item: `k:{...}` in an associative list, `v:...` in a set."""
    if list_type.kind == MAP:
        if not isinstance(item, dict):
            raise ShapeError(
                f"{where}: element {index}: associative list with keys may only have map elements"
            )
        fields: dict[str, Any] = {}
        for key in list_type.keys:
            if key in item:
                value = item[key]
            elif key in list_type.defaults:
                value = list_type.defaults[key]
            else:
                raise ShapeError(
                    f"{where}: element {index}: associative list with keys has an element that "
                    f'omits key field "{key}" (and doesn\'t have default value)'
                )
            if isinstance(value, dict | list):
                raise ShapeError(
                    f'{where}: element {index}: associative list key field "{key}" must be a scalar'
                )
            fields[key] = value
        return key_element(fields)
    if isinstance(item, dict | list):
        raise ShapeError(f"{where}: element {index}: set items must be scalars")
    return value_element(item)


# --------------------------------------------------------------------------- ToFieldSet


def field_set(obj: dict[str, Any], shape: Shape, where: str = "") -> Tree:
    """The set of fields `obj` (an applied configuration) specifies, sorted."""
    out: Tree = {}
    for key in sorted(obj):
        value = obj[key]
        sub = shape.field(key)
        path = f"{where}.{key}"
        if isinstance(value, dict) and value and not sub.atomic_map():
            node = field_set(value, sub, path)
            out[field_element(key)] = node if shape.declared(key) else {SELF: {}, **node}
        elif isinstance(value, list) and value and sub.list_type().kind != ATOMIC:
            node = _list_set(value, sub, path)
            if not shape.declared(key):
                node = {SELF: {}, **node}
            out[field_element(key)] = node
        elif isinstance(value, list) and not value and shape.declared(key):
            continue  # an empty granular list is not a member (ToFieldSet only visits items)
        else:
            out[field_element(key)] = {}
    return out


def _list_set(items: list[Any], shape: Shape, where: str) -> Tree:
    list_type = shape.list_type()
    item_shape = shape.item()
    out: Tree = {}
    for index, item in enumerate(items):
        element = item_element(item, list_type, index, where)
        if element in out:
            raise ShapeError(f"{where}: duplicate entries for key {element[2:]}")
        if isinstance(item, dict) and item:
            out[element] = {SELF: {}, **field_set(item, item_shape, where)}
        else:
            out[element] = {}
    if len(out) > 1:
        out = dict(sorted(out.items(), key=lambda kv: element_order(kv[0])))
    return out


# --------------------------------------------------------------------------- Compare


class Comparison:
    """Paths added, modified and removed from an old object to a new one (FieldsV1 tries)."""

    __slots__ = ("added", "modified", "removed")

    def __init__(self) -> None:
        self.added: Tree = {}
        self.modified: Tree = {}
        self.removed: Tree = {}

    def changed(self) -> Tree:
        """added | modified: what an updater takes and an applier may conflict on. Consumes
        the comparison (`added` becomes the result)."""
        union_into(self.added, self.modified, adopt=True)
        self.modified = {}
        return self.added

    def empty(self) -> bool:
        return not (self.added or self.modified or self.removed)


def created(new: dict[str, Any], shape: Shape) -> Comparison:
    """compare() from nothing to `new` (a create): everything is added, except the fields a
    built-in object has from the start (`zero_value`)."""
    result = Comparison()
    result.added = _filled(new, shape, root=True)
    return result


def _filled(value: dict[str, Any], shape: Shape, root: bool = False) -> Tree:
    """What is added by filling in `value` where the old object had the zero value of its
    type: the fields set, but not the zero-valued fields themselves."""
    out: Tree = {}
    for key in sorted(value):
        child = value[key]
        if root and key in ("apiVersion", "kind"):
            continue
        if key == "managedFields" or (child is None and key in SERVER_METADATA):
            continue  # no set holds them; a template's `creationTimestamp: null` is its zero
        kind = type(child)
        if kind is not dict and kind is not list:
            out["f:" + key] = {}
            continue
        sub = shape.field(key)
        if shape.zero_value(key):
            node = _filled(child, sub) if kind is dict else _everything(child, sub)
            if node:
                out["f:" + key] = node
            continue
        node = {SELF: {}}
        _below(child, sub, node)
        out["f:" + key] = node if len(node) > 1 else {}
    return out


def compare(
    old: dict[str, Any], new: dict[str, Any], shape: Shape, only: str | None = None
) -> Comparison:
    """What changed from `old` to `new` (both whole objects; metadata owned by the server and
    the type fields are ignored). `only`: the one top-level field that may differ (a status
    subresource write changes nothing else)."""
    result = Comparison()
    for key in (only,) if only is not None else sorted(old.keys() | new.keys()):
        if key in ("apiVersion", "kind"):
            continue
        before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if key == "metadata" and isinstance(before, dict) and isinstance(after, dict):
            sub = shape.field(key)
            for meta_key in sorted(before.keys() | after.keys()):
                left, right = before.get(meta_key, _ABSENT), after.get(meta_key, _ABSENT)
                if meta_key not in SERVER_METADATA and not _same(left, right):
                    _compare(
                        left, right, sub.field(meta_key), ["f:metadata", "f:" + meta_key], result
                    )
            continue
        if not _same(before, after):
            _compare_field(before, after, shape, key, [], result)
    return result


def _same(left: Any, right: Any) -> bool:
    """Equal values (the fast path: the unchanged parts of an object are often the very same
    objects, or compare equal in C)."""
    return left is right or (left == right and type(left) is type(right))


def _compare_field(
    before: Any, after: Any, shape: Shape, key: str, path: list[str], out: Comparison
) -> None:
    """Compare field `key` of two maps of `shape`, minding the zero values of built-ins."""
    sub = shape.field(key)
    here = [*path, field_element(key)]
    if before is _ABSENT and type(after) in (dict, list) and shape.zero_value(key):
        below = _filled(after, sub) if type(after) is dict else _everything(after, sub)
        if below:
            union_into(out.added, _wrap(here, below), adopt=True)
        return
    if after is _ABSENT and type(before) in (dict, list) and shape.zero_value(key):
        below = _filled(before, sub) if type(before) is dict else _everything(before, sub)
        if below:
            union_into(out.removed, _wrap(here, below), adopt=True)
        return
    _compare(before, after, sub, here, out)


def _wrap(path: list[str], node: Tree) -> Tree:
    for element in reversed(path):
        node = {element: node}
    return node


def _compare(before: Any, after: Any, shape: Shape, path: list[str], out: Comparison) -> None:
    if before is _ABSENT:
        _graft(out.added, path, after, shape)
        return
    if after is _ABSENT:
        _graft(out.removed, path, before, shape)
        return
    if isinstance(before, dict | None) and isinstance(after, dict | None):
        old, new = before or {}, after or {}
        if shape.atomic_map() or not (old or new):
            insert(out.modified, path)
            return
        for key in sorted(old.keys() | new.keys()):
            left, right = old.get(key, _ABSENT), new.get(key, _ABSENT)
            if not _same(left, right):
                _compare_field(left, right, shape, key, path, out)
        return
    if isinstance(before, list | None) and isinstance(after, list | None):
        old_items, new_items = before or [], after or []
        list_type = shape.list_type()
        if list_type.kind == ATOMIC or not (old_items or new_items):
            insert(out.modified, path)
            return
        try:
            lefts = _index(old_items, list_type)
            rights = _index(new_items, list_type)
        except ShapeError:
            insert(out.modified, path)  # not keyable (invalid data): treat it as atomic
            return
        item_shape = shape.item()
        for element in lefts.keys() | rights.keys():
            left, right = lefts.get(element, _ABSENT), rights.get(element, _ABSENT)
            if not _same(left, right):
                _compare(left, right, item_shape, [*path, element], out)
        return
    # A scalar that changed, or a value that changed type: the path itself is modified and
    # whatever was (or is now) below it removed (or added).
    insert(out.modified, path)
    if isinstance(before, dict | list) and before:
        _graft(out.removed, path, before, shape, itself=False)
    if isinstance(after, dict | list) and after:
        _graft(out.added, path, after, shape, itself=False)


def _index(items: list[Any], list_type: ListType) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for index, item in enumerate(items):
        out.setdefault(item_element(item, list_type, index, ""), item)
    return out


def _graft(tree: Tree, path: list[str], value: Any, shape: Shape, itself: bool = True) -> None:
    """Mark `path` (unless not `itself`) and every path below it in `value`."""
    below = _everything(value, shape)
    if not below:
        if itself:
            insert(tree, path)
        return
    union_into(tree, _wrap(path, {SELF: {}, **below} if itself else below), adopt=True)


def _everything(value: Any, shape: Shape) -> Tree:
    """Every path below `value` (each a member), sorted. The hot part of recording a create."""
    out: Tree = {}
    _below(value, shape, out)
    return out


def _below(value: Any, shape: Shape, out: Tree) -> None:
    """Add every path below `value` to `out` (which may already hold "."): one dict per node,
    none copied."""
    kind = type(value)
    if kind is dict:
        if not value or shape.atomic_map():
            return
        field = shape.field
        for key in sorted(value):
            child = value[key]
            if child and (type(child) is dict or type(child) is list):
                node: Tree = {SELF: {}}
                _below(child, field(key), node)
                out["f:" + key] = node if len(node) > 1 else {}
            else:
                out["f:" + key] = {}
    elif kind is list and value:
        list_type = shape.list_type()
        if list_type.kind == ATOMIC:
            return
        try:
            items = _index(value, list_type)
        except ShapeError:
            return
        item_shape = shape.item()
        for element in _sorted_elements(items, list_type):
            node = {SELF: {}}
            _below(items[element], item_shape, node)
            out[element] = node if len(node) > 1 else {}


def _sorted_elements(items: dict[str, Any], list_type: ListType) -> list[str]:
    """The elements of indexed items in FieldsV1 order, from the items' own key values (no
    parsing of the serialized elements back)."""
    if len(items) < 2:
        return list(items)
    if list_type.kind == MAP:
        keys = sorted(list_type.keys)

        def order(element: str) -> tuple[Any, ...]:
            item = items[element]
            return tuple(
                (k, value_order(item[k] if k in item else list_type.defaults[k])) for k in keys
            )

        return sorted(items, key=order)
    return sorted(items, key=lambda element: value_order(items[element]))
