"""What server-side apply and field ownership need to know about a type's fields: how each list
merges (atomic, a set, or an associative list keyed by some of its items' fields), which maps are
atomic, and which map keys are declared fields (structs) rather than entries of a map.

kube-apiserver reads this from the OpenAPI schema of each type (`x-kubernetes-list-type`,
`x-kubernetes-list-map-keys`, `x-kubernetes-map-type`, generated from the Go types' `+listType`
markers for built-ins). We have no Go types:

- Built-in kinds (`BuiltinShape`) reuse the strategic-merge-patch tables of
  `sim.apiserver.patch_strategies` (a `patchMergeKey` list is an associative list keyed by it, a
  merging list of primitives is a set, an untagged list is atomic), corrected where server-side
  apply keys a list differently (container and service ports are keyed by port *and* protocol,
  topology spread constraints by topologyKey and whenUnsatisfiable). Label selectors are atomic
  maps (`+structType=atomic`). Every other map key counts as a declared field, which differs from
  Kubernetes only for maps whose values are themselves maps (none that users apply).
- Custom resources (`CrdShape`) follow their CRD's openAPIV3Schema as kube-apiserver does: lists
  are atomic unless `x-kubernetes-list-type` says `set` or `map`; `metadata` is ObjectMeta.

`zero_value` answers a Go detail that shows in `managedFields`: a built-in object decoded by
kube-apiserver always carries its non-pointer structs (`spec`, `status`, a pod template's
`metadata` and `spec`, `resources`, ...) and its lists without omitempty (`containers`), so a
write that fills one in does not "add" the field itself, only what is in it. Custom resources are
plain maps and have no such fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

from sim.apiserver.patch_strategies import _Schema, _strategies_for
from sim.apiserver.registry import ResourceType

ATOMIC: Final = "atomic"
SET: Final = "set"
MAP: Final = "map"


@dataclass(frozen=True, slots=True)
class ListType:
    kind: str  # ATOMIC, SET or MAP
    keys: tuple[str, ...] = ()
    # Values a missing key field takes (kube-apiserver's schema defaults, e.g. protocol: TCP).
    defaults: Mapping[str, Any] = field(default_factory=dict)


ATOMIC_LIST: Final = ListType(ATOMIC)
SET_LIST: Final = ListType(SET)
_TCP: Final = {"protocol": "TCP"}

# Lists that server-side apply keys differently from strategic merge patch (+listMapKey markers).
_SSA_LISTS: Final[Mapping[tuple[str, str], ListType]] = {
    ("containers", "ports"): ListType(MAP, ("containerPort", "protocol"), _TCP),
    ("initContainers", "ports"): ListType(MAP, ("containerPort", "protocol"), _TCP),
    ("ephemeralContainers", "ports"): ListType(MAP, ("containerPort", "protocol"), _TCP),
    ("*", "topologySpreadConstraints"): ListType(MAP, ("topologyKey", "whenUnsatisfiable")),
}
_SSA_KIND_LISTS: Final[Mapping[str, Mapping[tuple[str, str], ListType]]] = {
    "Service": {("spec", "ports"): ListType(MAP, ("port", "protocol"), _TCP)},
}
# metav1.LabelSelector and core/v1 NodeSelector are atomic structs; a Service's selector is an
# atomic map.
_ATOMIC_MAPS: Final = frozenset(
    {
        "selector",
        "labelSelector",
        "namespaceSelector",
        "requiredDuringSchedulingIgnoredDuringExecution",
    }
)
# Fields of the built-in types that a decoded object always carries, even when unset: the
# non-pointer structs, and lists Go writes without omitempty (a pod's containers, as null).
_ZERO_VALUES: Final = frozenset(
    {
        "metadata",
        "spec",
        "status",
        "template",
        "strategy",
        "updateStrategy",
        "resources",
        "containers",
    }
)


class BuiltinShape:
    """The value of field `name` of a built-in object whose enclosing field is `parent` ("" at
    the top level; a list item's fields have the list's name as their parent)."""

    __slots__ = ("_children", "_kind", "_parent", "name")

    def __init__(self, kind: str, parent: str, name: str) -> None:
        self._kind = kind
        self._parent = parent
        self.name = name
        self._children: dict[str, BuiltinShape] = {}

    def field(self, key: str) -> BuiltinShape:
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = _builtin(self._kind, self.name, key)
        return child

    def item(self) -> BuiltinShape:
        return self  # an item's fields have this list's name as parent: self.field() gives that

    def list_type(self) -> ListType:
        return _builtin_list_type(self._kind, self._parent, self.name)

    def atomic_map(self) -> bool:
        return self.name in _ATOMIC_MAPS

    def declared(self, key: str) -> bool:
        return True

    def zero_value(self, key: str) -> bool:
        return key in _ZERO_VALUES


@lru_cache(maxsize=4096)
def _builtin(kind: str, parent: str, name: str) -> BuiltinShape:
    return BuiltinShape(kind, parent, name)


@lru_cache(maxsize=4096)
def _builtin_list_type(kind: str, parent: str, name: str) -> ListType:
    for table in (_SSA_KIND_LISTS.get(kind, {}), _SSA_LISTS):
        found = table.get((parent, name)) or table.get(("*", name))
        if found is not None:
            return found
    strategy = _Schema(_strategies_for(kind)).strategy(parent, name)
    if strategy is None:
        return ATOMIC_LIST
    return SET_LIST if strategy.key is None else ListType(MAP, (strategy.key,))


class CrdShape:
    """A node of a CRD's openAPIV3Schema (None: no schema, e.g. under
    x-kubernetes-preserve-unknown-fields)."""

    __slots__ = ("_children", "_node", "_root")

    def __init__(self, node: dict[str, Any] | None, root: bool = False) -> None:
        self._node = node or {}
        self._root = root
        self._children: dict[str, Any] = {}

    def field(self, key: str) -> Any:
        child = self._children.get(key)
        if child is None:
            if self._root and key == "metadata":
                child = _builtin("", "", "metadata")  # ObjectMeta, whatever the CRD says
            else:
                props = self._node.get("properties") or {}
                sub = props.get(key)
                if sub is None and isinstance(self._node.get("additionalProperties"), dict):
                    sub = self._node["additionalProperties"]
                child = CrdShape(sub)
            self._children[key] = child
        return child

    def item(self) -> CrdShape:
        child = self._children.get("[]")
        if child is None:
            child = self._children["[]"] = CrdShape(self._node.get("items"))
        return child

    def list_type(self) -> ListType:
        kind = self._node.get("x-kubernetes-list-type")
        if kind == "set":
            return SET_LIST
        if kind == "map":
            keys = tuple(self._node.get("x-kubernetes-list-map-keys") or ())
            props = (self._node.get("items") or {}).get("properties") or {}
            defaults = {k: props[k]["default"] for k in keys if "default" in (props.get(k) or {})}
            return ListType(MAP, keys, defaults)
        return ATOMIC_LIST

    def atomic_map(self) -> bool:
        return self._node.get("x-kubernetes-map-type") == "atomic"

    def declared(self, key: str) -> bool:
        return key in (self._node.get("properties") or {}) or (self._root and key == "metadata")

    def zero_value(self, key: str) -> bool:
        return False


Shape = BuiltinShape | CrdShape
_CRD_ROOTS: dict[int, tuple[dict[str, Any] | None, CrdShape]] = {}


def shape_of(rtype: ResourceType) -> Shape:
    """The root shape of objects of `rtype`."""
    if not rtype.custom:
        return _builtin(rtype.kind, "", "")
    cached = _CRD_ROOTS.get(id(rtype.schema))
    if cached is None or cached[0] is not rtype.schema:
        cached = _CRD_ROOTS[id(rtype.schema)] = (rtype.schema, CrdShape(rtype.schema, root=True))
    return cached[1]
