"""Runs the scheduling session of one pass (`plugins.framework.run.run_pass`) with the memo as
`--scheduler-memo` says: `on` (a pass costs what changed), `off` (everything decided afresh
every pass), or `check` (both, every pass, compared: a difference is a memo bug, logged, counted
in `vulcan_scheduler_memo_divergences_total`, kept for the debug view, and the pass without the
memo is the one applied, the memo starting over). The accounting invariants a pass's bookings
broke (`plugins.framework.books_check`: any is a bug) are logged, counted in
`vulcan_accounting_breaches_total` and kept for the debug view too."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from plugins.framework.books_check import Breach
from plugins.framework.decisions import Decision, Grown
from plugins.framework.memo import Memo
from plugins.framework.pass_input import PassInput
from plugins.framework.policy import Policy
from plugins.framework.run import run_pass
from plugins.framework.session import PassResult

log = logging.getLogger("vulcan.extender.memo")

MEMO_MODES = ("on", "off", "check")

__all__ = ["MEMO_MODES", "Divergence", "PassRunner"]


@dataclass(frozen=True, slots=True)
class Divergence:
    """A gang the memo decided otherwise than a pass without it."""

    group: str
    with_memo: tuple[Any, ...] | None
    without: tuple[Any, ...] | None

    def describe(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "withMemo": _words(self.with_memo),
            "without": _words(self.without),
        }


@dataclass(slots=True)
class PassRunner:
    mode: str = "on"
    memo: Memo = field(default_factory=Memo)
    divergences: deque[Divergence] = field(default_factory=lambda: deque(maxlen=100))
    divergence_count: int = 0
    counter: Counter | None = None
    breaches: deque[Breach] = field(default_factory=lambda: deque(maxlen=100))
    breach_count: int = 0
    breach_counter: Counter | None = None

    def forget(self) -> None:
        """A new conf: nothing the memo kept holds."""
        self.memo.forget()

    def run(self, given: PassInput, policy: Policy, changed: set[str]) -> PassResult:
        """The pass's result: its decisions to apply (with the memo: only those taken, not
        those kept)."""
        result = self._run(given, policy, changed)
        if result.breaches:
            self._breached(result.breaches)
        return result

    def _breached(self, found: list[Breach]) -> None:
        self.breach_count += len(found)
        for breach in found:
            self.breaches.append(breach)
            if self.breach_counter is not None:
                self.breach_counter.labels(kind=breach.kind).inc()
            log.error("scheduling invariant broken: %s", breach.describe())

    def _run(self, given: PassInput, policy: Policy, changed: set[str]) -> PassResult:
        if self.mode == "off":
            return run_pass(given, policy)
        if self.mode == "on":
            idle = self.memo.idle(given, changed)
            if idle is not None:
                return idle
        self.memo.changed(changed)
        result = run_pass(given, policy, self.memo)
        self.memo.closed(given, result)
        if self.mode != "check":
            return result
        fresh = run_pass(given, policy)
        with_memo = self.memo.table()
        with_memo.update(_table(result.decisions))
        found = self._compare(with_memo, _table(fresh.decisions))
        if not found:
            return result
        self.divergence_count += len(found)
        if self.counter is not None:
            self.counter.inc(len(found))
        for divergence in found:
            self.divergences.append(divergence)
            log.error("scheduler memo diverged: %s", divergence.describe())
        self.memo.forget()
        return fresh

    @staticmethod
    def _compare(with_memo: _Table, without: _Table) -> list[Divergence]:
        found = []
        for key in sorted(with_memo.keys() | without.keys()):
            a, b = with_memo.get(key), without.get(key)
            if a != b:
                found.append(Divergence(key[0], a, b))
        return found


_Table = dict[tuple[str, str], tuple[Any, ...]]


def _table(decisions: list[Decision]) -> _Table:
    """Each gang's decision of the pass (and the member backfill grew for it)."""
    return {(d.key, "grow" if isinstance(d, Grown) else "gang"): d.summary() for d in decisions}


def _words(summary: tuple[Any, ...] | None) -> list[str] | None:
    return [str(part) for part in summary] if summary is not None else None
