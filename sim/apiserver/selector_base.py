"""The vocabulary label and field selectors share: the error the API server answers with, the
selection operators, and apimachinery's validation of label keys and values.

Separate from `sim.apiserver.selector_labels` (the label selector and its matching),
`sim.apiserver.selector_label_parsing` (building one from text or a structured selector) and
`sim.apiserver.selector_fields` (field selectors), which all build on it; `sim.apiserver.selectors`
is their front.
"""

from __future__ import annotations

import enum
import re


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
