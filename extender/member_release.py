"""Lets admitted gang members go to kube-scheduler (`MemberRelease`): the writes that move
a member kube-scheduler parked back into its active queue, the events that say a gang was
admitted, and the members parked until their room is free (pipelined onto victims' room)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from core.api import keys
from core.cache import ClusterCache
from core.kube.events import NORMAL
from core.records import PodRecord
from extender.gang_writer import GangWriter
from extender.slots import SlotWatch
from plugins.model.gang import GangView


def stamp() -> str:
    """The admission stamp's value: the time, to the microsecond so that a second stamp in
    the same second still changes the pod (an unchanged annotation is no update at all)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class MemberRelease:
    def __init__(
        self,
        cache: ClusterCache,
        slots: SlotWatch,
        writer: GangWriter,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        *,
        writes: bool,
    ) -> None:
        self.cache = cache
        self.slots = slots
        self.writer = writer
        self._spawn = spawn
        self._writes = writes  # False without an API client (tests of decisions only)
        # group -> its members the filter refused before the group was admitted:
        # kube-scheduler parked them as unschedulable, and only an update of the pod (the
        # admission stamp) brings them back at once.
        self.refused: dict[str, set[str]] = {}
        # member -> the resourceVersion its admission write (the stamp, the gate lifted) was
        # made for: one write per version; dropped when the pod changes or goes, or the write
        # failed.
        self._lifting: dict[str, str] = {}

    def release_due(self, admitted: set[str]) -> None:
        """Admitted members kube-scheduler parked (this filter refused them) whose slot is
        free now go back to its active queue: one pod update each (the admission stamp, new
        time), as on admission. Runs at the start of every pass, and a pass follows every
        cache change, so a member is released as soon as its victims are gone."""
        due = self.slots.due(admitted)
        if not due or not self._writes:
            return
        now = stamp()
        for pod_key in due:
            pod = self.cache.pods.get(pod_key)
            if pod is not None:
                self._write(pod, now)

    def release_admitted(self, view: GangView) -> None:
        """Tell the admitted members' scheduler they may go. Every pending member gets a
        `GangAdmitted` event. A member kube-scheduler cannot try on its own gets one write:
        a gated member loses the queue-allocation gate, and a member parked as unschedulable
        (refused by this filter before admission, or PodScheduled False from an earlier
        refusal) gets the `vulcan.sh/gang-admitted` stamp. Either is a pod update, which
        moves the pod back into kube-scheduler's active queue at once instead of after up to
        five minutes. A member never refused is still in that queue and passes on its first
        try, so it is not written: on a 1,000-member gang that spares most of 1,000 writes
        (and their watch events) while the gang is being scheduled.

        A pipelined member (its room still held by victims) that kube-scheduler cannot try on
        its own is not released yet but parked: released now, it would be tried while its
        victims terminate and fail, and every failed attempt doubles the backoff it must wait
        out once the room is free (1 s, 2 s, 4 s ...). The pass releases it when its room is
        free (`release_due`)."""
        refused = self.refused.pop(view.group_key, set())
        if not self._writes:
            return
        now = stamp()
        waiting = self.slots.waiting_members(view.group_key)
        for pod in view.members:
            if pod.node is not None or pod.terminal:
                continue
            self.slots.unpark(pod.key)
            note = f"gang {pod.group} admitted at {now[:19]}Z"
            blocked = waiting.get(pod.key)
            if blocked is not None:
                note += "; " + self.slots.waiting_reason(view.group_key, *blocked)
            self.writer.pod_event(pod, NORMAL, "GangAdmitted", note)
            if blocked is not None and (pod.gated or pod.unschedulable or pod.key in refused):
                self.slots.park(pod.key, view.group_key)
            elif pod.gated or pod.unschedulable or pod.key in refused:
                refused.discard(pod.key)
                self._write(pod, now)
        # Refused members this cache has not seen yet (the filter request came first): the
        # pass releases them once they arrive.
        for pod_key in refused:
            if pod_key not in self.cache.pods:
                self.slots.park(pod_key, view.group_key)

    def release_late(self, view: GangView, *, slotted_only: bool) -> bool:
        """Members of an admitted gang still behind the queue-allocation gate lose it, as
        filter then judges them: a member made again under its name, a dependent task's pods,
        a replacement, a group adopted after a restart, a write lost with an earlier process.
        With `slotted_only` (the gang plugin, its minimum met) only those holding a slot in
        the ledger: the rest are elastic members the pass places one at a time within their
        queue (`plugins.actions.backfill`). Members parked for room their victims still hold
        wait for it (`release_due`). True while some member still carries the gate (its
        write under way)."""
        if not self._writes:
            return False
        now = ""
        gated = False
        for pod in view.members:
            if (
                pod.node is not None
                or pod.terminal
                or pod.deleting
                or keys.QUEUE_ALLOCATION_GATE not in pod.gates
                or pod.key in self.slots
                or (slotted_only and self.slots.ledger.reservation_of(pod.key) is None)
            ):
                continue
            gated = True
            if self._lifting.get(pod.key) != pod.rv:
                now = now or stamp()
                self._write(pod, now)
        return gated

    def release(self, pod: PodRecord) -> None:
        """One member given a slot outside admission (an elastic member) goes now."""
        if self._writes:
            self._write(pod, stamp())

    def _write(self, pod: PodRecord, now: str) -> None:
        """The member's admission write (`GangWriter.admit_pod`), once per version of it: a
        pass that runs before the cache sees the write does not make it again."""
        self._lifting[pod.key] = pod.rv
        self._spawn(self._lift(pod, now))

    async def _lift(self, pod: PodRecord, now: str) -> None:
        if not await self.writer.admit_pod(pod, now) and self._lifting.get(pod.key) == pod.rv:
            del self._lifting[pod.key]  # may be tried again

    def pod_changed(self, pod_key: str, pod: PodRecord | None) -> None:
        if pod_key in self._lifting and (pod is None or pod.rv != self._lifting[pod_key]):
            del self._lifting[pod_key]
