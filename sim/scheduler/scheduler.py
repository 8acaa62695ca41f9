"""The kube-scheduler stand-in: one scheduling cycle at a time, extenders called as kube-scheduler
calls them (shared/spec/extender-protocol.md §5).

Per pod: the nominated node first (after a preemption), else in-tree filters over a sample of
the nodes starting at a rotating offset (`percentageOfNodesToScore`), then each interested
extender's filter in order while nodes remain; no node → preemption (DefaultPreemption with the
extenders' preempt verb) and the pod is parked unschedulable with `PodScheduled=False` and a
`FailedScheduling` event; one node → taken; more → least-allocated score plus each extender's
prioritize × weight × 10, best total wins (ties at random). The pod is then assumed on its node
(its requests count for every later pod) and bound in a task of its own — by the binder extender
if one is interested, else by the default binder — while the next pod is scheduled. A failed
bind forgets the assumed pod and requeues it with backoff unless it turns out bound after all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from core.gc_pauses import freeze_on_growth
from core.kube.client import NODES, PODS, STRATEGIC_MERGE_PATCH, ApiError, KubeClient
from core.kube.events import NORMAL, WARNING, EventRecorder
from core.kube.informer import Informer
from sim.scheduler.columns import NodeColumns
from sim.scheduler.config import SchedulerConfig
from sim.scheduler.extenders import ExtenderError, HTTPExtender
from sim.scheduler.framework import (
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    SchedNode,
    SchedPod,
    fit_error_message,
    fits,
    least_allocated,
    num_feasible_nodes_to_find,
    run_filters,
)
from sim.scheduler.preemption import Preemptor
from sim.scheduler.queue import QueuedPod, SchedulingQueue

log = logging.getLogger("vulcan.sim.scheduler")

ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
Statuses = dict[str, tuple[str, list[str]]]


class _NodeObject:
    """Informer record for nodes: the raw object (SchedNode keeps the accounting)."""

    __slots__ = ("key", "obj", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.key: str = obj["metadata"]["name"]
        self.rv: str = obj["metadata"].get("resourceVersion", "")


class SchedulingError(Exception):
    """An attempt that failed with an error (not "unschedulable"): back off and retry."""


class FitError(Exception):
    def __init__(self, num_all_nodes: int, statuses: Statuses) -> None:
        super().__init__("no feasible node")
        self.num_all_nodes = num_all_nodes
        self.statuses = statuses


class Scheduler:
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
        self._informers = [nodes, pods]
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

    # ------------------------------------------------------------------ informer handlers

    def _node_added(self, record: _NodeObject) -> None:
        node = self.nodes.get(record.key)
        if node is None:
            node = self.nodes[record.key] = SchedNode(record.obj)
            node.on_change = self.columns.mark
            self.node_order.append(record.key)
            self.columns.reset()
            for pod in self.pods.values():  # pods seen before their node
                if pod.node == record.key:
                    node.add(pod)
        else:
            node.update(record.obj)
        self.queue.move_all()

    def _node_updated(self, old: _NodeObject, new: _NodeObject) -> None:
        node = self.nodes.get(new.key)
        if node is None:
            self._node_added(new)
            return
        before = (node.allocatable, node.labels, node.taints, node.unschedulable)
        node.update(new.obj)
        if before != (node.allocatable, node.labels, node.taints, node.unschedulable):
            self.queue.move_all()

    def _node_deleted(self, record: _NodeObject) -> None:
        if self.nodes.pop(record.key, None) is not None:
            self.node_order.remove(record.key)
            self.columns.reset()

    def _pod_added(self, pod: SchedPod) -> None:
        self._pod_changed(None, pod)

    def _pod_updated(self, old: SchedPod, new: SchedPod) -> None:
        self._pod_changed(old, new)

    def _pod_changed(self, old: SchedPod | None, pod: SchedPod) -> None:
        previous = self.pods.get(pod.key)
        self._unaccount(pod.key, previous)
        self.pods[pod.key] = pod
        if pod.node is not None:
            self.assumed.pop(pod.key, None)
            node = self.nodes.get(pod.node)
            if node is not None:
                node.add(pod)
            self.queue.delete(pod.key)
            return
        if pod.key in self.assumed:
            # Binding in flight: keep the assumption (the pod is no longer queued).
            assumed_node = self.nodes.get(self.assumed[pod.key][1])
            if assumed_node is not None:
                assumed_node.add(pod)
            self.assumed[pod.key] = (pod, self.assumed[pod.key][1])
            return
        if pod.scheduler_name not in self.served or pod.deleting or pod.gated:
            self.queue.delete(pod.key)
            return
        if old is None or self.queue.location(pod.key) is None:
            self.queue.add(pod)
        else:
            self.queue.update(pod, relevant=old.signature != pod.signature)

    def _pod_deleted(self, pod: SchedPod) -> None:
        previous = self.pods.pop(pod.key, None)
        was_assigned = previous is not None and (previous.node or pod.key in self.assumed)
        self._unaccount(pod.key, previous)
        self.assumed.pop(pod.key, None)
        self.queue.delete(pod.key)
        if was_assigned:
            self.queue.move_all()  # AssignedPodDelete: its room may fit a waiting pod

    def _unaccount(self, key: str, previous: SchedPod | None) -> None:
        if previous is not None and previous.node is not None:
            node = self.nodes.get(previous.node)
            if node is not None:
                node.remove(previous)
        assumed = self.assumed.get(key)
        if assumed is not None:
            node = self.nodes.get(assumed[1])
            if node is not None:
                node.remove(assumed[0])

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

    async def schedule_one(self, queued: QueuedPod) -> None:
        cycle = self.queue.scheduling_cycle
        pod = self.pods.get(queued.pod.key)
        if pod is None or pod.node is not None or pod.uid != queued.pod.uid or pod.deleting:
            self.queue.done(queued.pod.key)
            return
        queued.pod = pod
        self.attempts += 1
        try:
            node = await self._select_node(pod)
        except FitError as fit:
            self.unschedulable_attempts += 1
            post_filter, nominated = await self.preemptor.post_filter(pod, fit)
            message = fit_error_message(fit.num_all_nodes, fit.statuses, post_filter)
            self._record_failure(pod, "Unschedulable", message, nominated)
            self.queue.requeue_unschedulable(queued, cycle)
            return
        except SchedulingError as exc:
            self.error_attempts += 1
            self._record_failure(pod, "SchedulerError", str(exc), None)
            self.queue.requeue_error(queued)
            return
        # Assume: the pod's requests count on the node from now on.
        self.assumed[pod.key] = (pod, node.name)
        node.add(pod)
        self.queue.done(pod.key)
        task = asyncio.create_task(self._bind(queued, pod, node.name), name=f"bind-{pod.key}")
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)

    async def _select_node(self, pod: SchedPod) -> SchedNode:
        ignored = self.ignored_resources
        if pod.nominated_node is not None:
            node = self.nodes.get(pod.nominated_node)
            if node is not None and run_filters(pod, node, ignored) is None:
                passing, _ = await self._extender_filter(pod, [node])
                if passing:
                    return passing[0]
        total = len(self.node_order)
        if total == 0:
            raise FitError(0, {})
        to_find = num_feasible_nodes_to_find(self.config.percentage_for(pod.scheduler_name), total)
        start = self.next_start_node % total
        scan = None
        if pod.placeable_anywhere:
            scan = self.columns.scan(
                pod,
                self.node_order,
                self.nodes,
                start,
                to_find,
                ignored,
                lambda p, n: run_filters(p, n, ignored) is None,
            )
        if scan is None:
            feasible, processed, missed = self._scan_nodes(pod, start, to_find)
        else:
            feasible, processed, missed = scan
        self.next_start_node = (start + processed) % total
        statuses: Statuses = {}
        if feasible:
            feasible, statuses = await self._extender_filter(pod, feasible)
        if not feasible:
            # The in-tree reasons serve only the FitError: worked out for the nodes that
            # failed, now that one is raised.
            for name in missed:
                failure = run_filters(pod, self.nodes[name], ignored)
                if failure is not None:
                    statuses[name] = (failure[0], failure[1])
            raise FitError(total, statuses)
        if len(feasible) == 1:
            return feasible[0]
        return await self._prioritize(pod, feasible)

    def _scan_nodes(
        self, pod: SchedPod, start: int, to_find: int
    ) -> tuple[list[SchedNode], int, list[str]]:
        """The filter loop node by node, round-robin from `start`: (the first `to_find` nodes
        that pass the in-tree filters, how many nodes were looked at, the names of those that
        failed). `NodeColumns.scan` gives the same answer faster when it can."""
        ignored = self.ignored_resources
        total = len(self.node_order)
        order = self.node_order
        nodes = self.nodes
        feasible: list[SchedNode] = []
        missed: list[str] = []
        processed = 0
        anywhere = pod.placeable_anywhere
        for i in range(total):
            node = nodes[order[(start + i) % total]]
            processed += 1
            if anywhere and node.open and fits(pod, node, ignored):
                # Only NodeResourcesFit could have failed here, and it did not: the in-tree
                # filters pass without running each one (the reasons are only for failures).
                feasible.append(node)
                if len(feasible) >= to_find:
                    break
                continue
            if run_filters(pod, node, ignored) is None:
                feasible.append(node)
                if len(feasible) >= to_find:
                    break
            else:
                missed.append(node.name)
        return feasible, processed, missed

    async def _extender_filter(
        self, pod: SchedPod, nodes: list[SchedNode]
    ) -> tuple[list[SchedNode], Statuses]:
        answers: list[tuple[dict[str, str], dict[str, str]]] = []
        for extender in self.extenders:
            if not nodes:
                break
            if not extender.config.filter_verb or not extender.is_interested(pod):
                continue
            try:
                passing, failed, unresolvable = await extender.filter(pod, nodes)
            except ExtenderError as exc:
                if extender.config.ignorable:
                    log.info("skipping ignorable extender", extra={"error": str(exc)})
                    continue
                raise SchedulingError(str(exc)) from exc
            answers.append((failed, unresolvable))
            nodes = passing
        statuses: Statuses = {}
        if nodes:
            # Statuses only ever serve a FitError; with a node left there is none, so the
            # (often hundreds of) reasons are not turned into statuses for nothing.
            return nodes, statuses
        for failed, unresolvable in answers:
            for name, reason in unresolvable.items():
                statuses[name] = (UNRESOLVABLE, [reason])
            for name, reason in failed.items():
                if name not in unresolvable:
                    statuses[name] = (UNSCHEDULABLE, [reason])
        return nodes, statuses

    async def _prioritize(self, pod: SchedPod, nodes: list[SchedNode]) -> SchedNode:
        totals = {node.name: least_allocated(pod, node) for node in nodes}
        interested = [
            e for e in self.extenders if e.config.prioritize_verb and e.is_interested(pod)
        ]
        if interested:
            results = await asyncio.gather(
                *(e.prioritize(pod, nodes) for e in interested), return_exceptions=True
            )
            for extender, result in zip(interested, results, strict=True):
                if isinstance(result, BaseException):
                    log.debug("prioritize error ignored", extra={"error": str(result)})
                    continue  # prioritize errors are always swallowed
                scale = extender.config.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
                for name, score in result.items():
                    if name in totals:
                        totals[name] += score * scale
        # Highest total wins; ties broken uniformly at random (reservoir sampling, as Go).
        best: SchedNode | None = None
        best_score = None
        ties = 0
        for node in nodes:
            score = totals[node.name]
            if best_score is None or score > best_score:
                best, best_score, ties = node, score, 1
            elif score == best_score:
                ties += 1
                if self.random.randrange(ties) == 0:
                    best = node
        assert best is not None
        return best

    # ------------------------------------------------------------------ binding

    async def _bind(self, queued: QueuedPod, pod: SchedPod, node: str) -> None:
        binder = next((e for e in self.extenders if e.is_binder() and e.is_interested(pod)), None)
        try:
            if binder is not None:
                await binder.bind(pod, node)
            else:
                await self.client.bind_pod(pod.namespace, pod.name, node, uid=pod.uid)
        except (ExtenderError, ApiError) as exc:
            await self._bind_failed(queued, pod, node, exc)
            return
        self.scheduled += 1
        self._recorder(pod).record(
            pod.reference(),
            NORMAL,
            "Scheduled",
            f"Successfully assigned {pod.key} to {node}",
            action="Binding",
        )

    async def _bind_failed(
        self, queued: QueuedPod, pod: SchedPod, node: str, exc: Exception
    ) -> None:
        self.error_attempts += 1
        # ForgetPod: release the assumed capacity, then let waiting pods try again.
        assumed = self.assumed.pop(pod.key, None)
        if assumed is not None:
            target = self.nodes.get(assumed[1])
            if target is not None:
                target.remove(assumed[0])
        self.queue.move_all()
        message = (
            f'running Bind plugin "DefaultBinder": {exc}' if isinstance(exc, ApiError) else str(exc)
        )
        self._record_failure(pod, "SchedulerError", message, None)
        # Re-read the pod: bound after all (a late answer) -> not requeued; gone -> forgotten.
        try:
            live = await self.client.get(PODS, pod.name, pod.namespace)
        except ApiError as err:
            if err.not_found:
                return
            live = None
        if live is not None:
            if (live.get("spec") or {}).get("nodeName"):
                return
            if (live.get("metadata") or {}).get("uid") != pod.uid:
                return
        current = self.pods.get(pod.key)
        if current is not None and current.node is None and current.uid == pod.uid:
            queued.pod = current
            self.queue.requeue_error(queued)

    # ------------------------------------------------------------------ reporting

    def _recorder(self, pod: SchedPod) -> EventRecorder:
        return self.recorders.get(pod.scheduler_name) or next(iter(self.recorders.values()))

    def _record_failure(
        self, pod: SchedPod, reason: str, message: str, nominated: str | None
    ) -> None:
        self._recorder(pod).record(
            pod.reference(), WARNING, "FailedScheduling", message, action="Scheduling"
        )
        task = asyncio.create_task(self._write_condition(pod, reason, message, nominated))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write_condition(
        self, pod: SchedPod, reason: str, message: str, nominated: str | None
    ) -> None:
        """PodScheduled=False with the reason (strategic merge: conditions merge by type)."""
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if not _condition_changed(pod.raw, condition) and nominated is None:
            return
        status: dict[str, Any] = {"conditions": [condition]}
        if nominated is not None:
            status["nominatedNodeName"] = nominated
        patch = {"metadata": {"uid": pod.uid}, "status": status}
        try:
            await self.client.patch(
                PODS,
                pod.name,
                patch,
                pod.namespace,
                subresource="status",
                content_type=STRATEGIC_MERGE_PATCH,
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                log.warning(
                    "could not update pod status", extra={"pod": pod.key, "error": str(exc)}
                )

    def pods_on(self, node: str) -> Sequence[SchedPod]:
        target = self.nodes.get(node)
        if target is None:
            return ()
        found = []
        for key in target.pod_keys:
            pod = self.pods.get(key)
            if pod is not None and pod.node == node:
                found.append(pod)
        return found


def _condition_changed(raw: dict[str, Any] | None, condition: dict[str, Any]) -> bool:
    """kube-scheduler skips the write when status, reason and message are unchanged."""
    if raw is None:
        return True
    for existing in (raw.get("status") or {}).get("conditions") or ():
        if existing.get("type") == "PodScheduled":
            return any(existing.get(k) != condition[k] for k in ("status", "reason", "message"))
    return True
