"""What gang scheduling writes to the API server: PodGroup and Queue status (coalesced by a
StatusWriter), events on PodGroups and pods (paced by an EventRecorder), evictions through the
Eviction API, and the admission stamp / queue-allocation-gate removal on admitted members.
The decisions are `GangScheduler`'s (and `plugins`'); this only applies them."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Literal

from core.api import keys
from core.api.scheduling import CONDITION_UNSCHEDULABLE
from core.cache import Snapshot
from core.kube.client import PODGROUPS, PODS, QUEUES, VCJOBS, ApiError, KubeClient
from core.kube.events import WARNING, EventRecorder
from core.kube.status import StatusWriter
from core.records import PodGroupRecord, PodRecord
from extender.admissions import count_free_shape, reason_shape
from extender.queues import QueuePass, queue_status
from extender.reason_flips import ReasonFlips
from plugins.model import gang as gangs
from plugins.model import gang_ready
from plugins.model.podgroup_status import only_messages_changed, podgroup_status, status_changed

log = logging.getLogger("vulcan.extender.gang")

GANG_ADMITTED = "vulcan.sh/gang-admitted"
# Members told per change of a waiting gang's reason: enough for `kubectl describe` on any of
# them in practice, without thousands of events for one decision of a huge gang.
_TOLD_MEMBERS = 200
Eviction = Literal["evicted", "refused", "gone", "skipped"]


def _ident(pod: PodRecord) -> tuple[str, str]:
    """A pod, told apart from a pod made again under its name."""
    return pod.key, pod.uid


class GangWriter:
    def __init__(
        self,
        client: KubeClient | None,
        *,
        status_interval: float = 0.5,
        event_qps: float = 0.0,
        event_burst: int = 100,
    ) -> None:
        self.client = client
        self.status_writer = StatusWriter(client, interval=status_interval) if client else None
        self.recorder = (
            EventRecorder(client, "vulcan", "vulcan-extender", qps=event_qps, burst=event_burst)
            if client
            else None
        )
        self._statuses: dict[str, dict[str, Any]] = {}  # group key -> status last submitted
        # group key -> the shape of the reason its pending members were last told
        # (FailedScheduling; `reason_shape`), and the members (key, uid) told it.
        self._told: dict[str, tuple[str, set[tuple[str, str]]]] = {}
        # group key -> the shape of the reason the PodGroup (and its job) were last told
        self._group_told: dict[str, str] = {}
        self._queue_statuses: dict[str, dict[str, Any]] = {}
        self.flips = ReasonFlips()

    def forget(self, group_key: str, *, gone: bool = False) -> None:
        """Drop what was decided about the group's status. `gone`: the PodGroup was deleted
        (or made again under its name, as the job controller does on a restart): what the
        status writer remembers having written under that name is not the new object's, and
        must not make it skip the new group's first phase as already stored."""
        self._statuses.pop(group_key, None)
        self._told.pop(group_key, None)
        self._group_told.pop(group_key, None)
        self.flips.forget(group_key)
        if gone and self.status_writer is not None:
            namespace, _, name = group_key.partition("/")
            self.status_writer.forget(PODGROUPS, namespace, name)

    # ------------------------------------------------------------------ events

    def group_event(self, group: PodGroupRecord, type_: str, reason: str, note: str) -> None:
        """Written ahead of the members' events: a gang's one event must not be pushed out by
        its hundred members' (the recorder's `important` lane)."""
        if self.recorder is None:
            return
        ref = PODGROUPS.reference(group.name, group.namespace, group.uid)
        self.recorder.record(ref, type_, reason, note, important=True)

    def pod_event(self, pod: PodRecord, type_: str, reason: str, note: str) -> None:
        if self.recorder is not None:
            ref = PODS.reference(pod.name, pod.namespace, pod.uid)
            self.recorder.record(ref, type_, reason, note)

    # ------------------------------------------------------------------ status

    def podgroup_status(
        self,
        group: PodGroupRecord,
        view: gangs.GangView,
        admitted: bool,
        reason: str | None,
        *,
        dequeue: bool = False,
    ) -> None:
        """Write the status a pass computes; `dequeue`: an Inqueue group goes back to
        Pending (its queue's room is given back)."""
        previous = self._statuses.get(group.key)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = podgroup_status(
            view,
            admitted=admitted,
            previous_phase="Pending" if dequeue else (previous or {}).get("phase") or group.phase,
            unschedulable_reason=reason,
            now=now,
            previous_conditions=(previous or {}).get("conditions") or (),
        )
        if admitted or reason is None:
            self.flips.forget(group.key)
            flipped = False
        else:
            flipped = self.flips.flipped_back(group.key, reason_shape(reason))
        self._tell_members(group, view, admitted, reason, status, flipped)
        self._tell_group(group, view, admitted, reason, flipped)
        if previous is not None and not status_changed(previous, status):
            return
        self._statuses[group.key] = status
        if self.status_writer is not None:
            # A new phase is written at once (others act on it); counts and conditions of the
            # same phase are coalesced.
            phase_changed = status.get("phase") != ((previous or {}).get("phase") or group.phase)
            self.status_writer.submit(
                PODGROUPS,
                group.namespace,
                group.name,
                status,
                subresource=False,
                urgent=phase_changed,
                # Only the words of a reason it had moments ago: no sooner than the window.
                interval=(
                    self.flips.window
                    if flipped and previous is not None and only_messages_changed(previous, status)
                    else None
                ),
            )

    def _tell_group(
        self,
        group: PodGroupRecord,
        view: gangs.GangView,
        admitted: bool,
        reason: str | None,
        flipped: bool,
    ) -> None:
        """A waiting group's reason as a Warning `Unschedulable` event on the PodGroup, and on
        its Volcano Job, once per change of the reason other than in its numbers (`kubectl
        describe pg` and `kubectl describe vcjob` say why it waits, not only `vulcan
        explain`). While its members are still being made, their count ("3/100 members
        created") is one of those numbers: it moves every pass, and told each time it was two
        events per pass per gang (up to the spam filter's 25 on each object), which held back
        every other event of the extender; the PodGroup's condition keeps the current count."""
        if admitted or not reason or self.recorder is None:
            self._group_told.pop(group.key, None)
            return
        shape = reason_shape(reason) if gang_ready.valid(view)[0] else count_free_shape(reason)
        if self._group_told.get(group.key) == shape:
            return
        if flipped:  # back to a reason it was told moments ago (`ReasonFlips`)
            self._group_told[group.key] = shape
            return
        self._group_told[group.key] = shape
        self.group_event(group, WARNING, CONDITION_UNSCHEDULABLE, reason)
        owner = group.owner
        if group.job_owned and owner is not None:
            ref = VCJOBS.reference(owner.name, group.namespace, owner.uid)
            self.recorder.record(ref, WARNING, CONDITION_UNSCHEDULABLE, reason, important=True)

    def _tell_members(
        self,
        group: PodGroupRecord,
        view: gangs.GangView,
        admitted: bool,
        reason: str | None,
        status: dict[str, Any],
        flipped: bool,
    ) -> None:
        """Volcano's taskUnschedulable: each pending member of a gang that waits gets a Warning
        `FailedScheduling` event with the gang's Unschedulable message (which names the gang
        and the origin reason), when that reason changes other than in its numbers (the
        PodGroup's condition keeps the current ones), and members made since are told too (a
        gang evicted whole and made again by its job). Only for gangs whose members all exist
        (JobValid): while a job is still creating its pods the count changes every pass
        and says nothing the PodGroup does not."""
        if admitted or not reason or self.recorder is None:
            self._told.pop(group.key, None)
            return
        shape = reason_shape(reason)
        if flipped:  # back to a reason they were told moments ago (`ReasonFlips`)
            self._told[group.key] = (shape, {_ident(pod) for pod in view.members})
            return
        told_shape, told = self._told.get(group.key, ("", set()))
        told = (
            {_ident(pod) for pod in view.members if _ident(pod) in told}
            if told_shape == shape
            else set()
        )
        pending = [
            pod
            for pod in view.members
            if view.status.get(pod.key) == gangs.PENDING and _ident(pod) not in told
        ][: _TOLD_MEMBERS - len(told)]
        if not pending or not gang_ready.valid(view)[0]:
            return
        message = next(
            (
                c.get("message", "")
                for c in status.get("conditions") or ()
                if c.get("type") == CONDITION_UNSCHEDULABLE
            ),
            "",
        )
        if not message:
            return
        for pod in pending:
            self.pod_event(pod, WARNING, "FailedScheduling", message)
            told.add(_ident(pod))
        self._told[group.key] = (shape, told)

    def queue_statuses(self, snapshot: Snapshot, queue_pass: QueuePass) -> None:
        """`status.allocated` and the PodGroup counts of every Queue, written only when they
        changed (and then coalesced by the status writer)."""
        if self.status_writer is None:
            return
        for name in snapshot.queues:
            status = queue_status(queue_pass, name)
            if self._queue_statuses.get(name) == status:
                continue
            self._queue_statuses[name] = status
            self.status_writer.submit(QUEUES, None, name, status, subresource=True)

    # ------------------------------------------------------------------ pods

    async def evict(self, pod: PodRecord) -> Eviction:
        """Through the Eviction API (PodDisruptionBudgets apply), retried by the client:
        "refused" when the API server said no (e.g. a disruption budget), "gone" when the pod
        was not there any more."""
        if self.client is None:
            return "skipped"
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
        }
        try:
            await self.client.request(
                "POST", PODS.path(pod.namespace, pod.name, "eviction"), body=body
            )
        except ApiError as exc:
            if exc.not_found:
                return "gone"
            log.warning("eviction failed", extra={"pod": pod.key, "error": str(exc)})
            return "refused"
        return "evicted"

    async def admit_pod(self, pod: PodRecord, stamp: str) -> bool:
        """One write per member: the admission stamp and, when the member carries it, the
        removal of the queue-allocation gate, in one merge patch made conditional on the
        resourceVersion the cache saw (the gate list is rewritten whole, so a pod changed
        since is re-read and the patch recomputed). False when it could not be written (the
        caller may try again), True when written or the pod is gone."""
        assert self.client is not None
        gates, rv = pod.gates, pod.rv
        for _attempt in range(5):
            patch: dict[str, Any] = {"metadata": {"annotations": {GANG_ADMITTED: stamp}}}
            if keys.QUEUE_ALLOCATION_GATE in gates:
                patch["metadata"]["resourceVersion"] = rv
                patch["spec"] = {
                    "schedulingGates": [
                        {"name": g} for g in gates if g != keys.QUEUE_ALLOCATION_GATE
                    ]
                }
            try:
                await self.client.patch(PODS, pod.name, patch, pod.namespace, lean=True)
                return True
            except ApiError as exc:
                if exc.not_found:
                    return True
                if not exc.conflict:
                    log.warning(
                        "could not release an admitted member",
                        extra={"pod": pod.key, "error": str(exc)},
                    )
                    return False
            try:  # changed since the cache saw it: read it again
                live = await self.client.get(PODS, pod.name, pod.namespace)
            except ApiError as exc:
                if not exc.not_found:
                    log.warning(
                        "could not re-read an admitted member",
                        extra={"pod": pod.key, "error": str(exc)},
                    )
                    return False
                return True
            meta = live.get("metadata") or {}
            rv = meta.get("resourceVersion", "")
            live_gates = (live.get("spec") or {}).get("schedulingGates") or ()
            gates = tuple(str(g.get("name", "")) for g in live_gates)
        return False  # changed under every attempt: the next pass tries again
