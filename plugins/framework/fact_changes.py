"""Which gangs' own facts moved since the last pass (`FactChanges`), told from the extender's
facts themselves: what is admitted, what each gang holds in the ledger, its backoff and its
promise. With the cache's changed groups (a group's version moves with every change of it or its
pods) these name every gang whose facts (`plugins.framework.memo.Memo.facts`) may differ from
the last pass, so the memo need not read the others' again. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plugins.framework.pass_input import ExtenderFacts

__all__ = ["FactChanges"]


class FactChanges:
    def __init__(self) -> None:
        self._last: tuple[frozenset[str], dict[str, Any], dict[str, Any], dict[str, Any]] | None
        self._last = None

    def moved(self, facts: ExtenderFacts) -> set[str] | None:
        """The gangs whose facts moved since the last call; None on the first (any may have)."""
        ledger = facts.ledger
        now = (
            frozenset(facts.admitted),
            dict(facts.backoff),
            dict(facts.promised),
            dict(ledger.by_group()) if ledger is not None else {},
        )
        last, self._last = self._last, now
        if last is None:
            return None
        moved = set(last[0] ^ now[0])
        moved |= _differing(last[1], now[1])
        moved |= _differing(last[2], now[2])
        moved |= _differing(last[3], now[3])
        return moved


def _differing(before: Mapping[str, Any], after: Mapping[str, Any]) -> set[str]:
    if before == after:
        return set()
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
