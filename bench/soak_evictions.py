"""The soak's `needless-eviction` invariant (issue 48, item 2): a gang that evicted others must
be bound whole within `Limits.eviction_paid_within` seconds of the last of its victims leaving
(its room freed); otherwise the eviction did not pay.

The victims and the gang they were evicted for come from vulcan's Pod events ("preempted
(whole) by gang ns/g of priority 5: ...", "reclaimed (whole) by queue q for gang ns/g: ..."),
dated when they happened (they may arrive late). The clock starts only once every victim of
the gang is gone (a victim held terminating by a node that is down frees nothing); a gang one
of whose members bound after the eviction (or `LANDING_SLACK` before it was seen) used the room
(even if it lost it again since), and a gang deleted, finished (its PodGroup Completed), or
whose job is torn down or finished, owes nothing.

Pure: no I/O, time passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.soak_checker import Checker

NEEDLESS_EVICTION = "needless-eviction"
# How long before its victims' eviction is seen a gang's bind still counts as using the room:
# the decision evicts and places together, and on a real API server the gang's Bindings (a
# queue's room, on nodes with room) may land before the Eviction calls return (real soak seed
# 20261126: bound 0.1 s after the decision, the eviction seen 0.2 s later).
LANDING_SLACK = 2.0

# The gang a victim was evicted for, as `extender.evictor` words the victim's event.
_FOR_GANG = re.compile(
    r"^(?:preempted \([^)]*\) by gang|reclaimed \([^)]*\) by queue \S+ for gang) ([^\s:]+)"
)


def evicted_for(note: str) -> str | None:
    """The gang (namespace/podgroup) a victim's eviction event names, or None."""
    match = _FOR_GANG.match(note)
    return match.group(1) if match else None


@dataclass(slots=True)
class Debt:
    since: float  # the first eviction
    victims: set[str] = field(default_factory=set)  # victims not gone yet
    freed: float | None = None  # when the last one went
    names: list[str] = field(default_factory=list)  # every victim, for the report


@dataclass
class EvictionLedger:
    debts: dict[str, Debt] = field(default_factory=dict)  # gang -> what it owes
    _victim_of: dict[str, str] = field(default_factory=dict)  # victim pod -> gang

    def evicted(self, victim: str, gang: str, when: float, gone: float | None) -> None:
        """Pod `victim` was evicted for `gang` at `when`; `gone`: when the pod went (None: it
        is still there)."""
        debt = self.debts.setdefault(gang, Debt(since=when))
        debt.since = min(debt.since, when)
        if victim not in debt.names:
            debt.names.append(victim)
        if gone is None:
            debt.victims.add(victim)
            self._victim_of[victim] = gang
            debt.freed = None
        elif not debt.victims:
            debt.freed = max(debt.freed or gone, gone)

    def gone(self, pod: str, now: float) -> None:
        gang = self._victim_of.pop(pod, None)
        debt = self.debts.get(gang) if gang is not None else None
        if debt is None:
            return
        debt.victims.discard(pod)
        if not debt.victims:
            debt.freed = now

    def check(self, checker: Checker, now: float) -> None:
        """Settles the debts of gangs bound whole (or gone) and reports the overdue ones."""
        limit = checker.limits.eviction_paid_within
        for gang, debt in list(self.debts.items()):
            group = checker.groups.get(gang)
            job = checker.jobs.get(group.job) if group is not None and group.job else None
            if (
                group is None
                or group.phase == "Completed"  # it ran: the room was used
                or (job is not None and job.phase not in ("", "Pending", "Running"))
                or checker.bound(gang) >= group.min_member
                or checker.last_bind.get(gang, float("-inf")) >= debt.since - LANDING_SLACK
            ):
                self._settle(gang)
                continue
            if debt.freed is None or now - debt.freed <= limit:
                continue
            checker.record_now(
                NEEDLESS_EVICTION,
                gang,
                debt.freed,
                now,
                f"evicted {', '.join(debt.names)} for it; not bound whole "
                f"{now - debt.freed:.1f}s after they were gone "
                f"({checker.bound(gang)}/{group.min_member} live bound, PodGroup phase "
                f"{group.phase or '-'}: {group.message or 'no condition'}); "
                f"history: {checker.story(gang, group.job)}",
            )
            self._settle(gang)

    def _settle(self, gang: str) -> None:
        debt = self.debts.pop(gang, None)
        if debt is not None:
            for victim in debt.victims:
                self._victim_of.pop(victim, None)
