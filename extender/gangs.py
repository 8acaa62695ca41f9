"""Gang scheduling in the extender: admission (enqueue), filter steering, bind hold, preempt veto.

The pieces (shared/spec/gang-design.md §9.3):
- **Enqueue** (`GangScheduler.run`, event-driven with a 1 s floor): a Pending PodGroup whose
  members all exist and whose `minResources` pass the overcommit rule is admitted only if a
  whole-gang placement over the cache succeeds after subtracting every live reservation
  (`plugins.placement.plan_gang`); the slots go into the gang ledger, exclusively, and the
  PodGroup becomes Inqueue. Members gated with `scheduling.volcano.sh/queue-allocation-gate` are
  ungated then, and members kube-scheduler parked after a refusal get the
  `vulcan.sh/gang-admitted` stamp (a pod update, which sends them back to its active queue).
  When the gang does not fit, reclaim or preempt (`plugins.evictions` decides which whole
  units go).
- **Filter** (`filter`, in `extender.gang_verbs` with bind and preempt): a member of a group
  that is not admitted is rejected on every node as unresolvable with the reason; an admitted
  member is steered to its reserved node, or re-planned onto a candidate with room if that node
  was not offered or the slot was taken.
- **Bind** (`bind`): members' binds are held by `extender.barrier.BindBarrier` until the gang has
  quorum, then all Bindings are created together; a timeout or a member going away fails the
  whole hold, releases the reservation and backs the group off.
- **Preempt** (`preempt`): no preemption for a member of a gang that is only waiting, and no
  victim that is a member of a running gang (kube-scheduler would break it up node by node).
- **Status**: PodGroup phase, counts and conditions as Volcano computes them
  (`plugins.podgroup_status`), written coalesced; every write (status, events, evictions,
  admission stamps) goes through `extender.gang_writer.GangWriter`.
Decisions live in the API server (PodGroup phase Inqueue, pods bound): after a restart the
ledger is rebuilt by planning again for Inqueue groups whose members are not bound yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from core.api import keys
from core.cache import ClusterCache, Snapshot
from core.kube.client import KubeClient
from core.kube.events import NORMAL, WARNING
from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from extender.barrier import BindBarrier
from extender.gang_verbs import GangVerbs
from extender.gang_writer import GangWriter
from extender.ledger import GangLedger, Reservation
from extender.metrics import GangMetrics
from extender.protocol import BindingArgs
from extender.queues import QueuePass, QueuePolicy, members_request
from extender.slots import SlotWatch
from plugins import gang as gangs
from plugins import overcommit
from plugins.evictions import EvictionRequest, choose_evictions, victim_units
from plugins.job_order import JOB_ORDER_PLUGINS, JobInput, job_order_key
from plugins.placement import Prefer, plan_gang
from plugins.queue_share import sum_vectors
from plugins.victims import (
    VictimUnit,
)

log = logging.getLogger("vulcan.extender.gang")

_ZERO = ResourceVector()


class GangScheduler(GangVerbs):
    def __init__(
        self,
        cache: ClusterCache,
        ledger: GangLedger,
        client: KubeClient | None,
        commit: Callable[[BindingArgs], Any],
        *,
        gang_timeout: float = 60.0,
        backoff: float = 10.0,
        period: float = 1.0,
        overcommit_factor: float | None = overcommit.DEFAULT_FACTOR,
        status_interval: float = 0.5,
        queue_policy: QueuePolicy | None = None,
        coalesce: float = 0.01,
        observe_pass: Callable[[float], None] | None = None,
        gang_metrics: GangMetrics | None = None,
        event_qps: float = 0.0,
        event_burst: int = 100,
        pipelined_wait: float = 0.5,
        placement: Prefer = "binpack",
        job_order: tuple[str, ...] = JOB_ORDER_PLUGINS,
        actions: Iterable[str] = ("preempt", "reclaim"),
        gang_enabled: bool = True,
    ) -> None:
        # Without the conf's `gang` plugin a PodGroup is only enqueued (queue and overcommit
        # rules); its members are then placed one by one, with no whole-gang placement and no
        # bind barrier (Volcano without gang: jobs may end up half placed).
        self.gang_enabled = gang_enabled
        # The conf's actions that may evict (Volcano's reclaim and preempt).
        self.eviction_actions = frozenset(actions) & {"preempt", "reclaim"}
        # The conf's JobOrder plugins, in its order (`plugins.job_order.job_order_plugins`).
        self.job_order = job_order
        self.cache = cache
        # How a gang is laid out: the conf's node order (`Framework.gang_placement`).
        self.placement: Prefer = placement
        self.ledger = ledger
        # Admitted members refused in filter, moved back to kube-scheduler's active queue when
        # their slot is free (Volcano's pipelined tasks: room still held by terminating victims).
        self.slots = SlotWatch(cache, ledger)
        self.pipelined_wait = pipelined_wait
        # Room that is being freed: pods terminating, or whose eviction this extender asked
        # for (pod -> node, requests). Volcano's Releasing, the difference between a node's
        # Idle and its FutureIdle: admission may pipeline a gang onto it, and never picks
        # those pods as victims again.
        self._releasing: dict[str, tuple[str, ResourceVector]] = {}
        self.client = client
        self.period = period
        self.coalesce = coalesce
        self.observe_pass = observe_pass
        self.gang_metrics = gang_metrics
        # group -> when the loop first saw minMember of its members exist, until it sees
        # minMember bound (vulcan_gang_admission_duration_seconds).
        self._quorum_seen: dict[str, float] = {}
        # group -> its members this process refused in filter before the group was admitted:
        # kube-scheduler parked them as unschedulable, and only an update of the pod (the
        # admission stamp) brings them back at once.
        self._refused: dict[str, set[str]] = {}
        self.overcommit_factor = overcommit_factor
        self.barrier = BindBarrier(
            commit, default_timeout=gang_timeout, backoff=backoff, on_event=self._barrier_event
        )
        self.admitted: set[str] = set()
        self.reasons: dict[str, str] = {}  # group -> why it is not admitted (for filter)
        self.queue_policy = queue_policy or QueuePolicy()
        self.queue_pass: QueuePass | None = None  # the queues as the last pass saw them
        self._generations: dict[str, str] = {}  # group key -> the UID decisions were made for
        # group -> the inputs of its last decision, when that decision cannot change unless
        # they do (see `schedule_pass`); job-order keys by group version; queue checks per pass.
        self._verdicts: dict[str, tuple[Any, ...]] = {}
        self._order_keys: dict[str, tuple[int | None, ResourceVector, tuple[Any, ...]]] = {}
        self._queue_checks: dict[tuple[Any, ...], tuple[str | None, str | None]] = {}
        self._volatile = False
        # Per queue: its numbers when the last pass looked at it, and its groups whose last
        # decision may change without them (no verdict); groups changed by the extender itself.
        self._queue_seen: dict[str, tuple[Any, ...] | None] = {}
        self._unsettled: dict[str, set[str]] = {}
        self._touched: set[str] = set()
        self._pass_allocated: set[str] = set()
        self._bound_counts: dict[str, tuple[Any, int, dict[str, int]]] = {}
        self._wake = asyncio.Event()
        self.writer = GangWriter(
            client, status_interval=status_interval, event_qps=event_qps, event_burst=event_burst
        )
        # Kept as attributes: the server flushes them, tests await them.
        self.status_writer = self.writer.status_writer
        self.recorder = self.writer.recorder
        self._tasks: list[asyncio.Task[Any]] = []
        # Every change the cache hears of (a node, a pod, a group) wakes the loop. Changes to
        # the ledger do not: they are the loop's own (admission), or a member's slot moving
        # within its admitted gang (filter), which no decision reads.
        cache.change_listeners.append(self._wake.set)
        cache.pod_listeners.append(self._pod_changed)

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, enqueue: bool = True) -> None:
        """Background work: the enqueue loop (tests may drive `schedule_pass` themselves),
        the status writer and the event recorder."""
        if enqueue:
            self._tasks.append(asyncio.create_task(self.run(), name="gang-enqueue"))
        if self.status_writer is not None:
            self._tasks.append(asyncio.create_task(self.status_writer.run(), name="gang-status"))
        if self.recorder is not None:
            self._tasks.append(asyncio.create_task(self.recorder.run(), name="gang-events"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def poke(self) -> None:
        """Something changed (a pod, a group): run a pass soon."""
        self._wake.set()

    def _pod_changed(self, pod_key: str, pod: PodRecord | None) -> None:
        """A member bound (or gone, or finished) gives up its reservation the moment the cache
        counts it on its node: kept until the next pass, its room counted twice, and filter
        refused the gang's next member "no room" on a node that had it."""
        if (pod is None or pod.node is not None or pod.terminal) and self.ledger.reservation_of(
            pod_key
        ) is not None:
            self.ledger.release(pod_key)
        if pod is None or pod.node is None or pod.terminal:
            self._releasing.pop(pod_key, None)
        elif pod.deleting:
            self._releasing[pod_key] = (pod.node, pod.requests)

    async def run(self) -> None:
        await self.cache.synced.wait()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.period)
            # While a gang's binds are held its members' events stream in and each would wake
            # a pass: a short pause lets a burst of them into one pass and keeps the loop free
            # for the filter and bind requests of the other members. Otherwise a wake is
            # served at once (admission latency).
            if self.barrier.holding():
                await asyncio.sleep(self.coalesce)
            self._wake.clear()
            started = time.perf_counter()
            try:
                self.schedule_pass()
            except Exception:  # never let a bug stop admission; it is retried next pass
                log.exception("gang scheduling pass failed")
            if self.observe_pass is not None:
                self.observe_pass(time.perf_counter() - started)

    # ------------------------------------------------------------------ enqueue

    def schedule_pass(self) -> None:
        """One pass over every PodGroup in admission order. A group whose last decision can
        only change with its inputs — its PodGroup and pods (the cache's group version), whether
        it is admitted, what it holds in the ledger and, while it waits, its queue's numbers — is
        skipped while those are unchanged: with thousands of waiting groups a pass then costs
        what changed, not what exists. Refusals that depend on the rest of the cluster (the
        placement, the overcommit rule) or on time (backoff) are always decided again."""
        # The pass never awaits, so no event can change the cache under it: read it in place.
        snapshot = self.cache.live_view()
        self._release_bound(snapshot)
        self._release_due()
        touched = self.cache.take_dirty_groups() | self._touched
        self._touched = set()
        # A deleted group is touched by its deletion: only those need looking for.
        for key in touched:
            if key not in snapshot.podgroups:
                self._forget_group(key, "its PodGroup was deleted")
                self.barrier.forget(key)
                self._generations.pop(key, None)
                self._verdicts.pop(key, None)
                self._order_keys.pop(key, None)
                self._bound_counts.pop(key, None)
                self._quorum_seen.pop(key, None)
                if not snapshot.pods_by_group.get(key):
                    # Kept while the group has pods: pods created with their PodGroup may reach
                    # filter (refused: "not found") before this cache sees the PodGroup, and
                    # are parked until its admission releases them.
                    self._refused.pop(key, None)
                self.reasons.pop(key, None)
        self._touched.clear()  # what _forget_group just noted is in `touched` already
        reserved_by_group = self.ledger.by_group()
        queue_pass = self.queue_policy.build(snapshot, reserved_by_group, touched)
        self.queue_pass = queue_pass
        self._queue_checks = {}
        self._pass_allocated = self.ledger.pod_keys_set()  # members holding a slot
        used = self._used(snapshot)
        total = self._total(snapshot)
        dirty_queues = {snapshot.podgroups[k].queue for k in touched if k in snapshot.podgroups}
        for queue, groups in self._admission_order(snapshot, queue_pass):
            numbers = _queue_numbers(queue_pass, queue)
            if (
                queue not in dirty_queues
                and queue in self._queue_seen
                and self._queue_seen[queue] == numbers
                and not self._unsettled.get(queue)
            ):
                continue  # nothing a decision here reads has changed since the last pass
            self._queue_seen[queue] = numbers
            unsettled: set[str] = set()
            for group in groups:
                key = group.key
                if not self._decide(snapshot, queue_pass, group, reserved_by_group, total, used):
                    unsettled.add(key)
            self._unsettled[queue] = unsettled
        for queue in list(self._queue_seen):
            if queue not in queue_pass.groups_by_queue:
                self._queue_seen.pop(queue, None)
                self._unsettled.pop(queue, None)
        self.writer.queue_statuses(snapshot, queue_pass)

    def _decide(
        self,
        snapshot: Snapshot,
        queue_pass: QueuePass,
        group: PodGroupRecord,
        reserved_by_group: Mapping[str, ResourceVector],
        total: Mapping[str, int],
        used: dict[str, int],
    ) -> bool:
        """Admit (or not) one group and write its status; True when the decision stands until
        its inputs change (it then has a verdict), False when it must be taken again."""
        self._same_generation(group)
        key = group.key
        inputs = self._decision_inputs(key, queue_pass, reserved_by_group.get(key))
        if self._verdicts.get(key) == inputs:
            return True
        self._verdicts.pop(key, None)
        view = gangs.gang_view(snapshot, key, allocated=self._pass_allocated)
        if view is None:
            return True
        reason = None
        admitted_now = False
        self._volatile = False
        # Pending, or Inqueue but not (all) placed: e.g. after a restart or a gang timeout.
        wants_admission = group.phase in ("Pending", "") or view.scheduled < view.min_member
        if key not in self.admitted and not wants_admission and not view.completed:
            # Placed whole already (e.g. before a restart): later members (an elastic gang
            # growing, a replacement pod) go through filter as members of an admitted gang.
            self.admitted.add(key)
        elif not self.gang_enabled and key not in self.admitted and not view.completed:
            reason = self._enqueue(group, total, used)
            if reason is None:
                self.admitted.add(key)
                self._release_admitted(view)
            self.writer.podgroup_status(group, view, reason is None, reason)
            return False
        elif (
            group.job_owned
            and group.phase in ("Pending", "")
            and (view.created == 0 or not gangs.valid(view)[0])
        ):
            # A vcjob's pods are created only once its PodGroup is Inqueue: Volcano's enqueue
            # admits it on minResources alone (queue and overcommit; JobValid does not gate
            # enqueue), and its gang is placed when the pods arrive. Some of its pods may exist
            # already (created for an earlier group of the same name, e.g. around a restart):
            # waiting for the rest here would wait for ever, as the job creates them only
            # once this group is Inqueue.
            reason = self._enqueue(group, total, used)
            self.writer.podgroup_status(group, view, reason is None, reason)
            return False
        elif key not in self.admitted and not view.completed:
            reason = self.admit(snapshot, group, view, total, used)
            admitted_now = reason is None
            if admitted_now:
                self._pass_allocated = self.ledger.pod_keys_set()
                view = gangs.gang_view(snapshot, key, allocated=self._pass_allocated)
                assert view is not None
        if key in self.admitted:
            # Pipelined: admitted onto room its victims still hold. Volcano's Pipelined tasks
            # (valid, not ready), and the condition says what they wait for; decided again
            # every pass until the room is free (the victims' going touches no input of it).
            waiting = self.slots.waiting_members(key)
            if waiting:
                self._volatile = True
                view = (
                    gangs.gang_view(
                        snapshot, key, allocated=self._pass_allocated, pipelined=waiting
                    )
                    or view
                )
                reason = self.slots.waiting_reason(key, *next(iter(waiting.values())))
        self.writer.podgroup_status(group, view, admitted_now or key in self.admitted, reason)
        self._observe_latencies(group, view, admitted_now)
        if self._volatile or self.cache.group_versions.get(key) is None:
            return False
        held = reserved_by_group.get(key) if not admitted_now else self.ledger.held_by(key)
        self._verdicts[key] = self._decision_inputs(key, queue_pass, held)
        return True

    def _observe_latencies(
        self, group: PodGroupRecord, view: gangs.GangView, admitted_now: bool
    ) -> None:
        metrics = self.gang_metrics
        if metrics is None:
            return
        key = group.key
        if admitted_now and group.created:
            with contextlib.suppress(ValueError):
                waited = time.time() - _epoch_seconds(group.created)
                metrics.wait_duration.labels(group.queue).observe(max(0.0, waited))
        if view.scheduled >= view.min_member:
            seen = self._quorum_seen.pop(key, None)
            if seen is not None:
                took = time.monotonic() - seen
                metrics.admission_duration.labels(group.queue).observe(took)
        elif view.created >= view.min_member and key not in self._quorum_seen:
            self._quorum_seen[key] = time.monotonic()

    def _decision_inputs(
        self, key: str, queue_pass: QueuePass, held: ResourceVector | None
    ) -> tuple[Any, ...]:
        admitted = key in self.admitted
        group = self.cache.podgroups.get(key)
        queue = None if admitted or group is None else _queue_numbers(queue_pass, group.queue)
        return (self.cache.group_versions.get(key), admitted, held, queue)

    def _admission_order(
        self, snapshot: Snapshot, queue_pass: QueuePass
    ) -> Iterator[tuple[str, list[PodGroupRecord]]]:
        """Queues in Volcano's queue order (priority, then share), each with its jobs in job
        order (priority, gang not ready first, DRF share, SLA deadline, creation), sorted only
        when the pass looks at that queue. Every group is visited — a head-of-line gang that
        cannot be admitted never stops the ones behind it, in its queue or in another
        (Volcano's `traverse`); the order decides who gets contested room first."""
        total = snapshot.total_allocatable
        queues = queue_pass.model.queue_order()
        seen = set(queues)
        queues += sorted(q for q in queue_pass.groups_by_queue if q not in seen)
        podgroups = snapshot.podgroups
        for queue in queues:
            members = queue_pass.groups_by_queue.get(queue)
            if not members:
                continue
            yield (
                queue,
                _LazyOrder(members, podgroups, lambda g: self._order_key(snapshot, g, total)),
            )

    def _order_key(
        self, snapshot: Snapshot, group: PodGroupRecord, total: ResourceVector
    ) -> tuple[Any, ...]:
        """The group's job-order key, recomputed only when the group (or the cluster total its
        DRF share divides by) changed."""
        version = self.cache.group_versions.get(group.key)
        cached = self._order_keys.get(group.key)
        if cached is not None and cached[0] == version and cached[1] == total:
            return cached[2]
        order = job_order_key(self._job_input(snapshot, group), total, plugins=self.job_order)
        self._order_keys[group.key] = (version, total, order)
        return order

    def _job_input(self, snapshot: Snapshot, group: PodGroupRecord) -> JobInput:
        placed = members_request(snapshot, group, placed=True)
        return JobInput(
            key=group.key,
            queue=group.queue,
            priority=self._priority(snapshot, group),
            min_member=group.min_member,
            ready=group.phase in ("Running", "Completed"),
            allocated=placed,
            creation=group.created,
            uid=group.uid,
            sla_waiting_seconds=gangs.annotation_duration(
                group, keys.SLA_WAITING_TIME, keys.SLA_WAITING_TIME_LEGACY
            ),
        )

    def _enqueue(
        self, group: PodGroupRecord, total: Mapping[str, int], used: dict[str, int]
    ) -> str | None:
        """Volcano's enqueue for a group without pods: its queue must be Open and able to
        hold its minResources, and the cluster (x the overcommit factor) too. None when
        enqueued (the group becomes Inqueue; nothing is reserved on nodes)."""
        key = group.key
        queue_pass = self.queue_pass
        if queue_pass is not None:
            refused = queue_pass.model.enqueueable(group.queue, group.min_resources)
            if refused:
                return self._not_admitted(key, f"gang {key}: waiting for admission: {refused}")
        over = self._overcommit(group, total, used)
        if over:
            return self._not_admitted(key, f"gang {key}: waiting for admission: {over}")
        if queue_pass is not None:
            queue_pass.model.on_enqueued(group.queue, group.min_resources)
        if group.min_resources is not None:
            for name, amount in group.min_resources.items():
                used[name] = used.get(name, 0) + amount
        self.reasons.pop(key, None)
        note = "enqueued: its job creates the pods now" if group.job_owned else "enqueued"
        self.writer.group_event(group, NORMAL, "Enqueued", note)
        return None

    def admit(
        self,
        snapshot: Snapshot,
        group: PodGroupRecord,
        view: gangs.GangView,
        total: Mapping[str, int],
        used: dict[str, int],
    ) -> str | None:
        """Try to admit `group`; None on success, else why not (kept for filter). `total` and
        `used` are the pass's cluster sums (`used` grows with each group admitted)."""
        key = group.key
        wait = self.barrier.backing_off(key)
        if wait > 0:
            self._volatile = True
            return self._not_admitted(key, f"backing off for {wait:.0f}s after a gang timeout")
        ok, why = gangs.valid(view)
        if not ok:
            return self._not_admitted(key, why)
        members = gangs.pending_members(view)
        need = gangs.members_needed(view)
        queue_pass = self.queue_pass
        demand = _demand(group, members, need)
        over_share = None
        enqueued = group.phase == "Inqueue"
        if queue_pass is not None:
            # The queue first (spec §3.4, §3.9–3.10): its state and capability (enqueue), then
            # its share (what Volcano's allocate checks per task; here once for the gang, as
            # the whole gang is reserved at once). A queue at its share may still make room
            # by preempting its own lower-priority work (what it frees counts for it).
            # Many waiting groups of a queue ask the same: judge (and word) it once per state.
            memo = (
                group.queue,
                _queue_numbers(queue_pass, group.queue),
                group.min_resources,
                demand,
            )
            checked = self._queue_checks.get(memo)
            if checked is None:
                checked = (
                    queue_pass.model.enqueueable(group.queue, group.min_resources),
                    queue_pass.model.allocatable(group.queue, demand),
                )
                self._queue_checks[memo] = checked
            refused, over_share = checked
            if enqueued:
                # Enqueued already (Volcano's enqueue looks at Pending jobs only): its
                # minResources are in the queue's `inqueue`, and judging them again would count
                # them twice. Only a closed queue still refuses it (no allocation there).
                source = queue_pass.inputs.get(group.queue)
                refused = None if source is None or source.open else refused
            if refused:
                return self._not_admitted(key, f"gang {key}: waiting for admission: {refused}")
        self._volatile = True  # from here on the answer depends on the rest of the cluster
        over = "" if enqueued else self._overcommit(group, total, used)
        if over:
            return self._not_admitted(key, f"gang {key}: waiting for admission: {over}")
        reserved = {n: r for n, r in self.ledger.by_node.items()}
        per_task = gangs.missing_task_members(view)
        plan = None
        if over_share is None:
            plan = plan_gang(
                snapshot, members, need, reserved, need_per_task=per_task, prefer=self.placement
            )
        if self._releasing:
            # Room being freed counts as free (Volcano's FutureIdle): tried after the idle
            # room (as Volcano allocates before it pipelines), and before any new eviction.
            reserved = self._future_reserved()
            if over_share is None and not plan.ok:
                plan = plan_gang(
                    snapshot, members, need, reserved, need_per_task=per_task, prefer=self.placement
                )
        if plan is None or not plan.ok:
            preempted = self._preempt_for(
                snapshot, group, members, need, per_task, reserved, demand, over_share
            )
            if preempted is None:
                why = over_share or (plan.reason if plan is not None else "")
                return self._not_admitted(key, f"gang {key}: waiting for admission: {why}")
            plan = preempted
        by_key = {pod.key: pod for pod in members}
        for pod_key, node in plan.slots.items():
            request = by_key[pod_key].requests
            self.ledger.reserve(Reservation(pod_key, node, request, key))
            if not self.slots.fits(pod_key, node, request):
                # Pipelined: the room is still held by pods being evicted or terminating.
                holding = [k for k, (n, _) in self._releasing.items() if n == node]
                self.slots.pipeline(key, pod_key, node, holding)
        held = sum_vectors(by_key[pod_key].requests for pod_key in plan.slots)
        if queue_pass is not None:
            queue_pass.model.on_allocated(group.queue, held)
        self.admitted.add(key)
        self.reasons.pop(key, None)
        if group.min_resources is not None:
            for name, amount in group.min_resources.items():
                used[name] = used.get(name, 0) + amount
        self.writer.group_event(
            group,
            NORMAL,
            "Admitted",
            f"gang admitted: {len(plan.slots)} members "
            f"reserved on {len(set(plan.slots.values()))} nodes",
        )
        self._release_admitted(view)
        return None

    # ------------------------------------------------------------------ preemption

    def _preempt_for(
        self,
        snapshot: Snapshot,
        group: PodGroupRecord,
        members: list[PodRecord],
        need: int,
        per_task: Mapping[str, int],
        reserved: Mapping[str, ResourceVector],
        demand: ResourceVector,
        over_share: str | None = None,
    ) -> Any:
        """Reclaim or preempt for a gang that passed its queue's checks but does not fit
        (`plugins.evictions.choose_evictions` decides); the evictions are started here.
        Returns the plan the evictions make possible, or None."""
        units = victim_units(
            snapshot,
            group.key,
            self._releasing,
            lambda pod: self.cache.queue_of(pod) or keys.DEFAULT_QUEUE,
        )
        queue_pass = self.queue_pass
        chosen = choose_evictions(
            snapshot,
            group,
            members,
            units,
            EvictionRequest(
                need=need,
                per_task=per_task,
                reserved=reserved,
                demand=demand,
                priority=self._priority(snapshot, group),
                over_share=over_share,
                prefer=self.placement,
                actions=self.eviction_actions,
            ),
            queue_pass.model if queue_pass is not None else None,
            queue_pass.inputs if queue_pass is not None else None,
        )
        if chosen is None:
            return None
        self._evict_units(snapshot, group, chosen.priority, chosen.action, chosen.units)
        return chosen.plan

    def _evict_units(
        self,
        snapshot: Snapshot,
        group: PodGroupRecord,
        priority: int,
        action: str,
        chosen: list[VictimUnit],
    ) -> None:
        names = ", ".join(u.group or u.pods[0] for u in chosen)
        for unit in chosen:
            if action == "reclaim":
                note = (
                    f"reclaimed (whole) by queue {group.queue} for gang {group.key}: queue "
                    f"{unit.queue} holds more than it deserves; {len(unit.pods)} pod(s) of "
                    f"{unit.group or unit.pods[0]}"
                )
            else:
                note = (
                    f"preempted (whole) by gang {group.key} of priority {priority}: "
                    f"{len(unit.pods)} pod(s) of {unit.group or unit.pods[0]}"
                )
            victim_group = snapshot.podgroups.get(unit.group) if unit.group else None
            if victim_group is not None:
                self.writer.group_event(
                    victim_group, WARNING, "Reclaimed" if action == "reclaim" else "Preempted", note
                )
            for pod_key in unit.pods:
                victim = snapshot.pods[pod_key]
                if victim.node is not None:
                    self._releasing[pod_key] = (victim.node, victim.requests)
                task = asyncio.create_task(self._evict(victim, note))
                self._tasks.append(task)
                task.add_done_callback(self._tasks_done)
        what = "over-share" if action == "reclaim" else "lower-priority"
        self.writer.group_event(
            group,
            NORMAL,
            "Reclaiming" if action == "reclaim" else "Preempting",
            f"evicting {len(chosen)} {what} unit(s) to place the gang: {names}",
        )

    async def _evict(self, pod: PodRecord, note: str) -> None:
        outcome = await self.writer.evict(pod)
        if outcome == "refused":
            # Not evicted (e.g. a disruption budget): its room is not being freed after all.
            self._releasing.pop(pod.key, None)
            self.poke()
        elif outcome == "gone":
            if (known := self.cache.pods.get(pod.key)) is None or known.uid != pod.uid:
                self._releasing.pop(pod.key, None)  # gone already
        elif outcome == "evicted":
            self.writer.pod_event(pod, WARNING, "Preempted", note)

    def _future_reserved(self) -> dict[str, ResourceVector]:
        """The ledger's reservations per node minus the room being freed there: what a
        placement over the cache's node_requested must subtract to see FutureIdle."""
        reserved = dict(self.ledger.by_node)
        for pod_key, (node, request) in list(self._releasing.items()):
            pod = self.cache.pods.get(pod_key)
            if pod is None or pod.node != node or not pod.occupies_node:
                del self._releasing[pod_key]  # gone before the cache told the listener
                continue
            reserved[node] = reserved.get(node, _ZERO) - request
        return reserved

    def _not_admitted(self, key: str, reason: str) -> str:
        self.reasons[key] = reason
        return reason

    def _priority(self, snapshot: Snapshot, group: PodGroupRecord) -> int:
        members = snapshot.pods_by_group.get(group.key, ())
        return max((snapshot.pods[k].priority for k in members if k in snapshot.pods), default=0)

    def _used(self, snapshot: Snapshot) -> dict[str, int]:
        """What the overcommit rule counts as taken: admitted groups' minResources (Inqueue
        and beyond, Volcano's `inqueue` + allocated) — approximated by the requests of bound
        pods plus the ledger's reservations."""
        used = snapshot.total_requested.as_dict()
        for reserved in self.ledger.by_node.values():
            for name, amount in reserved.items():
                used[name] = used.get(name, 0) + amount
        return used

    @staticmethod
    def _total(snapshot: Snapshot) -> dict[str, int]:
        """The cluster's allocatable (Ready nodes; kept by the cache with every event)."""
        return snapshot.total_allocatable.as_dict()

    def _overcommit(
        self, group: PodGroupRecord, total: Mapping[str, int], used: Mapping[str, int]
    ) -> str:
        """Volcano's overcommit enqueue rule (`plugins.overcommit`), when the conf has it."""
        return overcommit.shortfall(group.min_resources, total, used, self.overcommit_factor)

    def _release_bound(self, snapshot: Snapshot) -> None:
        """A member that is bound now counts in node_requested: its reservation goes."""
        for pod_key in self.ledger.pod_keys():
            pod = snapshot.pods.get(pod_key)
            if pod is None or pod.node is not None or pod.terminal:
                self.ledger.release(pod_key)

    def _same_generation(self, group: PodGroupRecord) -> None:
        """A PodGroup deleted and created again under the same name is a new gang: nothing
        decided for the old one (admission, reservations, a committed bind barrier) carries
        over, even when the deletion fell between two passes."""
        known = self._generations.get(group.key)
        if known is not None and known != group.uid:
            self._forget_group(group.key, "its PodGroup was re-created")
            self.barrier.forget(group.key)
        self._generations[group.key] = group.uid

    def _touch(self, key: str) -> None:
        """The extender itself changed something a decision about `key` reads."""
        self._touched.add(key)
        self._verdicts.pop(key, None)

    def _forget_group(self, key: str, why: str) -> None:
        self._touch(key)
        self.admitted.discard(key)
        self.slots.forget_group(key)
        for pod_key in self.ledger.of_group(key):
            self.ledger.release(pod_key)
        self.barrier.release(key, why)
        self.writer.forget(key)

    def _release_due(self) -> None:
        """Admitted members kube-scheduler parked (this filter refused them) whose slot is
        free now go back to its active queue: one pod update each (the admission stamp, new
        time), as on admission. Runs at the start of every pass, and a pass follows every
        cache change, so a member is released as soon as its victims are gone."""
        due = self.slots.due(self.admitted)
        if not due or self.client is None:
            return
        stamp = _stamp()
        for pod_key in due:
            pod = self.cache.pods.get(pod_key)
            if pod is not None:
                task = asyncio.create_task(self.writer.admit_pod(pod, stamp))
                self._tasks.append(task)
                task.add_done_callback(self._tasks_done)

    def _release_admitted(self, view: gangs.GangView) -> None:
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
        free (`_release_due`)."""
        refused = self._refused.pop(view.group_key, set())
        if self.client is None:
            return
        stamp = _stamp()
        waiting = self.slots.waiting_members(view.group_key)
        for pod in view.members:
            if pod.node is not None or pod.terminal:
                continue
            self.slots.unpark(pod.key)
            note = f"gang {pod.group} admitted at {stamp[:19]}Z"
            blocked = waiting.get(pod.key)
            if blocked is not None:
                note += "; " + self.slots.waiting_reason(view.group_key, *blocked)
            self.writer.pod_event(pod, NORMAL, "GangAdmitted", note)
            if blocked is not None and (pod.gated or pod.unschedulable or pod.key in refused):
                self.slots.park(pod.key, view.group_key)
            elif pod.gated or pod.unschedulable or pod.key in refused:
                refused.discard(pod.key)
                task = asyncio.create_task(self.writer.admit_pod(pod, stamp))
                self._tasks.append(task)
                task.add_done_callback(self._tasks_done)
        # Refused members this cache has not seen yet (the filter request came first): the
        # pass releases them once they arrive.
        for pod_key in refused:
            if pod_key not in self.cache.pods:
                self.slots.park(pod_key, view.group_key)

    def _tasks_done(self, task: asyncio.Task[Any]) -> None:
        with contextlib.suppress(ValueError):
            self._tasks.remove(task)

    # ------------------------------------------------------------------ status and events

    def _barrier_event(self, group_key: str, reason: str, message: str) -> None:
        group = self.cache.podgroups.get(group_key)
        holding = reason in ("Held", "Holding")
        if not holding:  # a hold changes nothing a decision or the status reads
            self._touch(group_key)
        if reason in ("TimedOut", "Released"):
            # The hold is gone: so is the placement. Plan again (after the backoff).
            self._forget_group(group_key, message)
            self.poke()
        if reason in ("TimedOut", "Released", "Committed"):
            # Each member says it too: `kubectl describe pod` is where a user looks first.
            type_ = NORMAL if reason == "Committed" else WARNING
            for pod_key in self.cache.pods_by_group.get(group_key, ()):
                pod = self.cache.pods.get(pod_key)
                if pod is not None and not pod.terminal:
                    self.writer.pod_event(pod, type_, f"Gang{reason}", message)
        # One PodGroup event when a hold starts, not one per member held: a 1,000-member
        # gang's members say GangCommitted (or TimedOut, Released) when the hold ends.
        if group is not None and reason != "Held":
            self.writer.group_event(
                group,
                WARNING if reason in ("TimedOut", "CommitFailed") else NORMAL,
                f"Gang{reason}",
                message,
            )


def _demand(group: PodGroupRecord, members: list[PodRecord], need: int) -> ResourceVector:
    """What admitting the gang takes from its queue: `minResources` when set, else the
    requests of the members it needs (the first `need`, in placement order)."""
    if group.min_resources is not None:
        return group.min_resources
    return sum_vectors(pod.requests for pod in members[:need])


def _stamp() -> str:
    """The admission stamp's value: the time, to the microsecond so that a second stamp in
    the same second still changes the pod (an unchanged annotation is no update at all)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _epoch_seconds(stamp: str) -> float:
    """An RFC 3339 timestamp (`2026-11-22T01:02:03Z`) as seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


class _LazyOrder(list):  # type: ignore[type-arg]
    """A queue's groups, sorted into job order the first time they are iterated (a pass that
    skips the queue never pays for the sort)."""

    def __init__(
        self,
        members: Iterable[str],
        podgroups: Mapping[str, PodGroupRecord],
        key: Callable[[PodGroupRecord], Any],
    ) -> None:
        super().__init__()
        self._members: Iterable[str] | None = members
        self._podgroups = podgroups
        self._key = key

    def __iter__(self) -> Iterator[PodGroupRecord]:
        if self._members is not None:
            podgroups = self._podgroups
            groups = [podgroups[k] for k in self._members if k in podgroups]
            ranked = sorted(((self._key(g), g) for g in groups), key=_first)
            self.extend(g for _, g in ranked)
            self._members = None
        return super().__iter__()


def _queue_numbers(queue_pass: QueuePass, name: str) -> tuple[Any, ...] | None:
    """What a waiting group's queue checks read of its queue, comparable across passes."""
    share = queue_pass.model.shares.get(name)
    source = queue_pass.inputs.get(name)
    if share is None or source is None:
        return None
    return (
        share.deserved,
        share.allocated,
        share.inqueue,
        share.elastic,
        share.real_capability,
        share.capability,
        source.open,
    )
