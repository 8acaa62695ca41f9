"""Label and field selectors as the Kubernetes API server parses and evaluates them.

- Label selectors: k8s.io/apimachinery/pkg/labels/selector.go (`Parse`, `Requirement.Matches`),
  plus metav1 `LabelSelectorAsSelector` for the structured `{matchLabels, matchExpressions}` form
  and `SelectorFromSet` for a plain map (Service and ReplicationController selectors).
- Field selectors: k8s.io/apimachinery/pkg/fields/selector.go (`ParseSelector`).

Parsing happens once per request; matching runs for every object of a list (100,000 pods) and for
every watch event of every watcher, so a parsed selector is precompiled into tuples of plain
values and matching does nothing but dict lookups and comparisons.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "label_selector_from_dict",
    "label_selector_from_set",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A selector the API server rejects (400 BadRequest); the message quotes the selector."""


class Operator(enum.StrEnum):
    """k8s.io/apimachinery/pkg/selection.Operator."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


# --------------------------------------------------------------------------- validation

_MAX_LABEL_VALUE = 63
_MAX_NAME_PART = 63
_MAX_PREFIX = 253
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_NAME_CHARS = (
    "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)


def _qualified_name_errors(key: str) -> list[str]:
    """k8s.io/apimachinery/pkg/util/validation.IsQualifiedName: `[prefix/]name`."""
    prefix, slash, name = key.rpartition("/")
    errors = []
    if slash:
        if "/" in prefix:
            return [f"a qualified name must {_NAME_CHARS}, with an optional DNS prefix and one '/'"]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > _MAX_PREFIX:
            errors.append(f"prefix part must be no more than {_MAX_PREFIX} characters")
        elif not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            errors.append(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                "character"
            )
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _MAX_NAME_PART:
        errors.append(f"name part must be no more than {_MAX_NAME_PART} characters")
    if name and not _QUALIFIED_NAME.fullmatch(name):
        errors.append(f"name part must {_NAME_CHARS}")
    return errors


def _label_value_errors(value: str) -> list[str]:
    """k8s.io/apimachinery/pkg/util/validation.IsValidLabelValue."""
    errors = []
    if len(value) > _MAX_LABEL_VALUE:
        errors.append(f"must be no more than {_MAX_LABEL_VALUE} characters")
    if not _LABEL_VALUE.fullmatch(value):
        errors.append(f"a valid label must be an empty string or {_NAME_CHARS}")
    return errors


def _check_key(key: str) -> None:
    if errors := _qualified_name_errors(key):
        raise _Invalid(f'invalid label key "{key}": {"; ".join(errors)}')


def _parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None where Go would return an error."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


class _Invalid(Exception):
    """Internal: why a selector is invalid, before the selector text is attached."""


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


# ---- the label selector lexer and parser (labels.Lexer / labels.Parser)

_TOKEN_ID: Final = "identifier"
_TOKEN_END: Final = "end of string"
_SYMBOLS: Final = frozenset({"!", "!=", "(", ")", ",", "=", "==", ">", "<"})
_SPECIAL_CHARS: Final = frozenset("=!(),><")
_WHITESPACE: Final = frozenset(" \t\r\n")
_OPERATOR_TOKENS: Final[Mapping[str, Operator]] = {
    "in": Operator.IN,
    "notin": Operator.NOT_IN,
    "=": Operator.EQUALS,
    "==": Operator.DOUBLE_EQUALS,
    "!=": Operator.NOT_EQUALS,
    ">": Operator.GREATER_THAN,
    "<": Operator.LESS_THAN,
}
_BINARY_OPERATORS: Final = "in, notin, =, ==, !=, gt, lt"

_Token = tuple[str, str]  # (kind, literal); kind is a symbol itself, _TOKEN_ID or _TOKEN_END


def _lex(text: str) -> list[_Token]:
    """Tokens of a label selector. `in`/`notin` stay identifiers: only the parser knows whether
    it expects an operator or a value there (`x in (in)` is valid)."""
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append((_TOKEN_END, ""))
            return tokens
        if text[i] in _SPECIAL_CHARS:
            # Longest symbol first, as Go's scanSpecialSymbol does ("!=" before "!").
            symbol = text[i : i + 2] if text[i : i + 2] in _SYMBOLS else text[i]
            tokens.append((symbol, symbol))
            i += len(symbol)
            continue
        start = i
        while i < n and text[i] not in _SPECIAL_CHARS and text[i] not in _WHITESPACE:
            i += 1
        tokens.append((_TOKEN_ID, text[start:i]))


class _LabelParser:
    __slots__ = ("_position", "_tokens")

    def __init__(self, text: str) -> None:
        self._tokens = _lex(text)
        self._position = 0

    def _peek(self) -> _Token:
        return self._tokens[self._position]

    def _take(self) -> _Token:
        token = self._tokens[self._position]
        self._position += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            kind, literal = self._peek()
            if kind == _TOKEN_END:
                return requirements
            if kind not in (_TOKEN_ID, "!"):
                raise _Invalid(f"found '{literal}', expected: !, identifier, or 'end of string'")
            requirements.append(self._requirement())
            kind, literal = self._take()
            if kind == _TOKEN_END:
                return requirements
            if kind != ",":
                raise _Invalid(f"found '{literal}', expected: ',' or 'end of string'")
            next_kind, next_literal = self._peek()
            if next_kind not in (_TOKEN_ID, "!"):
                raise _Invalid(f"found '{next_literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        negated = self._peek()[0] == "!"
        if negated:
            self._take()
        kind, key = self._take()
        if kind != _TOKEN_ID:
            raise _Invalid(f"found '{key}', expected: identifier")
        _check_key(key)
        if negated:
            return Requirement.new(key, Operator.DOES_NOT_EXIST)
        if self._peek()[0] in (_TOKEN_END, ","):
            return Requirement.new(key, Operator.EXISTS)
        operator = self._operator()
        if operator in (Operator.IN, Operator.NOT_IN):
            return Requirement.new(key, operator, self._value_set())
        return Requirement.new(key, operator, (self._exact_value(),))

    def _operator(self) -> Operator:
        _, literal = self._take()
        operator = _OPERATOR_TOKENS.get(literal)
        if operator is None:
            raise _Invalid(f"found '{literal}', expected: {_BINARY_OPERATORS}")
        return operator

    def _exact_value(self) -> str:
        # `key=` (nothing before the next comma or the end) means the empty value.
        if self._peek()[0] in (_TOKEN_END, ","):
            return ""
        kind, literal = self._take()
        if kind != _TOKEN_ID:
            raise _Invalid(f"found '{literal}', expected: identifier")
        return literal

    def _value_set(self) -> set[str]:
        kind, literal = self._take()
        if kind != "(":
            raise _Invalid(f"found '{literal}' expected: '('")
        kind, literal = self._peek()
        if kind == ")":
            # Go reads "()" as the set holding the empty string.
            self._take()
            return {""}
        if kind not in (_TOKEN_ID, ","):
            raise _Invalid(f"found '{literal}', expected: ',', ')' or identifier")
        values = self._identifiers()
        kind, literal = self._take()
        if kind != ")":
            raise _Invalid(f"found '{literal}', expected: ')'")
        return values

    def _identifiers(self) -> set[str]:
        """Comma-separated, possibly empty values up to (not including) the ')'.

        Empty entries (`(a,)`, `(,a)`, `(a,,b)`) stand for the empty string, as in Go.
        """
        values: set[str] = set()
        while True:
            kind, literal = self._take()
            if kind == _TOKEN_ID:
                values.add(literal)
                next_kind, next_literal = self._peek()
                if next_kind == ")":
                    return values
                if next_kind != ",":
                    raise _Invalid(f"found '{next_literal}', expected: ',' or ')'")
            elif kind == ",":
                if not values:
                    values.add("")
                next_kind = self._peek()[0]
                if next_kind == ")":
                    values.add("")
                    return values
                if next_kind == ",":
                    self._take()
                    values.add("")
            else:
                raise _Invalid(f"found '{literal}', expected: ',', or identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """labels.Parse: the `labelSelector` query parameter. An empty text selects everything."""
    try:
        return LabelSelector(_LabelParser(text).parse())
    except _Invalid as exc:
        raise SelectorError(f'unable to parse label selector "{text}": {exc}') from None


_STRUCTURED_OPERATORS: Final[Mapping[str, Operator]] = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def label_selector_from_dict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """metav1.LabelSelectorAsSelector: `{matchLabels: {...}, matchExpressions: [...]}`.

    None (a nil selector) matches nothing; an empty selector matches everything.
    """
    if selector is None:
        return LabelSelector.nothing()
    try:
        return LabelSelector(_structured_requirements(selector))
    except _Invalid as exc:
        raise SelectorError(f"invalid label selector {selector!r}: {exc}") from None


def _structured_requirements(selector: Mapping[str, Any]) -> list[Requirement]:
    if not isinstance(selector, Mapping):
        raise _Invalid("a label selector must be an object")
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise _Invalid("matchLabels must be an object and matchExpressions a list")
    requirements = [
        Requirement.new(_string(k), Operator.EQUALS, (_string(v),)) for k, v in match_labels.items()
    ]
    for expression in expressions:
        if not isinstance(expression, Mapping):
            raise _Invalid(f"a match expression must be an object, got {expression!r}")
        name = expression.get("operator")
        operator = _STRUCTURED_OPERATORS.get(name) if isinstance(name, str) else None
        if operator is None:
            raise _Invalid(f'"{name}" is not a valid label selector operator')
        values = expression.get("values") or []
        if not isinstance(values, list):
            raise _Invalid(f"values must be a list, got {values!r}")
        key = _string(expression.get("key"))
        requirements.append(Requirement.new(key, operator, [_string(v) for v in values]))
    return requirements


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"expected a string, got {value!r}")
    return value


def label_selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """labels.SelectorFromSet: every label must equal the given value (a Service's selector).

    Not validated, as in Go; None or {} matches everything.
    """
    return LabelSelector(Requirement(k, Operator.EQUALS, (v,)) for k, v in (labels or {}).items())


# --------------------------------------------------------------------------- field selectors


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One term of a field selector: `field=value` (or `==`), or `field!=value`."""

    field: str
    operator: Operator  # EQUALS, DOUBLE_EQUALS or NOT_EQUALS
    value: str

    def __str__(self) -> str:
        return f"{self.field}{self.operator.value}{_escape_field_value(self.value)}"


class FieldSelector:
    """A parsed field selector: the AND of its terms. No terms matches all."""

    __slots__ = ("_equal", "_fields", "_not_equal", "requirements")

    def __init__(self, requirements: Iterable[FieldRequirement] = ()) -> None:
        self.requirements: tuple[FieldRequirement, ...] = tuple(requirements)
        self._equal = tuple(
            (r.field, r.value) for r in self.requirements if r.operator is not Operator.NOT_EQUALS
        )
        self._not_equal = tuple(
            (r.field, r.value) for r in self.requirements if r.operator is Operator.NOT_EQUALS
        )
        self._fields = frozenset(r.field for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def fields(self) -> set[str]:
        """The field names used, for the server to reject the ones its kind does not support."""
        return set(self._fields)

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Match against an object's selectable fields; a field not given counts as ""."""
        get = fields.get
        for name, value in self._equal:
            if get(name, "") != value:
                return False
        for name, value in self._not_equal:  # noqa: SIM110 -- hot path, see LabelSelector
            if get(name, "") == value:
                return False
        return True

    def requires_exact_match(self, field: str) -> str | None:
        """The value `field` must equal, if a term pins it (e.g. `spec.nodeName=node-1`)."""
        for name, value in self._equal:
            if name == field:
                return value
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"


# Go checks "!=" and "==" before "=" at each position, so `a==b` is not `a` = `=b`.
_FIELD_OPERATORS: Final = (
    ("!=", Operator.NOT_EQUALS),
    ("==", Operator.DOUBLE_EQUALS),
    ("=", Operator.EQUALS),
)


def parse_field_selector(text: str) -> FieldSelector:
    """fields.ParseSelector: the `fieldSelector` query parameter.

    Terms are separated by unescaped commas; a value may escape `\\`, `,` and `=` with a
    backslash. Nothing is trimmed: whitespace belongs to the field name or value, as in Go.
    """
    requirements = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        try:
            requirement = _split_term(term)
        except _Invalid as exc:
            raise SelectorError(f"invalid field selector '{text}': {exc}") from None
        if requirement is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        requirements.append(requirement)
    return FieldSelector(requirements)


def _split_terms(text: str) -> list[str]:
    """Split on commas not escaped by a backslash (escapes stay in the terms)."""
    if not text:
        return []
    terms: list[str] = []
    start = 0
    escaped = False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> FieldRequirement | None:
    """The first operator occurrence splits the term; the field name has no escapes."""
    for index in range(len(term)):
        for symbol, operator in _FIELD_OPERATORS:
            if term.startswith(symbol, index):
                value = _unescape_field_value(term[index + len(symbol) :])
                return FieldRequirement(term[:index], operator, value)
    return None


def _unescape_field_value(raw: str) -> str:
    r"""fields.UnescapeValue: `\\`, `\,` and `\=` are the only escapes; bare `,` or `=` fail."""
    if not any(c in raw for c in "\\,="):
        return raw
    out: list[str] = []
    escaped = False
    for char in raw:
        if escaped:
            if char not in "\\,=":
                raise _Invalid(f"invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise _Invalid(f"unescaped character in value: {char}")
        else:
            out.append(char)
    if escaped:
        raise _Invalid("invalid escape sequence: \\")
    return "".join(out)


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
