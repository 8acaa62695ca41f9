"""A parser for CEL expressions into the tree cel-go's cost estimator walks.

The embedded API server evaluates CRD rules with cel-python, but estimating their cost the way
kube-apiserver does (`sim.apiserver.cel_cost`) needs cel-go's view of an expression: operators as
calls (`_||_`, `_==_`, `_[_]`, `@in`), `has()` as a test-only select, and the macros (`all`,
`exists`, `exists_one`, `map`, `filter`) as comprehensions. This module gives that tree; it
accepts the whole CEL grammar (literals of every kind, ternaries, member calls, list and map
literals) but checks no types.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


class CelSyntaxError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any
    type: str  # bool, int, uint, double, string, bytes, null


@dataclass(frozen=True, slots=True)
class Ident:
    name: str


@dataclass(frozen=True, slots=True)
class Select:
    operand: Any
    field: str
    test_only: bool = False  # has(operand.field)


@dataclass(frozen=True, slots=True)
class Call:
    function: str  # cel-go's operator names: _||_, _&&_, !_, -_, _==_, _[_], @in, _?_:_ ...
    args: tuple[Any, ...]
    target: Any = None  # the receiver of a member call (`s.startsWith(x)`)


@dataclass(frozen=True, slots=True)
class ListLit:
    elements: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class MapLit:
    entries: tuple[tuple[Any, Any], ...]


@dataclass(frozen=True, slots=True)
class Macro:
    """A comprehension macro: `target.name(var, args...)`."""

    name: str
    target: Any
    var: str
    args: tuple[Any, ...] = field(default=())


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<string>[rR]?[bB]?[rR]?
        ("{3}[\s\S]*?"{3}|'{3}[\s\S]*?'{3}|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[uU]?)
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|[<>!+\-*/%?:.,()\[\]{}])
    """,
    re.VERBOSE,
)
_RELATIONS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_"}


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise CelSyntaxError(f"unexpected character {text[pos]!r} at {pos}")
        pos = match.end()
        kind = match.lastgroup or ""
        if kind != "ws":
            out.append((kind, match.group(kind)))
    out.append(("end", ""))
    return out


def parse(text: str) -> Any:
    """The expression tree of `text`; raises CelSyntaxError."""
    parser = _Parser(_tokens(text))
    expr = parser.expr()
    parser.expect("end")
    return expr


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos]

    def take(self) -> tuple[str, str]:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def accept(self, text: str) -> bool:
        kind, value = self.peek()
        if kind in ("op", "ident") and value == text:
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> None:
        kind, value = self.take()
        if (kind == "end" and text == "end") or (value == text and kind != "end"):
            return
        raise CelSyntaxError(f"expected {text!r}, found {value or 'end of expression'!r}")

    def expr(self) -> Any:
        cond = self.binary_chain(self.conditional_and, "||", "_||_")
        if self.accept("?"):
            then = self.binary_chain(self.conditional_and, "||", "_||_")
            self.expect(":")
            return Call("_?_:_", (cond, then, self.expr()))
        return cond

    def binary_chain(self, operand: Any, op: str, function: str) -> Any:
        left = operand()
        while self.accept(op):
            left = Call(function, (left, operand()))
        return left

    def conditional_and(self) -> Any:
        return self.binary_chain(self.relation, "&&", "_&&_")

    def relation(self) -> Any:
        left = self.addition()
        while True:
            kind, value = self.peek()
            if kind == "op" and value in _RELATIONS:
                self.take()
                left = Call(_RELATIONS[value], (left, self.addition()))
            elif kind == "ident" and value == "in":
                self.take()
                left = Call("@in", (left, self.addition()))
            else:
                return left

    def addition(self) -> Any:
        left = self.multiplication()
        while self.peek() in (("op", "+"), ("op", "-")):
            function = "_+_" if self.take()[1] == "+" else "_-_"
            left = Call(function, (left, self.multiplication()))
        return left

    def multiplication(self) -> Any:
        left = self.unary()
        while self.peek() in (("op", "*"), ("op", "/"), ("op", "%")):
            function = {"*": "_*_", "/": "_/_", "%": "_%_"}[self.take()[1]]
            left = Call(function, (left, self.unary()))
        return left

    def unary(self) -> Any:
        for op, function in (("!", "!_"), ("-", "-_")):
            count = 0
            while self.accept(op):
                count += 1
            if count:
                operand = self.member()
                negative_number = isinstance(operand, Literal) and operand.type in ("int", "double")
                if op == "-" and count == 1 and negative_number:
                    return Literal(-operand.value, operand.type)
                # cel-go drops pairs of the same unary operator.
                return Call(function, (operand,)) if count % 2 else operand
        return self.member()

    def member(self) -> Any:
        expr = self.primary()
        while True:
            if self.accept("."):
                kind, name = self.take()
                if kind != "ident":
                    raise CelSyntaxError(f"expected a field name after '.', found {name!r}")
                if self.accept("("):
                    args = self.arguments(")")
                    expr = self.member_call(expr, name, args)
                else:
                    expr = Select(expr, name)
            elif self.accept("["):
                index = self.expr()
                self.expect("]")
                expr = Call("_[_]", (expr, index))
            else:
                return expr

    def member_call(self, target: Any, name: str, args: list[Any]) -> Any:
        if name in MACROS and len(args) in (2, 3) and isinstance(args[0], Ident):
            return Macro(name, target, args[0].name, tuple(args[1:]))
        return Call(name, tuple(args), target)

    def arguments(self, close: str) -> list[Any]:
        args: list[Any] = []
        while not self.accept(close):
            args.append(self.expr())
            if not self.accept(","):
                self.expect(close)
                break
        return args

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "number":
            return _number(value)
        if kind == "string":
            return _string(value)
        if kind == "ident":
            if value in ("true", "false"):
                return Literal(value == "true", "bool")
            if value == "null":
                return Literal(None, "null")
            if self.accept("("):
                args = self.arguments(")")
                if value == "has":
                    if len(args) != 1 or not isinstance(args[0], Select):
                        raise CelSyntaxError("invalid argument to has() macro")
                    return Select(args[0].operand, args[0].field, test_only=True)
                return Call(value, tuple(args))
            return Ident(value)
        if kind == "op" and value == ".":
            return self.primary()  # a leading dot names the root scope
        if kind == "op" and value == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if kind == "op" and value == "[":
            return ListLit(tuple(self.arguments("]")))
        if kind == "op" and value == "{":
            entries: list[tuple[Any, Any]] = []
            while not self.accept("}"):
                key = self.expr()
                self.expect(":")
                entries.append((key, self.expr()))
                if not self.accept(","):
                    self.expect("}")
                    break
            return MapLit(tuple(entries))
        raise CelSyntaxError(f"unexpected {value or 'end of expression'!r}")


def _number(text: str) -> Literal:
    unsigned = text[-1] in "uU"
    body = text[:-1] if unsigned else text
    if body[:2] in ("0x", "0X"):
        return Literal(int(body, 16), "uint" if unsigned else "int")
    if any(ch in body for ch in ".eE"):
        return Literal(float(body), "double")
    return Literal(int(body), "uint" if unsigned else "int")


def _string(text: str) -> Literal:
    prefix = ""
    while text[0] in "rRbB":
        prefix += text[0].lower()
        text = text[1:]
    quote = 3 if text[:3] in ('"""', "'''") else 1
    body = text[quote:-quote]
    if "r" not in prefix:
        body = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    if "b" in prefix:
        return Literal(body.encode("utf-8", "surrogateescape"), "bytes")
    return Literal(body, "string")
