"""Elastic members of admitted gangs (beyond the gang's minimum) as the extender tracks them:
those filter refused (their queue at its share or capability, or no room), which the session's
backfill gives a slot one at a time (`plugins.actions.backfill`), and those holding the slot a
session gave them. A slot that no longer fits and is not being freed (another pod took the room
while its victims left) is given up before the next pass, and its member waits again: placed
anew then, instead of waiting for ever on room that never comes back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from core.cache import Snapshot
from extender.ledger import GangLedger
from extender.slots import SlotWatch

__all__ = ["ElasticMembers"]


class ElasticMembers:
    def __init__(self, ledger: GangLedger, slots: SlotWatch) -> None:
        self.ledger = ledger
        self.slots = slots
        self.waiting: dict[str, set[str]] = {}  # gang -> members waiting for a slot
        self.placed: dict[str, set[str]] = {}  # gang -> members holding a session's slot

    def wait(self, group: str, pods: Iterable[str]) -> None:
        self.waiting.setdefault(group, set()).update(pods)

    def grown(self, group: str, pod: str) -> None:
        waiting = self.waiting.get(group)
        if waiting is not None:
            waiting.discard(pod)
            if not waiting:
                del self.waiting[group]
        self.placed.setdefault(group, set()).add(pod)

    def forget(self, group: str) -> None:
        self.waiting.pop(group, None)
        self.placed.pop(group, None)

    def before_pass(
        self, snapshot: Snapshot, admitted: Iterable[str]
    ) -> Mapping[str, frozenset[str]]:
        """Tidy up before a pass: lost slots given up (the module docstring), members that
        are placed, gone or hold a slot, and gangs no longer admitted, no longer waiting.
        What remains waits for a slot (the session's facts)."""
        self._take_back_lost_slots(snapshot)
        admitted = set(admitted)
        for key in list(self.waiting):
            if key not in snapshot.podgroups or key not in admitted:
                del self.waiting[key]
                continue
            members = self.waiting[key]
            for pod_key in list(members):
                pod = snapshot.pods.get(pod_key)
                if (
                    pod is None
                    or pod.node is not None
                    or pod.terminal
                    or pod.deleting
                    or self.ledger.reservation_of(pod_key) is not None
                ):
                    members.discard(pod_key)
            if not members:
                del self.waiting[key]
        return {key: frozenset(members) for key, members in self.waiting.items()}

    def _take_back_lost_slots(self, snapshot: Snapshot) -> None:
        for key, members in list(self.placed.items()):
            for pod_key in list(members):
                pod = snapshot.pods.get(pod_key)
                reservation = self.ledger.reservation_of(pod_key)
                if pod is None or pod.node is not None or pod.terminal or reservation is None:
                    members.discard(pod_key)
                    continue
                if self.slots.fits(pod_key, reservation.node, reservation.request):
                    continue
                if self.slots.blockers(pod_key, group=key) is not None:
                    continue  # its victims are still leaving: the room comes
                self.ledger.release(pod_key)
                members.discard(pod_key)
                self.waiting.setdefault(key, set()).add(pod_key)
            if not members:
                del self.placed[key]
