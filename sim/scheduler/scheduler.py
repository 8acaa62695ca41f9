"""The kube-scheduler stand-in: one scheduling cycle at a time, extenders called as kube-scheduler
calls them (kube-scheduler's scheduling cycle, extenders after the in-tree filters).

Per pod: the nominated node first (after a preemption), else in-tree filters over a sample of
the nodes starting at a rotating offset (`percentageOfNodesToScore`), then each interested
extender's filter in order while nodes remain; no node → preemption (DefaultPreemption with the
extenders' preempt verb) and the pod is parked unschedulable with `PodScheduled=False` and a
`FailedScheduling` event; one node → taken; more → least-allocated score plus each extender's
prioritize × weight × 10, best total wins (ties at random). The pod is then assumed on its node
(its requests count for every later pod) and bound in a task of its own — by the binder extender
if one is interested, else by the default binder — while the next pod is scheduled. A failed
bind forgets the assumed pod and requeues it with backoff unless it turns out bound after all.

This module holds `Scheduler` itself (its state, start/stop and the loop); the informers'
picture of the cluster is in `sim.scheduler.cache`, the scheduling cycle in
`sim.scheduler.cycle`, the binding in `sim.scheduler.binding`, events and the PodScheduled
condition in `sim.scheduler.reporting`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import Any

from core.gc_pauses import freeze_on_growth
from core.kube.client import NODES, PODS, KubeClient
from core.kube.events import EventRecorder
from core.kube.informer import Informer
from sim.scheduler.binding import Binding
from sim.scheduler.cache import SchedulerCache, _NodeObject
from sim.scheduler.columns import NodeColumns
from sim.scheduler.config import SchedulerConfig
from sim.scheduler.cycle import FitError as FitError
from sim.scheduler.cycle import SchedulingCycle
from sim.scheduler.cycle import SchedulingError as SchedulingError
from sim.scheduler.cycle import Statuses as Statuses
from sim.scheduler.extenders import HTTPExtender
from sim.scheduler.framework import SchedNode, SchedPod
from sim.scheduler.preemption import Preemptor
from sim.scheduler.queue import SchedulingQueue
from sim.scheduler.reporting import Reporting
from sim.scheduler.volumes import PVCS, PVS, STORAGE_CLASSES, VolumeObject

log = logging.getLogger("vulcan.sim.scheduler")

ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class Scheduler(SchedulerCache, SchedulingCycle, Binding, Reporting):
    def __init__(
        self,
        client: KubeClient,
        config: SchedulerConfig,
        *,
        identity: str = "vulcan-sim-scheduler",
        seed: int | None = None,
        max_unschedulable: float = 300.0,
    ) -> None:
        self.client = client
        self.config = config
        self.identity = identity
        self.served = frozenset(config.scheduler_names)
        self.extenders = [HTTPExtender(e) for e in config.extenders]
        self.ignored_resources = config.ignored_resources
        self.queue = SchedulingQueue(
            initial_backoff=config.pod_initial_backoff,
            max_backoff=config.pod_max_backoff,
            max_unschedulable=max_unschedulable,
        )
        self.nodes: dict[str, SchedNode] = {}
        self.node_order: list[str] = []
        self.columns = NodeColumns()
        self.pods: dict[str, SchedPod] = {}
        self.assumed: dict[str, tuple[SchedPod, str]] = {}
        self.affinity_pods: dict[str, SchedPod] = {}  # pods with pod (anti-)affinity terms
        self.waiting_on_pods: set[str] = set()  # unschedulable pods with such terms or spread
        # VolumeBinding's and VolumeZone's view (the informers' item maps once started).
        self.claims: dict[str, VolumeObject] = {}
        self.volumes: dict[str, VolumeObject] = {}
        self.storage_classes: dict[str, VolumeObject] = {}
        self.next_start_node = 0
        self.random = random.Random(seed)
        self.recorders = {
            name: EventRecorder(client, name, identity) for name in config.scheduler_names
        }
        self.preemptor = Preemptor(self)
        self.scheduled = 0  # pods bound successfully
        self.attempts = 0
        self.unschedulable_attempts = 0
        self.error_attempts = 0
        self.synced = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._binds: set[asyncio.Task[None]] = set()
        self._writes: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        nodes = Informer(self.client, NODES, _NodeObject)
        nodes.add_handlers(self._node_added, self._node_updated, self._node_deleted)
        pods = Informer(self.client, PODS, SchedPod, field_selector=ACTIVE_PODS)
        pods.add_handlers(self._pod_added, self._pod_updated, self._pod_deleted)
        storage = []
        for resource, attribute in (
            (PVCS, "claims"),
            (PVS, "volumes"),
            (STORAGE_CLASSES, "storage_classes"),
        ):
            informer = Informer(self.client, resource, VolumeObject)
            # A claim bound or a volume made may let waiting pods fit (kube-scheduler's
            # PersistentVolumeClaim / PersistentVolume / StorageClass events).
            informer.add_handlers(
                lambda _r: self.queue.move_all(),
                lambda _o, _n: self.queue.move_all(),
                lambda _r: self.queue.move_all(),
            )
            setattr(self, attribute, informer.items)
            storage.append(informer)
        self._informers = [nodes, pods, *storage]
        self._tasks = [
            asyncio.create_task(i.run(), name=f"scheduler-{i.resource.plural}")
            for i in self._informers
        ]
        self._tasks += [
            asyncio.create_task(r.run(), name=f"scheduler-events-{name}")
            for name, r in self.recorders.items()
        ]
        await asyncio.gather(*(i.wait_synced() for i in self._informers))
        self.synced.set()
        self._tasks.append(asyncio.create_task(self._run(), name="scheduler-loop"))
        self._tasks.append(asyncio.create_task(self._flush_loop(), name="scheduler-flush"))
        # kube-scheduler's Go GC runs concurrently (sub-millisecond pauses); CPython's walks
        # every tracked object with the loop stopped. Keep it off the cached nodes and pods, or
        # the stand-in's pauses would show up as vulcan's latency.
        self._tasks.append(
            asyncio.create_task(
                freeze_on_growth(lambda: len(self.nodes) + len(self.pods)), name="scheduler-gc"
            )
        )
        log.info(
            "scheduler stand-in running",
            extra={"profiles": list(self.served), "extenders": len(self.extenders)},
        )

    def extender_latencies(self) -> dict[str, list[float]]:
        """Each extender verb's call latencies (seconds), all extenders together."""
        merged: dict[str, list[float]] = {}
        for extender in self.extenders:
            for verb, samples in extender.latencies.items():
                merged.setdefault(verb, []).extend(samples)
        return merged

    async def stop(self) -> None:
        self.queue.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for task in list(self._binds) + list(self._writes):
            task.cancel()
        await asyncio.gather(*self._binds, *self._writes, return_exceptions=True)
        for recorder in self.recorders.values():
            with contextlib.suppress(Exception):
                await recorder.close()
        for extender in self.extenders:
            await extender.close()

    async def wait_idle(self) -> None:
        """Until every bind started so far has finished (for tests and benchmarks)."""
        while self._binds:
            await asyncio.gather(*list(self._binds), return_exceptions=True)

    # ------------------------------------------------------------------ the loop

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(30.0)
            self.queue.flush_unschedulable()

    async def _run(self) -> None:
        while True:
            queued = await self.queue.pop()
            if queued is None:
                return
            try:
                await self.schedule_one(queued)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not stop the scheduler: log, back off, go on
                log.exception("scheduling attempt crashed", extra={"pod": queued.pod.key})
                self.queue.requeue_error(queued)
            # Without extenders a cycle never waits, and a full queue would starve the bind
            # tasks and the informers (kube-scheduler binds in goroutines beside the cycle).
            await asyncio.sleep(0)
