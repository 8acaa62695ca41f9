"""Go's `strconv.ParseBool`, the one boolean parser for every value Volcano and Kubernetes read
as a Go bool (annotations, labels, plugin flags): `1 t T TRUE true True` and `0 f F FALSE false
False`; anything else is not a boolean."""

from __future__ import annotations

from collections.abc import Mapping

from core.api import keys

TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
PREEMPTABLE = keys.PREEMPTABLE


def parse_bool(text: str | None) -> bool | None:
    """True / False as Go's ParseBool reads `text`; None when it would return an error."""
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    return None


def bool_or(text: str | None, default: bool) -> bool:
    """`text` as a Go bool, `default` when absent or unreadable (a Go flag left unset)."""
    value = parse_bool(text)
    return default if value is None else value


def preemptable_flag(
    annotations: Mapping[str, str] | None, labels: Mapping[str, str] | None
) -> bool:
    """A pod's `volcano.sh/preemptable`: the annotation first, then the label, default True.
    A value ParseBool refuses counts as False: a pod whose owner tried to say something we
    cannot read is not evicted."""
    for source in (annotations, labels):
        if source and PREEMPTABLE in source:
            return parse_bool(source[PREEMPTABLE]) is True
    return True
