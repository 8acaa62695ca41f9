"""The label selector itself: a validated `Requirement`, and `LabelSelector`, its requirements
precompiled into tuples of plain values so that matching (per object of a list, per watch event of
every watcher) does nothing but dict lookups and comparisons.

Separate from how a selector is obtained (`sim.apiserver.selector_label_parsing`: the query
parameter's text, metav1's structured form, a plain map), which only runs once per request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sim.apiserver.selector_base import (
    Operator,
    _check_key,
    _Invalid,
    _label_value_errors,
    _parse_int64,
)

# --------------------------------------------------------------------------- label selectors


@dataclass(frozen=True, slots=True)
class Requirement:
    """One validated requirement of a label selector: `key operator values`.

    `values` is sorted and without duplicates, like Go's `sets.String.List()`.
    """

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    @classmethod
    def new(cls, key: str, operator: Operator, values: Iterable[str] = ()) -> Requirement:
        """labels.NewRequirement: validate the key, the value count and every value."""
        unique = tuple(sorted(set(values)))
        _check_key(key)
        _check_value_count(operator, unique)
        for value in unique:
            if errors := _label_value_errors(value):
                raise _Invalid(f'invalid value "{value}" for label "{key}": {"; ".join(errors)}')
        return cls(key, operator, unique)

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        joined = ",".join(self.values)
        if op in (Operator.IN, Operator.NOT_IN):
            return f"{self.key} {op.value} ({joined})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{joined}"


def _check_value_count(operator: Operator, values: tuple[str, ...]) -> None:
    if operator in (Operator.IN, Operator.NOT_IN):
        if not values:
            raise _Invalid("for 'in', 'notin' operators, values set can't be empty")
    elif operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS):
        if len(values) != 1:
            raise _Invalid("exact-match compatibility requires one single value")
    elif operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        if values:
            raise _Invalid("values set must be empty for exists and does not exist")
    elif len(values) != 1:
        raise _Invalid("for 'Gt', 'Lt' operators, exactly one value is required")
    elif _parse_int64(values[0]) is None:
        raise _Invalid("for 'Gt', 'Lt' operators, the value must be an integer")


# Compiled checks: (opcode, key, argument). Equality requirements are kept apart (the common case,
# e.g. `app=web`) and tested first with a single dict lookup each.
_OP_IN: Final = 0  # argument: frozenset of values
_OP_NOT_IN: Final = 1  # argument: frozenset of values
_OP_NOT_EQUAL: Final = 2  # argument: the value
_OP_EXISTS: Final = 3
_OP_NOT_EXISTS: Final = 4
_OP_GREATER: Final = 5  # argument: int
_OP_LESS: Final = 6  # argument: int
_EQUALITY_OPERATORS: Final = frozenset({Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN})
_NO_LABELS: Final[Mapping[str, str]] = {}


def _compile(requirement: Requirement) -> tuple[int, str, Any]:
    op, key, values = requirement.operator, requirement.key, requirement.values
    if op is Operator.IN:
        return _OP_IN, key, frozenset(values)
    if op is Operator.NOT_IN:
        return _OP_NOT_IN, key, frozenset(values)
    if op is Operator.NOT_EQUALS:
        return _OP_NOT_EQUAL, key, values[0]
    if op is Operator.EXISTS:
        return _OP_EXISTS, key, None
    if op is Operator.DOES_NOT_EXIST:
        return _OP_NOT_EXISTS, key, None
    return (_OP_GREATER if op is Operator.GREATER_THAN else _OP_LESS), key, int(values[0])


class LabelSelector:
    """A parsed label selector: the AND of its requirements. No requirements matches all."""

    __slots__ = ("_checks", "_equals", "_nothing", "requirements")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        # Sorted by key like Go, so str() is deterministic.
        self.requirements: tuple[Requirement, ...] = tuple(
            sorted(requirements, key=lambda r: r.key)
        )
        self._nothing = nothing
        equals: list[tuple[str, str]] = []
        checks: list[tuple[int, str, Any]] = []
        for requirement in self.requirements:
            if requirement.operator in _EQUALITY_OPERATORS and len(requirement.values) == 1:
                equals.append((requirement.key, requirement.values[0]))
            else:
                checks.append(_compile(requirement))
        self._equals = tuple(equals)
        self._checks = tuple(checks)

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def nothing(cls) -> LabelSelector:
        """Matches no object (what a nil metav1.LabelSelector means)."""
        return cls(nothing=True)

    @property
    def empty(self) -> bool:
        """True if the selector does not restrict anything (matches every object)."""
        return not self.requirements and not self._nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self._nothing:
            return False
        if labels is None:
            labels = _NO_LABELS
        for key, value in self._equals:
            if labels.get(key) != value:
                return False
        # Plain loops, not all(<generator>): this runs per object per list/watch event, and the
        # generator costs more than the comparisons.
        for op, key, argument in self._checks:  # noqa: SIM110
            if not _check(op, labels.get(key), argument):
                return False
        return True

    def requires_exact_match(self, key: str) -> str | None:
        """The single value `key` must have for a match, if the selector pins one."""
        for requirement in self.requirements:
            if requirement.key == key:
                if requirement.operator in _EQUALITY_OPERATORS and len(requirement.values) == 1:
                    return requirement.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        if self._nothing:
            return "LabelSelector.nothing()"
        return f"LabelSelector({str(self)!r})"


def _check(op: int, value: str | None, argument: Any) -> bool:
    """One non-equality requirement against a label's value (None: the label is absent).

    Absent labels satisfy `!=` and `notin`, as in Kubernetes.
    """
    if op == _OP_IN:
        return value is not None and value in argument
    if op == _OP_NOT_IN:
        return value is None or value not in argument
    if op == _OP_NOT_EQUAL:
        return value != argument
    if op == _OP_EXISTS:
        return value is not None
    if op == _OP_NOT_EXISTS:
        return value is None
    number = _parse_int64(value) if value is not None else None
    if number is None:
        return False
    return number > argument if op == _OP_GREATER else number < argument
