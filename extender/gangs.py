"""Gang scheduling in the extender: the loop that runs a scheduling session per pass and applies
what it decides, and the state the verbs answer kube-scheduler from.

Every pass (`GangScheduler.run`: on every cache change, with a 1 s floor) reads the cache's
snapshot and the extender's facts (`plugins.framework.pass_input`), runs one session of the
conf's actions (`plugins.framework.run.run_pass`, through `extender.pass_runner` and its memo)
and applies the decisions after the session closed (`extender.decision_applier`): an admitted
gang's slots into the gang ledger (the PodGroup becomes Inqueue), evictions to the evictor,
members kube-scheduler parked released. The verbs (`extender.gang_verbs`) answer from that
state: filter steering, the bind barrier, the preempt veto. Decisions live in the API server
(phase Inqueue, pods bound): after a restart the ledger is rebuilt by planning again for
Inqueue groups whose members are not bound yet.

The state has owners: admissions and promises (`extender.admissions`), the ledger, the bind
barrier, the slots waiting for room, the evictor, the queues' starvation and the filter's queue
numbers (`extender.starving_queues`, `extender.queue_gate`), elastic members, what expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Collection, Coroutine
from typing import Any

from core.cache import ClusterCache, Snapshot
from core.cache_changes import plain_change
from core.kube.client import KubeClient
from core.kube.events import WARNING
from core.records import PodGroupRecord, PodRecord
from core.served import ServedPods
from extender.admissions import Admissions
from extender.backoff_words import BackoffWords
from extender.barrier import BindBarrier
from extender.decision_applier import DecisionApplier, GangParts
from extender.elastic_members import ElasticMembers
from extender.evictor import Evictor
from extender.gang_events import BarrierEvents
from extender.gang_options import GangOptions
from extender.gang_quorum import QuorumWatch
from extender.gang_writer import GangWriter
from extender.ledger import GangLedger
from extender.member_release import MemberRelease
from extender.metrics import GangMetrics
from extender.pass_runner import PassRunner
from extender.pass_waiters import PassWaiters
from extender.protocol import BindingArgs
from extender.queue_gate import QueueGate
from extender.slots import SlotWatch
from extender.starving_queues import StarvingQueues
from extender.unreached import MEMBERS_NOT_REACHED, NOT_REACHED, ReachWatch
from plugins.framework.config import default_config
from plugins.framework.node_order import Framework
from plugins.framework.pass_input import ExtenderFacts, PassInput, Settings
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy
from plugins.model.placement import Prefer

log = logging.getLogger("vulcan.extender.gang")


class GangScheduler:
    def __init__(
        self,
        cache: ClusterCache,
        ledger: GangLedger,
        client: KubeClient | None,
        commit: Callable[[BindingArgs], Any],
        *,
        options: GangOptions | None = None,
        policy: Policy | None = None,
        placement: Prefer | None = None,
        metrics: GangMetrics | None = None,
        observe_pass: Callable[[float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # The conf's plugins and actions (Volcano's default conf when none is given).
        self.policy = policy or build_policy(default_config())
        self.placement: Prefer = placement or Framework(self.policy).gang_placement
        options = self.options = options or GangOptions()
        self.cache = cache
        self.ledger = ledger
        self.client = client
        self.gang_metrics = metrics
        self.observe_pass = observe_pass
        self.served = options.served or ServedPods.every()
        self.admissions = Admissions()
        # What a gang holds in the ledger is one of its facts: a change is the memo's to see.
        ledger.group_listeners.append(self.admissions.touch)
        self.starving = StarvingQueues()
        self.queue_gate = QueueGate()
        self.runner = PassRunner(options.memo)
        pacing = options.pacing
        self.barrier = BindBarrier(
            commit,
            default_timeout=options.gang_timeout,
            backoff=options.backoff,
            clock=clock,
        )
        # Admitted members refused in filter, moved back to kube-scheduler's active queue when
        # their slot is free (Volcano's pipelined tasks: room still held by terminating victims).
        self.slots = SlotWatch(cache, ledger)
        self.elastic = ElasticMembers(ledger, self.slots)
        self.writer = GangWriter(
            client,
            status_interval=pacing.status_interval,
            event_qps=options.events.qps,
            event_burst=options.events.burst,
        )
        self.status_writer = self.writer.status_writer  # the server flushes it, tests await it
        self.barrier.on_event = BarrierEvents(
            cache, self.writer, metrics, self.touch, self._hold_ended
        )
        self.recorder = self.writer.recorder
        self._tasks: list[asyncio.Task[Any]] = []
        self.release = MemberRelease(
            cache, self.slots, self.writer, self._spawn, writes=client is not None
        )
        # Applies evictions, and keeps the room being freed (Volcano's Releasing).
        reach = self.reach = ReachWatch(options.member_reach_timeout, options.backoff, clock=clock)
        evicting = (cache, ledger, self.writer, self._spawn, self.poke, reach.emptied)
        self.evictor = Evictor(*evicting, stranded_after=options.stranded_gang_after)
        # A committed gang that loses members returns to all-or-nothing (`extender.gang_events`).
        self.quorum = QuorumWatch(cache, self.barrier, self.evictor.why_evicted)
        parts = (self.slots, self.evictor, self.release, self.writer, self.admissions)
        self.applier = DecisionApplier(
            GangParts(ledger, *parts, self.barrier, self.elastic, metrics), self.forget_group
        )
        self.unsettled: frozenset[str] = frozenset()  # admitted gangs looked at every pass
        # group -> its bound members counted once per group version (`GangVerbs.bind`).
        self.bound_counts: dict[str, tuple[Any, int, dict[str, int]]] = {}
        self.backoffs = BackoffWords(self.barrier)
        self.admissions.admit_listeners += [self.reach.admitted, self.evictor.forget_whole_eviction]
        self._wake = asyncio.Event()
        self.passes = PassWaiters()
        self._plain_change = False
        self._plain_timer: asyncio.TimerHandle | None = None
        # Every change the cache hears of (a node, a pod, a group) wakes the loop. Changes to
        # the ledger do not: they are the loop's own (admission), or a member's slot moving
        # within its admitted gang (filter), which no decision reads.
        cache.change_listeners.append(self._changed)
        cache.pod_listeners.append(self._pod_changed)

    # ------------------------------------------------------------------ views for the verbs

    @property
    def gang_enabled(self) -> bool:
        """Without the conf's `gang` plugin a PodGroup is only enqueued; its members are then
        placed one by one, with no whole-gang placement and no bind barrier."""
        return self.policy.has("gang")

    @property
    def admitted(self) -> Collection[str]:
        """The admitted gangs (read-only: `admissions` changes them)."""
        return self.admissions.keys

    @property
    def reasons(self) -> dict[str, str]:
        return self.admissions.reasons

    @property
    def promises(self) -> dict[str, str]:
        """gang -> what it was enqueued on the promise of evicting ("will preempt ...")."""
        promised = self.admissions.promised()
        return {key: self.admissions.promise_of(key) or "" for key in promised}

    @property
    def queue_pass(self) -> Any:
        return self.queue_gate.queues

    @property
    def pass_state(self) -> Any:
        return self.queue_gate.state

    def use_conf(self, policy: Policy, placement: Prefer) -> None:
        """A reloaded scheduler conf (`extender.conf_reload`), taken between two passes (a pass
        never awaits). What the old conf decided is forgotten, so the next pass decides every
        group again; the ledger, held binds and admitted gangs stay."""
        self.policy = policy
        self.placement = placement
        self.runner.forget()
        self.poke()

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, enqueue: bool = True) -> None:
        """Background work: the scheduling loop (tests may drive `schedule_pass` themselves),
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

    def _changed(self) -> None:
        """A change the cache heard: wake the loop, or for a plain pod's change (noted by
        `_pod_changed` just before) once `plain_pod_delay` has passed."""
        if not self._plain_change:
            self._wake.set()
            return
        self._plain_change = False
        if self._plain_timer is None and not self._wake.is_set():
            loop = asyncio.get_running_loop()
            self._plain_timer = loop.call_later(
                self.options.pacing.plain_pod_delay, self._plain_due
            )

    def _plain_due(self) -> None:
        self._plain_timer = None
        self._wake.set()

    def _pod_changed(self, pod_key: str, pod: PodRecord | None, old: PodRecord | None) -> None:
        """A member bound (or gone, or finished) gives up its reservation the moment the cache
        counts it on its node (kept until the next pass, its room was counted twice). A member
        lost by a committed gang may return it to all-or-nothing (`QuorumWatch`)."""
        self._plain_change = self.options.pacing.plain_pod_delay > 0 and plain_change(pod, old)
        self.quorum.pod_changed(pod_key, pod, old)
        if (pod is None or pod.node is not None or pod.terminal) and self.ledger.reservation_of(
            pod_key
        ) is not None:
            self.ledger.release(pod_key)
        self.evictor.pod_changed(pod_key, pod)
        self.release.pod_changed(pod_key, pod)

    async def run(self) -> None:
        await self.cache.synced.wait()
        loop = asyncio.get_running_loop()
        last_pass = rested = -math.inf
        pacing = self.options.pacing
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), pacing.period)
            # Binds held: a short pause lets a burst of members' events into one pass. Else a
            # quiet spell's wake is served at once; passes leave the verbs their share of time.
            if self.barrier.holding():
                await asyncio.sleep(pacing.coalesce)
            else:
                early = max(last_pass + pacing.min_pass_interval, rested) - loop.time()
                if early > 0:
                    await asyncio.sleep(early)
            self._wake.clear()
            if self._plain_timer is not None:  # this pass sees those changes too
                self._plain_timer.cancel()
                self._plain_timer = None
            last_pass = loop.time()
            started = time.perf_counter()
            try:
                self.schedule_pass()
            except Exception:  # never let a bug stop admission; it is retried next pass
                log.exception("gang scheduling pass failed")
            rested = loop.time() + pacing.idle_ratio * (cost := time.perf_counter() - started)
            if self.observe_pass is not None:
                self.observe_pass(cost)

    # ------------------------------------------------------------------ a pass

    def schedule_pass(self) -> None:
        """One pass: the session over the cache's snapshot and this extender's facts, its
        decisions applied after it closed."""
        # The pass never awaits, so no event can change the cache under it: read it in place.
        self.evictor.evict_leftovers()
        self.evictor.evict_stranded()
        snapshot = self.cache.live_view(numa=self.policy.numa_filters)
        self._release_bound(snapshot)
        groups, admitted, members = snapshot.podgroups, self.admissions.keys, snapshot.group_pods
        for expiry in self.reach.expiries(groups, admitted, self.ledger, self.slots, members):
            if expiry.reason == MEMBERS_NOT_REACHED:
                self.forget_group(expiry.key, expiry.why, NOT_REACHED)
            self.touch(expiry.key)  # (a gang whose pods were not made goes back to Pending)
            if (group := groups.get(expiry.key)) is not None:
                self.writer.group_event(group, WARNING, expiry.reason, expiry.why)
        self.release.release_due(set(self.admissions.keys))
        changed = self.cache.take_dirty_groups() | self.admissions.take_touched()
        for key in changed:
            if (found := groups.get(key)) is None:
                self._deleted(key, snapshot)
            else:
                self.same_generation(found)
        changed |= self.admissions.take_touched()  # what re-creations forgot
        given = self.pass_input(snapshot)
        result = self.runner.run(given, self.policy, changed)
        unsettled = set()
        gang_enabled = self.gang_enabled
        for decision in result.decisions:
            if self.applier.apply(decision, snapshot, gang_enabled):
                unsettled.add(decision.key)
            self.reach.observe(decision, snapshot.podgroups.get(decision.key), members)
        # Gangs looked at again every pass until what they wait for is there (the memo keeps
        # none of their decisions, so each is among the decisions of every pass).
        self.unsettled = frozenset(unsettled)
        self.queue_gate.closed(result.queues, result.state)
        self.starving.queues = result.starving
        self.writer.queue_statuses(snapshot, result.queues)
        self.passes.ended()

    def pass_input(self, snapshot: Snapshot | None = None) -> PassInput:
        """What a session reads now: the cache's snapshot and this extender's facts."""
        snapshot = snapshot or self.cache.live_view(numa=self.policy.numa_filters)
        return PassInput(snapshot, self._facts(snapshot), self._settings(), time.time())

    def _facts(self, snapshot: Snapshot) -> ExtenderFacts:
        return ExtenderFacts(
            admitted=self.admissions.keys,
            ledger=self.ledger,
            releasing=self.evictor.releasing,
            backoff={**self.backoffs.now(), **self.reach.backoffs()},
            promised=self.admissions.promised(),
            promised_version=self.admissions.promises_version,
            starving=self.starving.queues,
            elastic_waiting=self.elastic.before_pass(snapshot, self.admissions.keys),
            unsettled=self.unsettled,
        )

    def _settings(self) -> Settings:
        return Settings(
            served=self.served,
            bind_marker=self.options.bind_marker,
            queue_of=self.cache.queue_of,
            prefer=self.placement,
        )

    def _release_bound(self, snapshot: Snapshot) -> None:
        """A member that is bound now counts in node_requested: its reservation goes."""
        for pod_key in self.ledger.pod_keys():
            pod = snapshot.pods.get(pod_key)
            if pod is None or pod.node is not None or pod.terminal:
                self.ledger.release(pod_key)

    def _deleted(self, key: str, snapshot: Snapshot) -> None:
        """A PodGroup deleted: everything decided for it goes."""
        self.forget_group(key, "its PodGroup was deleted", "podgroup_deleted")
        self.barrier.forget(key)
        self.admissions.deleted(key)
        self.bound_counts.pop(key, None)
        self.evictor.forget_whole_eviction(key)
        self.elastic.forget(key)
        self.applier.enqueue_logged.discard(key)
        if self.gang_metrics is not None:
            self.gang_metrics.forget(key)
        if not snapshot.pods_by_group.get(key):
            # Kept while the group has pods: pods created with their PodGroup may reach
            # filter (refused: "not found") before this cache sees the PodGroup, and are
            # parked until its admission releases them.
            self.release.refused.pop(key, None)

    def same_generation(self, group: PodGroupRecord) -> None:
        """A PodGroup deleted and created again under the same name is a new gang: nothing
        decided for the old one (admission, reservations, a committed bind barrier) carries
        over, even when the deletion fell between two passes."""
        if self.admissions.recreated(group.key, group.uid):
            self.forget_group(group.key, "its PodGroup was re-created", "podgroup_recreated")
            self.barrier.forget(group.key)

    def touch(self, key: str) -> None:
        """The extender itself changed something a decision about `key` reads."""
        self.admissions.touch(key)

    def forget_group(self, key: str, why: str, result: str = "gang_released") -> None:
        """Drop what was decided for the gang; its held binds fail with bind `result`."""
        self.admissions.forget(key, why)
        self.applier.enqueue_logged.discard(key)
        self.slots.forget_group(key)
        for pod_key in self.ledger.of_group(key):
            self.ledger.release(pod_key)
        self.barrier.release(key, why, result)
        gone = result in ("podgroup_deleted", "podgroup_recreated")
        self.writer.forget(key, gone=gone)
        self.backoffs.forget(key)
        self.reach.forget(key, deleted=gone)

    def _hold_ended(self, key: str, why: str, result: str) -> None:
        self.forget_group(key, why, result)
        self.poke()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a write in the background, kept (tests await them) until it is done."""
        task = asyncio.create_task(work)
        self._tasks.append(task)
        task.add_done_callback(self._tasks_done)

    def _tasks_done(self, task: asyncio.Task[Any]) -> None:
        with contextlib.suppress(ValueError):
            self._tasks.remove(task)
