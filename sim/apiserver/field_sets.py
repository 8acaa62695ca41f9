"""Sets of field paths in Kubernetes' FieldsV1 form, the form `metadata.managedFields` stores.

A set is a trie of dicts keyed by serialized path elements, exactly as the API shows it:
`{"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:containers": {'k:{"name":"c"}':
{".": {}, "f:image": {}}}}}`. A node is a member of the set when it is an empty dict (a leaf) or
holds the `"."` marker; other keys are its children. Path elements are `f:<field>`, `k:<JSON of
the key fields>` (an item of an associative list), `v:<JSON value>` (an item of a set list) and
`i:<index>`.

Faithful to sigs.k8s.io/structured-merge-diff's fieldpath package where users see it: the
serialization of path elements (key fields sorted, compact JSON, Go's escaping of `<>&`), the
order of keys in a trie (".", then fields by name, then keys, values and indexes, each ordered as
`PathElement.Compare` orders them), the order in which paths are listed (a node's members before
its children's paths) and `Path.String()` (`.spec.containers[name="c"].image`).

Simplified: the sets stay in this serialized form instead of being parsed into path elements, so
the operations below work on the dicts directly (and in place where the caller owns the trie);
that keeps a write that touches a few fields cheap.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

Tree = dict[str, Any]
SELF = "."


# --------------------------------------------------------------------------- path elements


def _go_json(value: Any) -> str:
    """JSON as Go's encoding/json writes it: compact, with <, > and & escaped."""
    text = orjson.dumps(value).decode()
    if "<" in text or ">" in text or "&" in text:
        text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return text


def field_element(name: str) -> str:
    return "f:" + name


def key_element(fields: dict[str, Any]) -> str:
    """`k:{...}` for an associative list item with these key fields (sorted by name). Key
    names are schema field names, which JSON writes as they are."""
    inner = ",".join(f'"{name}":{_go_json(fields[name])}' for name in sorted(fields))
    return "k:{" + inner + "}"


def value_element(value: Any) -> str:
    return "v:" + _go_json(value)


def value_order(value: Any) -> tuple[Any, ...]:
    """structured-merge-diff's value.Compare: numbers (ints and floats together), strings,
    booleans, lists, maps, then null."""
    if isinstance(value, bool):
        return (2, value)
    if isinstance(value, int | float):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    if isinstance(value, list):
        return (3, tuple(value_order(v) for v in value))
    if isinstance(value, dict):
        return (4, tuple((k, value_order(value[k])) for k in sorted(value)))
    return (5,)


def element_order(element: str) -> tuple[Any, ...]:
    """The sort key of a serialized path element (PathElement.Compare)."""
    kind = element[0]
    if kind == "f":
        return (1, element[2:])
    if element == SELF:
        return (0,)
    if kind == "k":
        fields = orjson.loads(element[2:])
        return (2, tuple((name, value_order(fields[name])) for name in sorted(fields)))
    if kind == "v":
        return (3, value_order(orjson.loads(element[2:])))
    return (4, int(element[2:]))


def _show_value(value: Any) -> str:
    """structured-merge-diff's value.ToString (strings quoted as Go's %q quotes them)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, list):
        return "[" + ",".join(_show_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "".join(f"{k}={_show_value(v)}" for k, v in value.items())
    return str(value)


def element_string(element: str) -> str:
    """PathElement.String(): `.name`, `[key=value,...]`, `[=value]` or `[index]`."""
    kind = element[0]
    if kind == "f":
        return "." + element[2:]
    if kind == "k":
        fields = orjson.loads(element[2:])
        return "[" + ",".join(f"{k}={_show_value(fields[k])}" for k in sorted(fields)) + "]"
    if kind == "v":
        return f"[={_show_value(orjson.loads(element[2:]))}]"
    return f"[{element[2:]}]"


def path_string(path: list[str] | tuple[str, ...]) -> str:
    return "".join(element_string(e) for e in path)


# --------------------------------------------------------------------------- queries


def is_member(node: Tree) -> bool:
    return not node or SELF in node


def _children(node: Tree) -> Iterator[str]:
    return (k for k in node if k != SELF)


def has_children(node: Tree) -> bool:
    return len(node) > (SELF in node)


def paths(tree: Tree) -> list[tuple[str, ...]]:
    """Every member path, in structured-merge-diff's Set.Iterate order (at each level the
    members first, then the paths below each child)."""
    out: list[tuple[str, ...]] = []
    _collect(tree, (), out)
    return out


def _collect(node: Tree, prefix: tuple[str, ...], out: list[tuple[str, ...]]) -> None:
    for key in _children(node):
        if is_member(node[key]):
            out.append((*prefix, key))
    for key in _children(node):
        if has_children(node[key]):
            _collect(node[key], (*prefix, key), out)


# --------------------------------------------------------------------------- building


def _sorted_keys(keys: list[str]) -> list[str]:
    # "." and "f:" keys sort as plain strings ("." < "f"); keys of list items need value order.
    if all(k[0] in "f." for k in keys):
        return sorted(keys)
    return sorted(keys, key=element_order)


def sort_tree(node: Tree) -> Tree:
    """`node` with its keys (recursively) in FieldsV1 order, as a new trie."""
    if not node:
        return {}
    return {key: sort_tree(node[key]) for key in _sorted_keys(list(node))}


def _resort(node: Tree) -> None:
    """Put the keys of one node back in order after an insertion (in place)."""
    items = [(key, node[key]) for key in _sorted_keys(list(node))]
    node.clear()
    node.update(items)


def _in_order(before: str, after: str) -> bool:
    if before == SELF:
        return True
    if before[0] == "f" and after[0] == "f":
        return before < after
    return element_order(before) < element_order(after)


def add_child(node: Tree, element: str, child: Tree) -> None:
    """node[element] = child, keeping `node` sorted (cheap when children come in order)."""
    last = next(reversed(node), None) if node else None
    node[element] = child
    if last is not None and not _in_order(last, element):
        _resort(node)


def insert(tree: Tree, path: list[str] | tuple[str, ...]) -> None:
    """Make `path` a member of `tree` (in place; `tree` stays sorted)."""
    node = tree
    last = len(path) - 1
    for depth, element in enumerate(path):
        child = node.get(element)
        if child is None:
            # A new node: a leaf for the last element, else an intermediate that gets a child
            # at the next step (so it never stays an empty dict, which would read as a member).
            child = {}
            add_child(node, element, child)
            node = child
            if depth == last:
                return
            continue
        if depth < last and not child:
            child[SELF] = {}  # an existing leaf member that now also gets children
        node = child
    if node and SELF not in node:
        items = list(node.items())
        node.clear()
        node[SELF] = {}
        node.update(items)


def union_into(target: Tree, other: Tree, *, adopt: bool = False) -> None:
    """target |= other (in place). `other` is not modified; its subtrees are copied unless
    `adopt` (the caller gives `other` up, and its sorted subtrees are taken as they are)."""
    added = False
    for key in _children(other):
        theirs = other[key]
        mine = target.get(key)
        if mine is None:
            target[key] = theirs if adopt else sort_tree(theirs)
            added = True
            continue
        if is_member(theirs) and not is_member(mine):
            _mark(mine)
        if has_children(theirs):
            if not mine:
                mine[SELF] = {}  # a leaf member gaining children stays a member
            union_into(mine, theirs, adopt=adopt)
    if added:
        _resort(target)


def _mark(node: Tree) -> None:
    items = list(node.items())
    node.clear()
    node[SELF] = {}
    node.update(items)


def difference_into(target: Tree, other: Tree) -> None:
    """target -= other (in place): every member path of `other` stops being one of `target`."""
    for key in [k for k in _children(other) if k in target]:
        theirs = other[key]
        mine = target[key]
        changed = False
        if is_member(theirs) and is_member(mine):
            if not mine:
                del target[key]
                continue
            del mine[SELF]
            changed = True
        if has_children(theirs) and has_children(mine):
            difference_into(mine, theirs)
            changed = True
        if changed and not has_children(mine):
            if SELF in mine:
                mine.clear()  # a member with no children left is a leaf
            else:
                del target[key]  # neither a member nor a parent any more


def intersection(a: Tree, b: Tree) -> Tree:
    """a & b, as a new trie."""
    out: Tree = {}
    for key in _children(a):
        theirs = b.get(key)
        if theirs is None:
            continue
        mine = a[key]
        both = is_member(mine) and is_member(theirs)
        below = intersection(mine, theirs) if has_children(mine) and has_children(theirs) else {}
        if below:
            out[key] = {SELF: {}, **below} if both else below
        elif both:
            out[key] = {}
    return out


def copy_tree(node: Tree) -> Tree:
    return {k: copy_tree(v) for k, v in node.items()}
