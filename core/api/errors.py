"""Field errors in the shape of the API server's 422 `Invalid` causes: a path and a reason."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field: `spec.tasks[1].minAvailable` + why."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class InvalidObject(ValueError):
    """An object that breaks its schema or Volcano's admission rules."""

    def __init__(self, kind: str, name: str, errors: list[FieldError]) -> None:
        self.kind = kind
        self.name = name
        self.errors = errors
        joined = ", ".join(str(e) for e in errors)
        super().__init__(f'{kind}.{name} "{name}" is invalid: {joined}')


def format_path(loc: tuple[str | int, ...]) -> str:
    """('spec', 'tasks', 0, 'name') -> 'spec.tasks[0].name'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out:
            out += f".{part}"
        else:
            out = str(part)
    return out or "<root>"


def _reason(err: Any) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if kind == "missing":
        return "Required value"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    shown = _show(value)
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        word = {
            "greater_than_equal": ("greater than or equal to", "ge"),
            "greater_than": ("greater than", "gt"),
            "less_than_equal": ("less than or equal to", "le"),
            "less_than": ("less than", "lt"),
        }[kind]
        return f"Invalid value: {shown}: should be {word[0]} {ctx.get(word[1])}"
    if kind == "literal_error":
        supported = ", ".join(_show(v) for v in _literal_choices(str(ctx.get("expected", ""))))
        return f"Unsupported value: {shown}: supported values: {supported}"
    if kind == "string_pattern_mismatch":
        return f"Invalid value: {shown}: should match '{ctx.get('pattern')}'"
    if kind == "too_long":
        # A list over maxItems: the API server's wording.
        count, most = ctx.get("actual_length"), ctx.get("max_length")
        return f"Too many: {count}: must have at most {most} items"
    if kind == "string_too_long":
        return f"Too long: may not be more than {ctx.get('max_length')} bytes"
    if kind in ("string_too_short", "too_short"):
        return f"Invalid value: {shown}: should be at least {ctx.get('min_length')} chars long"
    if kind.endswith("_type"):
        expected = kind.removesuffix("_type").replace("model", "object").replace("dict", "object")
        return f"Invalid value: {shown}: must be of type {expected}"
    return f"Invalid value: {shown}: {err['msg']}"


_LITERAL = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^,\s]+""")


def _literal_choices(expected: str) -> list[Any]:
    """pydantic's `'a', 'b' or 3` back into ['a', 'b', 3], to print as kube-apiserver does."""
    out: list[Any] = []
    for token in _LITERAL.findall(expected):
        if token == "or":
            continue
        try:
            out.append(ast.literal_eval(token))
        except (ValueError, SyntaxError):
            out.append(token)
    return out


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict | list):
        return f'"{type(value).__name__}"'
    return str(value)


def from_validation_error(
    exc: ValidationError, prefix: tuple[str | int, ...] = ()
) -> list[FieldError]:
    """Turn pydantic's errors into API-server style field errors (aliases, not Python names)."""
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        # Union members show up as extra loc parts ("str", "int"); they are not field names.
        loc = tuple(p for p in loc if not (isinstance(p, str) and p in _TYPE_TAGS))
        if err["type"] == "quantity":
            # A ResourceList value: name the resource the way the API server does.
            ctx = err.get("ctx") or {}
            field = f"{format_path(prefix + loc)}[{ctx.get('key')}]"
            out.append(FieldError(field, str(ctx.get("reason"))))
            continue
        out.append(FieldError(format_path(prefix + loc), _reason(err)))
    return out


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "function-after[_check_quantities()]"})
