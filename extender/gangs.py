"""Gang scheduling in the extender: the state the scheduling cycle reads, and what applies its
decisions.

Every pass (`GangScheduler.run`, on every cache change with a 1 s floor) runs one cycle of the
conf's actions (`plugins.framework.cycle.run_once`, Volcano's runOnce: **enqueue** a vcjob's group
on its minResources, **allocate** a whole gang, **reclaim/preempt** whole units for it) over the
PodGroups in the session's order (`plugins.framework.traversal`), and applies each decision as it
comes (`GangScheduler.apply`): an admitted gang's slots go into the gang ledger, exclusively (the
PodGroup becomes Inqueue); evictions go to `extender.evictor`; admitted members kube-scheduler
parked are released (`extender.member_release`). The verbs answer kube-scheduler from that
state (`extender.gang_verbs.GangVerbs`, which holds it: filter steering, the bind barrier, the
preempt veto). PodGroup status is Volcano's (`plugins.model.podgroup_status`); every write goes
through `extender.gang_writer.GangWriter`. Decisions live in the API server (phase Inqueue,
pods bound): after a restart the ledger is rebuilt by planning again for Inqueue groups whose
members are not bound yet (shared/spec/gang-design.md §9.3).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any

from core.api import keys, markers
from core.cache import ClusterCache, Snapshot
from core.kube.client import KubeClient
from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from core.served import ServedPods
from extender.barrier import BindBarrier
from extender.elastic_growth import grow_elastic
from extender.evictor import Evictor
from extender.gang_events import BarrierEvents
from extender.gang_pass import PassHost
from extender.gang_quorum import BROKEN_TAIL, QuorumWatch
from extender.gang_writer import GangWriter
from extender.ledger import GangLedger
from extender.member_release import MemberRelease
from extender.metrics import GangMetrics
from extender.protocol import BindingArgs
from extender.queues import QueuePass, QueuePolicy
from extender.share_waiters import ShareWaiters
from extender.slots import SlotWatch
from plugins.actions.evictions import victim_units
from plugins.framework.config import default_config
from plugins.framework.cycle import run_once
from plugins.framework.extension_points import PassState
from plugins.framework.node_order import Framework
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy
from plugins.framework.traversal import AdmissionOrder
from plugins.model.placement import Prefer
from plugins.model.victims import VictimUnit

log = logging.getLogger("vulcan.extender.gang")

_ZERO = ResourceVector()


class GangScheduler:
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
        status_interval: float = 0.5,
        queue_policy: QueuePolicy | None = None,
        coalesce: float = 0.01,
        min_pass_interval: float = 0.0,
        plain_pod_delay: float = 0.0,
        bind_marker: str | None = None,
        observe_pass: Callable[[float], None] | None = None,
        gang_metrics: GangMetrics | None = None,
        event_qps: float = 0.0,
        event_burst: int = 100,
        pipelined_wait: float = 0.5,
        session: Policy | None = None,
        placement: Prefer | None = None,
        served: ServedPods | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # The conf's plugins and actions (Volcano's default conf when none is given): every
        # decision of a pass is the session's (`plugins.actions.allocate`), applied here.
        self.session = session or build_policy(default_config())
        # Without the conf's `gang` plugin a PodGroup is only enqueued (queue and overcommit
        # rules); its members are then placed one by one, with no whole-gang placement and no
        # bind barrier (Volcano without gang: jobs may end up half placed).
        self.gang_enabled = self.session.has("gang")
        self.cache = cache
        # How a gang is laid out: the conf's node order (`Framework.gang_placement`).
        self.placement: Prefer = placement or Framework(self.session).gang_placement
        self.pass_state = PassState()
        self.ledger = ledger
        # Admitted members refused in filter, moved back to kube-scheduler's active queue when
        # their slot is free (Volcano's pipelined tasks: room still held by terminating victims).
        self.slots = SlotWatch(cache, ledger)
        self.pipelined_wait = pipelined_wait
        self.client = client
        self.period = period
        self.coalesce = coalesce
        self.min_pass_interval = min_pass_interval
        # A pod in no group that took room or is new (a plain pod bound, a pod waiting for the
        # podgroup controller) changes no gang's own inputs, only its queue's numbers and its
        # node's room, which no pending decision waits on: its pass may wait this long, so
        # that at hundreds of plain pods a second the passes do not recompute the queues for
        # each (~15% of the extender's CPU per pod in bench/real_throughput.py). Every other
        # change (and room freed) still wakes the loop at once.
        self.plain_pod_delay = plain_pod_delay
        # The bind extender entry's managedResources marker (--bind-marker): kube-scheduler
        # sends vulcan only the binds of pods carrying it and binds every other pod itself
        # (DefaultBinder), past the gang barrier; filter refuses such members and the pass
        # does not admit their gangs (`unmarked_member`). None: every bind comes to vulcan.
        self.bind_marker = bind_marker
        # The pods kube-scheduler sends to vulcan (--served-scheduler-name, --filter-marker):
        # the only ones reclaim and preempt may take. None: every pod (a test harness).
        self.served = served or ServedPods.every()
        self._plain_change = False
        self._plain_timer: asyncio.TimerHandle | None = None
        self.observe_pass = observe_pass
        self.gang_metrics = gang_metrics
        self.barrier = BindBarrier(
            commit,
            default_timeout=gang_timeout,
            backoff=backoff,
            clock=clock,
            on_event=BarrierEvents(self),
        )
        self.backoff_reasons: dict[str, tuple[float | None, str]] = {}
        # Gangs whose enqueue was logged since their last admission: one line per decision,
        # not one per pass while the group waits for its pods.
        self.enqueue_logged: set[str] = set()
        self.admitted: set[str] = set()
        self.reasons: dict[str, str] = {}  # group -> why it is not admitted (for filter)
        self.queue_policy = queue_policy or QueuePolicy(self.session)
        self.queue_pass: QueuePass | None = None  # the queues as the last pass saw them
        self._generations: dict[str, str] = {}  # group key -> the UID decisions were made for
        # group -> the inputs of its last decision, when that decision cannot change unless
        # they do (see `schedule_pass`); job-order keys by group version; queue checks per pass.
        self.verdicts: dict[str, tuple[Any, ...]] = {}
        self.order = AdmissionOrder(cache.group_versions, self.session)
        # Per queue: its numbers when the last pass looked at it, and its groups whose last
        # decision may change without them (no verdict); groups changed by the extender itself.
        self.queue_seen: dict[str, tuple[Any, ...] | None] = {}
        self.unsettled: dict[str, set[str]] = {}
        self._touched: set[str] = set()
        # Per queue: how many passes found its pods or groups changed; the verdicts of enqueue
        # refusals kept on the queue (`Decision.queue_bound`) hold only within one count.
        # Plain pods (no group) change their queue's count through `_touched_queues`.
        self.queue_epochs: dict[str, int] = {}
        self.epoch_clock = itertools.count(1)  # never reused: a queue gone and back starts anew
        self._touched_queues: set[str] = set()
        # group -> its bound members counted once per group version (`GangVerbs.bind`).
        self.bound_counts: dict[str, tuple[Any, int, dict[str, int]]] = {}

        # group -> its elastic members (beyond its minimum) filter refused (their queue at its
        # share or capability, or no room): each pass gives one per gang a slot when its queue
        # may take it, evicting elastic work for it if needed (`extender.elastic_growth`).
        self.elastic_waiting: dict[str, set[str]] = {}
        # group -> its elastic members holding a slot the pass gave them (taken back when
        # the room went to another pod, `extender.elastic_growth`).
        self.elastic_slots: dict[str, set[str]] = {}
        # group -> what it was enqueued on the promise of evicting ("will preempt ..."), for
        # the debug view and `vulcan explain`.
        self.promises: dict[str, str] = {}
        # queue -> its starving gang: while it waits for the queue's share, the queue's later
        # gangs and elastic members wait for it (`plugins.actions.starvation`).
        self.starving: dict[str, str] = {}
        # queue -> since when it has had a starving gang (whichever): its hold phases count
        # from there, so a new starving gang (e.g. of a higher priority) does not start the
        # queue's hold over again (`plugins.actions.starvation.holds`).
        self.starving_since: dict[str, float] = {}
        # queue -> its gangs that wait for its share, and what they ask (lifted from its
        # `inqueue` in a backfill phase: `extender.share_waiters`).
        self.share_waiters = ShareWaiters()
        self._wake = asyncio.Event()
        self.writer = GangWriter(
            client, status_interval=status_interval, event_qps=event_qps, event_burst=event_burst
        )
        # Kept as attributes: the server flushes them, tests await them.
        self.status_writer = self.writer.status_writer
        self.recorder = self.writer.recorder
        self._tasks: list[asyncio.Task[Any]] = []
        self.release = MemberRelease(
            cache, self.slots, self.writer, self._spawn, writes=client is not None
        )
        # Applies evictions, and keeps the room being freed (Volcano's Releasing).
        self.evictor = Evictor(cache, ledger, self.writer, self._spawn, self.poke)
        # A committed gang that loses members returns to all-or-nothing (`extender.gang_events`).
        self.quorum = QuorumWatch(cache, self.barrier, self.evictor.why_evicted)
        # Every change the cache hears of (a node, a pod, a group) wakes the loop. Changes to
        # the ledger do not: they are the loop's own (admission), or a member's slot moving
        # within its admitted gang (filter), which no decision reads.
        cache.change_listeners.append(self._changed)
        cache.pod_listeners.append(self._pod_changed)
        # Every unit reclaim and preempt could evict, built once per state of the cluster
        # (`victims_for`): a pass asks for them for each waiting gang (the enqueue promise, the
        # allocate's room), and building them walks every pod: a third of the extender's CPU
        # in issue 31's soak. Any change the cache hears of (our own evictions included: the
        # cache shows their victims leaving at once) drops it.
        self._victims: tuple[int, list[VictimUnit]] | None = None

    def use_conf(self, session: Policy, placement: Prefer, queue_policy: QueuePolicy) -> None:
        """A reloaded scheduler conf (`extender.conf_reload`), taken between two passes (a pass
        never awaits). What the old conf decided is forgotten, so the next pass decides every
        group again; the ledger, held binds and admitted gangs stay."""
        self.session = session
        self.gang_enabled = session.has("gang")
        self.placement = placement
        self.queue_policy = queue_policy
        self.order = AdmissionOrder(self.cache.group_versions, session)
        self.verdicts.clear()
        self.queue_seen.clear()
        self.unsettled.clear()
        self.queue_epochs.clear()
        self.poke()

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

    def _changed(self) -> None:
        """A change the cache heard: wake the loop, or for a plain pod's change (noted by
        `_pod_changed` just before) once `plain_pod_delay` has passed. What may be evicted
        is built again either way (`victims_for`)."""
        self._victims = None
        if not self._plain_change:
            self._wake.set()
            return
        self._plain_change = False
        if self._plain_timer is None and not self._wake.is_set():
            loop = asyncio.get_running_loop()
            self._plain_timer = loop.call_later(self.plain_pod_delay, self._plain_due)

    def _plain_due(self) -> None:
        self._plain_timer = None
        self._wake.set()

    def _pod_changed(self, pod_key: str, pod: PodRecord | None, old: PodRecord | None) -> None:
        """A member bound (or gone, or finished) gives up its reservation the moment the cache
        counts it on its node: kept until the next pass, its room counted twice, and filter
        refused the gang's next member "no room" on a node that had it. A member lost by a
        committed gang may return it to all-or-nothing (`QuorumWatch`)."""
        self._plain_change = self.plain_pod_delay > 0 and _plain_change(pod, old)
        plain = pod if pod is not None else old
        if plain is not None and plain.group is None:
            queue = self.cache.queue_of(plain)
            if queue is not None:
                self._touched_queues.add(queue)
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
        last_pass = -math.inf
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.period)
            # While a gang's binds are held its members' events stream in and each would wake
            # a pass: a short pause lets a burst of them into one pass and keeps the loop free
            # for the filter and bind requests of the other members. Otherwise a wake after a
            # quiet spell is served at once (admission latency), but passes stay at least
            # `min_pass_interval` apart: with hundreds of pods bound a second every pod event
            # woke a pass that recomputed the same queues (a quarter of the extender's CPU at
            # 1,000 nodes); the events of that interval now share one pass.
            if self.barrier.holding():
                await asyncio.sleep(self.coalesce)
            else:
                early = last_pass + self.min_pass_interval - loop.time()
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
            if self.observe_pass is not None:
                self.observe_pass(time.perf_counter() - started)

    # ------------------------------------------------------------------ enqueue

    def schedule_pass(self) -> None:
        """One pass over every PodGroup in admission order. A group whose last decision can
        only change with its inputs — its PodGroup and pods (the cache's group version), whether
        it is admitted, what it holds in the ledger and, while it waits, its queue's numbers — is
        skipped while those are unchanged: with thousands of waiting groups a pass then costs
        what changed, not what exists. A group its full queue refuses at enqueue is kept until
        its queue's pods or groups change too (`Decision.queue_bound`). Refusals that depend on
        the rest of the cluster (the placement, the overcommit rule) or on time (backoff) are
        always decided again."""
        # The pass never awaits, so no event can change the cache under it: read it in place.
        snapshot = self.cache.live_view()
        self._release_bound(snapshot)
        self.release.release_due(self.admitted)
        touched = self.cache.take_dirty_groups() | self._touched
        self._touched = set()
        # A deleted group is touched by its deletion: only those need looking for.
        for key in touched:
            if key not in snapshot.podgroups:
                self.forget_group(key, "its PodGroup was deleted", "podgroup_deleted")
                self.barrier.forget(key)
                self._generations.pop(key, None)
                self.verdicts.pop(key, None)
                self.order.forget(key)
                self.bound_counts.pop(key, None)
                self.promises.pop(key, None)
                self.share_waiters.forget(key)
                if self.gang_metrics is not None:
                    self.gang_metrics.forget(key)
                if not snapshot.pods_by_group.get(key):
                    # Kept while the group has pods: pods created with their PodGroup may reach
                    # filter (refused: "not found") before this cache sees the PodGroup, and
                    # are parked until its admission releases them.
                    self.release.refused.pop(key, None)
                self.reasons.pop(key, None)
        self._touched.clear()  # what forget_group just noted is in `touched` already
        reserved_by_group = self.ledger.by_group()
        dirty_queues = {snapshot.podgroups[k].queue for k in touched if k in snapshot.podgroups}
        dirty_queues |= self._touched_queues
        self._touched_queues = set()
        # The one call into the policy for this pass: the cycle opens the session (the queues,
        # their plugin's share model), runs the conf's actions and gives back what it decided,
        # each decision applied by the host as it was taken.
        cycle = run_once(
            self.session,
            snapshot,
            host := PassHost(self, snapshot, reserved_by_group, dirty_queues),
            books=self.queue_policy.books,
            order=self.order,
            reserved_by_group=reserved_by_group,
            reserved_by_node=self.ledger.by_node,
            prefer=self.placement,
            touched=touched,
            now=time.time(),
        )
        queue_pass = self.queue_pass = cycle.queues
        self.pass_state = cycle.state
        for queue in host.visited:
            if queue not in self.starving:
                self.starving_since.pop(queue, None)
                self.share_waiters.clear(queue)
        for queue in list(self.queue_seen):
            if queue not in queue_pass.groups_by_queue:
                self.queue_seen.pop(queue, None)
                self.unsettled.pop(queue, None)
                self.queue_epochs.pop(queue, None)
                self.starving.pop(queue, None)
                self.starving_since.pop(queue, None)
                self.share_waiters.clear(queue)
        if self.elastic_waiting or self.elastic_slots:
            grow_elastic(self, snapshot)
        self.writer.queue_statuses(snapshot, queue_pass)

    def evicted_whole(self, units: list[VictimUnit], why: str) -> None:
        """A gang evicted whole is placed again as a new gang: all or nothing, through
        admission and the bind barrier's quorum (its members are made again by its job, or
        wait; none of them may bind on the strength of the evicted gang's admission)."""
        for unit in units:
            if unit.group is not None and not unit.elastic:
                # Broken now, as when a committed gang loses members (`QuorumWatch`): the
                # PodGroup and its members say GangBroken. (The pass used to re-adopt a victim
                # it met later in its order, so the pod deletions broke it a moment later;
                # the cycle settles adoption before its actions, whatever the queue order.)
                self.barrier.uncommit(
                    unit.group, f"gang {unit.group} is no longer whole: {why}: {BROKEN_TAIL}"
                )
                self.forget_group(unit.group, why)
                self.barrier.forget(unit.group)

    def unmarked_member(self, snapshot: Snapshot, key: str) -> str | None:
        """Why gang `key` may not be admitted while one of its members waiting for a node lacks
        the bind marker: filter refuses that member on every node, so admitting the gang
        would only hold room for it until the gang timeout, again after each backoff."""
        marker = self.bind_marker
        group = snapshot.podgroups.get(key)
        if marker is None or not self.gang_enabled or group is None or group.min_member <= 1:
            return None  # (a gang of minMember 1 needs no barrier: no member is refused)
        for pod_key in sorted(snapshot.pods_by_group.get(key, ())):
            pod = snapshot.pods.get(pod_key)
            if pod is None or pod.node is not None or pod.deleting or pod.terminal:
                continue
            why = markers.unmarked_member(
                key, group.min_member, pod_key, marker in pod.markers, marker
            )
            if why is not None:
                return why
        return None

    def victims_for(self, snapshot: Snapshot, key: str) -> list[VictimUnit]:
        """What reclaim and preempt may evict for group `key` (never pods being freed):
        `snapshot` is the cache's live view (a pass, filter), whose every change drops the
        units built for it."""
        memo = self._victims
        if memo is None or memo[0] != self.evictor.evictions:
            units = victim_units(
                snapshot,
                "",
                self.evictor.releasing,
                lambda pod: self.cache.queue_of(pod) or keys.DEFAULT_QUEUE,
                self.served,
            )
            memo = self._victims = (self.evictor.evictions, units)
        return [unit for unit in memo[1] if unit.group != key]

    def _release_bound(self, snapshot: Snapshot) -> None:
        """A member that is bound now counts in node_requested: its reservation goes."""
        for pod_key in self.ledger.pod_keys():
            pod = snapshot.pods.get(pod_key)
            if pod is None or pod.node is not None or pod.terminal:
                self.ledger.release(pod_key)

    def same_generation(self, group: PodGroupRecord) -> None:
        """A PodGroup deleted and created again under the same name is a new gang: nothing
        decided for the old one (admission, reservations, a committed bind barrier) carries
        over, even when the deletion fell between two passes."""
        known = self._generations.get(group.key)
        if known is not None and known != group.uid:
            self.forget_group(group.key, "its PodGroup was re-created", "podgroup_recreated")
            self.barrier.forget(group.key)
        self._generations[group.key] = group.uid

    def touch(self, key: str) -> None:
        """The extender itself changed something a decision about `key` reads."""
        self._touched.add(key)
        self.verdicts.pop(key, None)

    def forget_group(self, key: str, why: str, result: str = "gang_released") -> None:
        """Drop what was decided for the gang; its held binds fail with bind `result`."""
        self.touch(key)
        self.admitted.discard(key)
        self.enqueue_logged.discard(key)
        self.slots.forget_group(key)
        for pod_key in self.ledger.of_group(key):
            self.ledger.release(pod_key)
        self.barrier.release(key, why, result)
        self.writer.forget(key, gone=result in ("podgroup_deleted", "podgroup_recreated"))
        self.backoff_reasons.pop(key, None)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a write in the background, kept (tests await them) until it is done."""
        task = asyncio.create_task(work)
        self._tasks.append(task)
        task.add_done_callback(self._tasks_done)

    def _tasks_done(self, task: asyncio.Task[Any]) -> None:
        with contextlib.suppress(ValueError):
            self._tasks.remove(task)


def _plain_change(pod: PodRecord | None, old: PodRecord | None) -> bool:
    """A change of a pod in no group that frees no room: new, bound, or changed in place.
    A deletion, or a bound pod leaving its node, finishing or terminating, frees room a
    waiting gang may fit in, and is no plain change."""
    if pod is None or pod.group is not None or (old is not None and old.group is not None):
        return False
    if old is None or old.node is None or old.terminal:
        return True
    return pod.node == old.node and not pod.terminal and pod.deleting == old.deleting
