"""Admitted gangs none of whose members reached vulcan's filter, and enqueued gangs whose pods
were never made (issue 48, item 4).

kube-scheduler refuses a pod before it asks the extender when one of its own checks fails (an
unbound PersistentVolumeClaim, a volume it cannot attach, a host port in use on every node):
vulcan never hears of it, and a gang whose members never come would hold its reservation (and
its queue's room) for ever. `ReachWatch` times each admission from when its members are let
go; a gang none of whose members reached filter within `timeout`, one of which kube-scheduler
turned away with words that are not vulcan's (`turned_away`), loses its admission and backs
off (doubling, like kube-scheduler's pod backoff, from `backoff` up to `max_backoff`, reset
once a member reaches filter); the scheduler applies `expired`: the reservation released, a
Warning event, the PodGroup's condition saying why (the pass reads the backoff's words).

Any PodGroup is enqueued on its minResources before its pods exist (Volcano's enqueue): its
pods are made once it is Inqueue (by a Volcano Job's controller, an operator, a user). One whose
members are still not all made `timeout` after the pass first found it so (a gang evicted whole
whose PodGroup stays, a job whose pods cannot be made) would hold its queue's room for nobody:
it backs off the same way, and the pass sends it back to Pending for the backoff
(`plugins.actions.allocate`). A group of no controller whose pods vulcan evicted whole has
nothing to make them again: it backs off until one of its pods exists (`emptied`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from core.records import PodGroupRecord, PodRecord
from core.refusal_words import vulcan_refused
from extender.ledger import GangLedger
from extender.slots import SlotWatch
from plugins.framework.decisions import Decision, Waiting

__all__ = [
    "MEMBERS_NOT_MADE",
    "MEMBERS_NOT_REACHED",
    "NOT_REACHED",
    "Expiry",
    "ReachWatch",
    "turned_away",
]

NOT_REACHED = "members_not_reached"  # the bind result of held binds it ends (none, usually)
MEMBERS_NOT_REACHED = "MembersNotReached"  # the Warning events' reasons
MEMBERS_NOT_MADE = "MembersNotMade"


def turned_away(key: str, members: Iterable[PodRecord]) -> bool:
    """Whether kube-scheduler turned a pending member of gang `key` away without asking the
    extender: its last refusal does not name the gang, as every refusal of vulcan's does. A
    member it has not tried since (no refusal, still gated, vulcan's own words) proves nothing:
    it waits in kube-scheduler's queue, which is slow to reach it when many pods wait."""
    return any(
        pod.node is None
        and not pod.terminal
        and not pod.deleting
        and pod.refusal
        and not vulcan_refused(pod.refusal, key)
        for pod in members
    )


@dataclass(slots=True)
class _Unmade:
    first: float  # when it was first found short (its order among the gangs short)
    since: float  # its clock: from then, or from the last time pods were made
    made: int  # how many of its pods existed then


@dataclass(frozen=True, slots=True)
class Expiry:
    key: str
    reason: str  # MEMBERS_NOT_REACHED: loses its admission; MEMBERS_NOT_MADE: its enqueue
    why: str


class ReachWatch:
    def __init__(
        self,
        timeout: float,
        backoff: float = 10.0,
        max_backoff: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout  # <= 0: never expires
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._clock = clock
        self._since: dict[str, float] = {}  # admitted gang -> when its members were let go
        self._strikes: dict[str, int] = {}  # gang -> admissions in a row that expired
        self._backoffs: dict[str, tuple[str, float]] = {}  # gang -> (why, until: wall clock)
        self._unmade: dict[str, _Unmade] = {}  # enqueued gang -> how long its pods are short
        self._unmade_strikes: dict[str, int] = {}
        self._emptied: dict[str, str] = {}  # gang of no controller evicted whole -> why

    def admitted(self, key: str) -> None:
        """Gang `key` was admitted: its members go to kube-scheduler now."""
        if self.timeout > 0:
            self._since[key] = self._clock()

    def reached(self, key: str) -> None:
        """A member of admitted gang `key` reached filter: kube-scheduler does ask vulcan."""
        if self._since.pop(key, None) is not None:
            self._strikes.pop(key, None)

    def restart(self, key: str) -> None:
        """Its members are not let go yet (pipelined onto room being freed): timed from now."""
        if key in self._since:
            self._since[key] = self._clock()

    def forget(self, key: str, *, deleted: bool = False) -> None:
        """The gang is no longer admitted (a deleted one's backoff and strikes go too)."""
        self._since.pop(key, None)
        if deleted:
            self._strikes.pop(key, None)
            self._backoffs.pop(key, None)
            self._unmade.pop(key, None)
            self._unmade_strikes.pop(key, None)
            self._emptied.pop(key, None)

    def emptied(self, key: str, why: str) -> None:
        """Vulcan evicted the pods of gang `key`, a group no controller owns, whole (`why`):
        nothing will make them again, so it is not enqueued until one of them exists
        (enqueued on its minResources, it would hold its queue's room for nobody)."""
        self._emptied[key] = (
            f"gang {key}: its pods were evicted ({why}) and no controller owns its PodGroup to "
            "make them again; it is enqueued again once one of its pods is created"
        )

    def refilled(
        self,
        groups: Mapping[str, PodGroupRecord],
        members: Callable[[str], Iterable[PodRecord]],
    ) -> None:
        """Gangs evicted whole that have a pod again (or are gone) may be enqueued again."""
        for key in list(self._emptied):
            if key not in groups or any(not pod.deleting for pod in members(key)):
                del self._emptied[key]

    # ------------------------------------------------------------------ pods never made

    def expiries(
        self,
        groups: Mapping[str, PodGroupRecord],
        admitted: Collection[str],
        ledger: GangLedger,
        slots: SlotWatch,
        members: Callable[[str], Iterable[PodRecord]],
    ) -> list[Expiry]:
        """What expired since the last pass: admissions whose members never reached filter,
        enqueued gangs whose pods were never made (`members`: a gang's pods). Gangs evicted
        whole that have a pod again are let go (`refilled`)."""
        self.refilled(groups, members)
        found = [
            Expiry(key, MEMBERS_NOT_REACHED, why)
            for key, why in self.expired(admitted, ledger, slots, members)
        ]
        for key in self.unmade_due():
            group = groups.get(key)
            if group is None or group.phase != "Inqueue":
                self.made(key)
            else:
                found.append(Expiry(key, MEMBERS_NOT_MADE, self.expire_unmade(key, group.queue)))
        return found

    def observe(
        self,
        decision: Decision,
        group: PodGroupRecord | None,
        members: Callable[[str], Iterable[PodRecord]] = lambda key: (),
    ) -> None:
        """A pass's decision for a gang (`members`: a gang's pods): an enqueued gang whose pods
        are short is timed until they are made or it is no longer enqueued, whatever refused it
        (a queue's hold does not restart the clock). Its backoff's strikes are kept until it is
        seen with its pods made: enqueued again after each backoff, a group whose pods never
        come backs off longer each time."""
        key = decision.key
        short = False
        if isinstance(decision, Waiting):
            short = decision.unmade or (
                key in self._unmade
                and group is not None
                and sum(not pod.deleting for pod in members(key)) < group.min_member
            )
        if not short:
            self.made(key)
        elif group is not None and group.phase == "Inqueue" and not decision.dequeue:
            self.unmade(key, sum(not pod.deleting for pod in members(key)))
        else:
            self._unmade.pop(key, None)

    def unmade(self, key: str, made: int = 0) -> None:
        """Enqueued gang `key` waits for its pods to be made (`made` of them exist): timed from
        the first time. More of them made since restarts its clock, and the clocks of the gangs
        found short after it: their controller, busy making its pods, may not have come to
        theirs yet (a hundred Jobs submitted at once are made a few at a time, in turn)."""
        if self.timeout <= 0:
            return
        now = self._clock()
        unmade = self._unmade.get(key)
        if unmade is None:
            self._unmade[key] = _Unmade(now, now, made)
        elif made > unmade.made:
            unmade.made = made
            for later in self._unmade.values():
                if later.first >= unmade.first:
                    later.since = now

    def made(self, key: str) -> None:
        """Gang `key` no longer waits for its pods (made, or no longer enqueued)."""
        if self._unmade.pop(key, None) is not None and key not in self._backoffs:
            self._unmade_strikes.pop(key, None)

    def unmade_due(self) -> list[str]:
        """The enqueued gangs whose pods were not all made within `timeout`."""
        if not self._unmade:
            return []
        now = self._clock()
        return sorted(k for k, u in self._unmade.items() if now - u.since >= self.timeout)

    def expire_unmade(self, key: str, queue: str) -> str:
        """Gang `key` gives its queue's room back: why (for its event), its backoff begun."""
        self._unmade.pop(key, None)
        return self._back_off(
            key,
            self._unmade_strikes,
            f"gang {key}: its pods were not all made within {self.timeout:g}s of its enqueue "
            f"(minMember counts pods that do not exist); the room it held in queue {queue} is "
            "released, and it may be enqueued again after {until}",
        )

    def due(self) -> list[str]:
        """The admitted gangs none of whose members reached filter within `timeout`."""
        if not self._since:
            return []
        now = self._clock()
        return sorted(k for k, since in self._since.items() if now - since >= self.timeout)

    def expired(
        self,
        admitted: Collection[str],
        ledger: GangLedger,
        slots: SlotWatch,
        members: Callable[[str], Iterable[PodRecord]],
    ) -> list[tuple[str, str]]:
        """The admitted gangs holding room whose members never came and were turned away,
        each with why: each loses its admission (`expire`). A gang placed, or whose room went
        otherwise, is no longer watched; one pipelined onto room being freed, or whose members
        kube-scheduler has not tried yet, is timed again."""
        found = []
        for key in self.due():
            if key not in admitted or not ledger.of_group(key):
                self.forget(key)
            elif slots.waiting_members(key) or not turned_away(key, members(key)):
                self.restart(key)  # let go once the room is free; or not tried yet
            else:
                found.append((key, self.expire(key)))
        return found

    def expire(self, key: str) -> str:
        """Gang `key` loses its admission: why (for its event), its backoff begun."""
        self._since.pop(key, None)
        return self._back_off(
            key,
            self._strikes,
            f"gang {key}: none of its members reached vulcan's filter within {self.timeout:g}s "
            "of its admission: kube-scheduler refused them before asking the extender (e.g. an "
            "unbound PersistentVolumeClaim; `kubectl describe pod` says why); its room is "
            "released, and it may be admitted again after {until}",
        )

    def _back_off(self, key: str, strikes: dict[str, int], words: str) -> str:
        """Gang `key` backs off (doubling with each strike in a row); `words` with `{until}`."""
        count = strikes[key] = strikes.get(key, 0) + 1
        wait = min(self.max_backoff, self.backoff * 2 ** (count - 1))
        until = datetime.now(UTC) + timedelta(seconds=wait)
        why = words.replace("{until}", until.strftime("%H:%M:%SZ"))
        self._backoffs[key] = (why, time.time() + wait)
        return why

    def backoffs(self) -> dict[str, tuple[str, float]]:
        """gang -> (why, until when on the wall clock) for every gang backing off now (a gang
        evicted whole until one of its pods exists: `math.inf`)."""
        found = {key: (why, math.inf) for key, why in self._emptied.items()}
        if not self._backoffs:
            return found
        now = time.time()
        for key in [k for k, (_, until) in self._backoffs.items() if until <= now]:
            del self._backoffs[key]
        return {**self._backoffs, **found}
