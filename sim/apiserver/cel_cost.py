"""Static cost of a CRD validation rule, estimated the way kube-apiserver does.

kube-apiserver (apiextensions-apiserver's CRD validation, with cel-go's checker cost estimator and
Kubernetes' size estimator) refuses a CRD whose rules could cost too much to evaluate. What this
module reproduces, learned from that code:

- Every schema node gets a declared type with a maximum size: `maxItems` / `maxProperties` for
  lists and maps, `maxLength` x 4 (bytes per rune) for strings, the longest value for enums, and
  otherwise "as many as fit in a 3 MiB request" (3 MiB divided by the smallest serialized item).
- Costs (cel-go's units): 1 per identifier and per field select on an object or map, 0 per
  literal and per `has()`, 1 per function call plus its arguments; `==`, `!=` and string
  comparisons cost 0.1 per character of the shorter side; `+` on strings 0.1 per character of the
  result; `x in list` the list's size; `matches` (size+1) x 0.1 x regex length x 0.25;
  `contains`, `startsWith`, `endsWith` 0.1 per character. `&&`/`||` and `?:` take the worst
  branch sum.
- Macros are comprehensions: range cost + size of the range x (body + the loop's bookkeeping:
  `all` +3, `exists` +4, `exists_one` +2, `map` +12, `filter` +13); nested macros multiply.
- A rule runs once per element of the enclosing lists and maps (`sim.apiserver.crd_cel_budget`
  multiplies by that cardinality).

Only worst-case (maximum) costs are tracked: the limits compare against them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from sim.apiserver.cel_parse import Call, Ident, ListLit, Literal, Macro, MapLit, Select, parse

MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024  # celconfig.MaxRequestSizeBytes
U64 = 2**64 - 1  # cel-go saturates at MaxUint64; an unknown size is that too
STRING_TRAVERSAL_COST_FACTOR = 0.1
REGEX_STRING_LENGTH_COST_FACTOR = 0.25
_SCALARS = frozenset({"bool", "int", "uint", "double", "duration", "timestamp"})


def _add(*values: int) -> int:
    return min(sum(values), U64)


def _mul(a: int, b: int) -> int:
    return min(a * b, U64)


def _by_factor(size: int, factor: float) -> int:
    value = math.ceil(float(size) * factor)
    return U64 if value >= 2.0**64 else value


@dataclass(slots=True)
class Decl:
    """A schema node as CEL sees it (Kubernetes' DeclType): its kind, maximum size (items,
    properties or string bytes; 0 for objects and scalars) and smallest JSON serialization."""

    kind: str  # object, list, map, string, bytes, int, double, bool, dyn, duration, timestamp
    max_elements: int = 0
    min_size: int = 1
    elem: Decl | None = None
    key: Decl | None = None
    fields: dict[str, Decl] = field(default_factory=dict)


_STRING_KEY = Decl("string", 0, 2)  # map keys: Kubernetes' StringType, declared without a size
_PER_REQUEST = MAX_REQUEST_SIZE_BYTES - 2


def decl_of(schema: dict[str, Any] | None, resource_root: bool = False) -> Decl | None:
    """Kubernetes' SchemaDeclType for a structural schema; None when CEL cannot see the node."""
    if not isinstance(schema, dict):
        return None
    if schema.get("x-kubernetes-int-or-string"):
        bound = schema.get("maxLength")
        return Decl("dyn", bound * 4 if bound is not None else _PER_REQUEST, 1)
    if resource_root or schema.get("x-kubernetes-embedded-resource"):
        schema = _with_type_and_object_meta(schema)
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        item = decl_of(
            items, bool(isinstance(items, dict) and items.get("x-kubernetes-embedded-resource"))
        )
        if item is None:
            return None
        bound = schema.get("maxItems")
        count = max(bound, 0) if bound is not None else _PER_REQUEST // (item.min_size + 1)
        return Decl("list", count, 2, elem=item)
    if kind == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, dict):
            value = decl_of(values, bool(values.get("x-kubernetes-embedded-resource")))
            if value is None:
                return None
            bound = schema.get("maxProperties")
            count = max(bound, 0) if bound is not None else _PER_REQUEST // (value.min_size + 6)
            return Decl("map", count, 2, elem=value, key=_STRING_KEY)
        required = set(schema.get("required") or ())
        fields: dict[str, Decl] = {}
        min_size = 2
        for name, prop in (schema.get("properties") or {}).items():
            child = decl_of(prop, bool(prop.get("x-kubernetes-embedded-resource")))
            if child is None:
                continue
            fields[name] = child
            if name in required and "default" not in prop:
                min_size += len(name) + child.min_size + 4
        return Decl("object", 0, min_size, fields=fields)
    if kind == "string":
        return _string_decl(schema)
    if kind == "boolean":
        return Decl("bool", 0, 4)
    if kind == "number":
        return Decl("double", 0, 1)
    if kind == "integer":
        return Decl("int", 0, 1)
    return None


def _string_decl(schema: dict[str, Any]) -> Decl:
    fmt = schema.get("format")
    bound = schema.get("maxLength")
    if fmt == "byte":
        return Decl("bytes", max(bound, 0) if bound is not None else _PER_REQUEST, 2)
    if fmt == "duration":
        return Decl("duration", 32, 3)
    if fmt == "date":
        return Decl("timestamp", 12, 12)
    if fmt == "date-time":
        return Decl("timestamp", 32, 21)
    if bound is not None:
        return Decl("string", max(bound, 0) * 4, 2)
    enum = [v for v in schema.get("enum") or () if isinstance(v, str)]
    if schema.get("enum"):
        return Decl("string", max((len(v.encode()) for v in enum), default=0), 2)
    return Decl("string", _PER_REQUEST, 2)


def _with_type_and_object_meta(schema: dict[str, Any]) -> dict[str, Any]:
    """apiVersion, kind, metadata.name and metadata.generateName are always visible at a
    resource's root."""
    props = dict(schema.get("properties") or {})
    meta = props.get("metadata") or {}
    meta_props = meta.get("properties") or {}
    if all(k in props for k in ("apiVersion", "kind")) and {"name", "generateName"} <= set(
        meta_props
    ):
        return schema
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    props["metadata"] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
    }
    return {**schema, "properties": props}


@dataclass(frozen=True, slots=True)
class _Info:
    """What the estimator knows of an expression: its kind, schema node and maximum size."""

    kind: str = "dyn"
    decl: Decl | None = None
    size: int | None = None  # None: unknown (the estimator's MaxUint64)
    elem: _Info | None = None  # the items of a list built in the expression

    @property
    def max_size(self) -> int:
        return U64 if self.size is None else self.size


def _from_decl(decl: Decl | None) -> _Info:
    if decl is None:
        return _Info()
    # A scalar reached through the schema has size 0 (Kubernetes declares no size for it).
    return _Info(decl.kind, decl, decl.max_elements)


def _item_info(range_info: _Info) -> _Info:
    """The iteration variable of a comprehension over `range_info`."""
    decl = range_info.decl
    if decl is not None and decl.kind == "list":
        return _from_decl(decl.elem)
    if decl is not None and decl.kind == "map":
        return _from_decl(decl.key)
    if range_info.elem is not None:
        return range_info.elem
    return _Info()


_QUANTIFIER_OVERHEAD = {"all": 3, "exists": 4, "exists_one": 2}


class _Coster:
    def __init__(self, root: Decl) -> None:
        self.scopes: list[dict[str, _Info]] = [
            {"self": _from_decl(root), "oldSelf": _from_decl(root)}
        ]

    def lookup(self, name: str) -> _Info:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return _Info()

    def cost(self, node: Any) -> tuple[int, _Info]:
        if isinstance(node, Literal):
            return 0, _literal_info(node)
        if isinstance(node, Ident):
            return 1, self.lookup(node.name)
        if isinstance(node, Select):
            return self.select(node)
        if isinstance(node, ListLit):
            costs = [self.cost(e) for e in node.elements]
            elem_size = max((i.max_size for _, i in costs), default=0)
            elem = costs[0][1] if costs else _Info()
            return _add(10, *(c for c, _ in costs)), _Info(
                "list", None, len(node.elements), replace(elem, size=elem_size)
            )
        if isinstance(node, MapLit):
            total = _add(30, *(self.cost(k)[0] + self.cost(v)[0] for k, v in node.entries))
            return total, _Info("map", None, len(node.entries))
        if isinstance(node, Macro):
            return self.macro(node)
        return self.call(node)

    def select(self, node: Select) -> tuple[int, _Info]:
        cost, operand = self.cost(node.operand)
        if node.test_only:
            return cost, _Info("bool", None, 1)  # has(): free in Kubernetes' environment
        if operand.kind in ("object", "map"):
            cost = _add(cost, 1)  # selecting a field of a dyn value is free in cel-go
        decl = operand.decl
        if decl is not None and decl.kind == "object":
            return cost, _from_decl(decl.fields.get(node.field))
        if decl is not None and decl.kind == "map":
            return cost, _from_decl(decl.elem)
        return cost, _Info()

    def macro(self, node: Macro) -> tuple[int, _Info]:
        range_cost, range_info = self.cost(node.target)
        count = range_info.max_size
        self.scopes.append({node.var: _item_info(range_info)})
        try:
            body = [self.cost(arg) for arg in node.args]
        finally:
            self.scopes.pop()
        if node.name in _QUANTIFIER_OVERHEAD:
            result = 2 if node.name == "exists_one" else 1  # accu == 1, or accu
            step = _add(body[0][0], _QUANTIFIER_OVERHEAD[node.name])
            return _add(range_cost, result, _mul(count, step)), _Info("bool", None, 1)
        # map / filter build a list: [] costs 10, the result 1, each step appends ([x] + 11).
        if node.name == "map" and len(body) == 1:
            step, elem = _add(body[0][0], 12), body[0][1]
        elif node.name == "map":
            step, elem = _add(body[0][0], body[1][0], 12), body[1][1]
        else:
            step, elem = _add(body[0][0], 13), _item_info(range_info)
        return _add(range_cost, 11, _mul(count, step)), _Info("list", None, count, elem)

    def call(self, node: Call) -> tuple[int, _Info]:
        fn = node.function
        target_cost, target = self.cost(node.target) if node.target is not None else (0, None)
        args = [self.cost(a) for a in node.args]
        arg_sum = _add(target_cost, *(c for c, _ in args))
        infos = [i for _, i in args]
        if fn in ("_&&_", "_||_"):
            return arg_sum, _Info("bool", None, 1)
        if fn == "_?_:_":
            (c0, _), (c1, i1), (c2, i2) = args
            size = max(i1.max_size, i2.max_size)
            return _add(c0, max(c1, c2)), replace(i1, size=size, decl=i1.decl or i2.decl)
        if fn in ("_==_", "_!=_") or (
            fn in ("_<_", "_<=_", "_>_", "_>=_") and infos[0].kind in ("string", "bytes")
        ):
            smallest = min(infos[0].max_size, infos[1].max_size)
            return _add(_by_factor(smallest, STRING_TRAVERSAL_COST_FACTOR), arg_sum), _BOOL
        if fn == "_+_" and infos[0].kind in ("string", "bytes"):
            size = _add(infos[0].max_size, infos[1].max_size)
            cost = _add(_by_factor(size, STRING_TRAVERSAL_COST_FACTOR), arg_sum)
            return cost, _Info(infos[0].kind, None, size)
        if fn == "_+_" and infos[0].kind == "list":
            size = _add(infos[0].max_size, infos[1].max_size)
            return _add(1, arg_sum), _Info("list", None, size, infos[0].elem or infos[1].elem)
        if fn == "@in" and infos[1].kind == "list":
            return _add(infos[1].max_size, arg_sum), _BOOL
        if fn == "_[_]":
            container = infos[0]
            item = _item_info(container) if container.kind == "list" else _Info()
            if container.decl is not None and container.decl.kind == "map":
                item = _from_decl(container.decl.elem)
            return _add(1, arg_sum), item
        if target is not None and fn in ("matches", "contains", "startsWith", "endsWith"):
            return _add(self.string_call(fn, target, infos), arg_sum), _BOOL
        if target is not None and fn in ("lowerAscii", "upperAscii", "trim", "substring"):
            cost = _by_factor(target.max_size, STRING_TRAVERSAL_COST_FACTOR)
            return _add(cost, arg_sum), _Info("string", None, target.size)
        if target is not None and fn in ("isSorted", "sum", "max", "min"):
            return _add(target.max_size, arg_sum), _Info("bool" if fn == "isSorted" else "dyn")
        if target is not None and fn in ("indexOf", "lastIndexOf") and target.kind == "list":
            return _add(target.max_size, arg_sum), _Info("int", None, 1)
        if target is not None and fn in ("indexOf", "lastIndexOf", "replace", "split", "join"):
            cost = _by_factor(target.max_size, STRING_TRAVERSAL_COST_FACTOR)
            return _add(cost, arg_sum), _Info("dyn")
        if target is None and fn in ("string", "bytes") and len(infos) == 1:
            return self.conversion(fn, infos[0], arg_sum)
        return _add(1, arg_sum), _call_result(fn, infos, target)

    @staticmethod
    def conversion(fn: str, arg: _Info, arg_sum: int) -> tuple[int, _Info]:
        """string(bytes) and bytes(string) walk their argument; a dyn argument may be either,
        and cel-go takes the worst of the overloads."""
        walks = arg.kind == "dyn" or (fn == "string") == (arg.kind == "bytes")
        if not walks:
            return _add(1, arg_sum), _Info(fn, None, arg.size if arg.kind == fn else None)
        cost = max(1, _by_factor(arg.max_size, STRING_TRAVERSAL_COST_FACTOR))
        size = arg.max_size if fn == "string" else _mul(arg.max_size, 4)
        return _add(cost, arg_sum), _Info(fn, None, size)

    @staticmethod
    def string_call(fn: str, target: _Info, args: list[_Info]) -> int:
        if fn == "matches":
            text = _by_factor(_add(target.max_size, 1), STRING_TRAVERSAL_COST_FACTOR)
            return _mul(text, _by_factor(args[0].max_size, REGEX_STRING_LENGTH_COST_FACTOR))
        if fn == "contains":
            text = _by_factor(target.max_size, STRING_TRAVERSAL_COST_FACTOR)
            return _mul(text, _by_factor(args[0].max_size, STRING_TRAVERSAL_COST_FACTOR))
        return _by_factor(args[0].max_size, STRING_TRAVERSAL_COST_FACTOR)


_BOOL = _Info("bool", None, 1)
_RESULT_KINDS = {
    "size": "int",
    "int": "int",
    "uint": "uint",
    "double": "double",
    "string": "string",
    "bytes": "bytes",
    "bool": "bool",
    "!_": "bool",
    "@in": "bool",
    "_<_": "bool",
    "_<=_": "bool",
    "_>_": "bool",
    "_>=_": "bool",
}


def _call_result(fn: str, infos: list[_Info], target: _Info | None) -> _Info:
    kind = _RESULT_KINDS.get(fn)
    if kind is None and fn in ("_+_", "_-_", "_*_", "_/_", "_%_", "-_") and infos:
        kind = infos[0].kind if infos[0].kind in _SCALARS else "dyn"
    if kind in _SCALARS:
        return _Info(kind, None, 1)  # a computed scalar has size 1
    return _Info(kind or "dyn")


def _literal_info(node: Literal) -> _Info:
    if node.type == "string":
        return _Info("string", None, len(node.value))
    if node.type == "bytes":
        return _Info("bytes", None, len(node.value))
    return _Info(node.type, None, 1)


def rule_cost(rule: str, decl: Decl) -> int:
    """The worst-case cost of one evaluation of `rule` at a node declared as `decl` (cel-go's
    EstimateCost(...).Max with Kubernetes' estimator). Raises CelSyntaxError."""
    cost, _ = _Coster(decl).cost(parse(rule))
    return cost


def max_cardinality(decl: Decl) -> int:
    """How often a rule may run when an enclosing list or map has no bound: as often as the
    node's smallest serialization fits in a request (Kubernetes' maxCardinality)."""
    return MAX_REQUEST_SIZE_BYTES // (decl.min_size + 1)
