"""Building a `LabelSelector` from the forms the API carries one in: the `labelSelector` query
parameter's text (labels.Lexer / labels.Parser), metav1's structured
`{matchLabels, matchExpressions}` form, and a plain map (Service and ReplicationController
selectors).

Separate from `sim.apiserver.selector_labels`, the selector and its matching: parsing runs once per
request, matching on the hot path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sim.apiserver.selector_base import Operator, SelectorError, _check_key, _Invalid
from sim.apiserver.selector_labels import LabelSelector, Requirement

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
