"""Field selectors (k8s.io/apimachinery/pkg/fields/selector.go, `ParseSelector`): the
`fieldSelector` query parameter's terms, parsed and matched against an object's selectable fields.

Separate from label selectors: a different grammar (escaped values, only `=`, `==` and `!=`) and
different inputs (the selectable fields a kind supports, not its labels).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from sim.apiserver.selector_base import Operator, SelectorError, _Invalid

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
