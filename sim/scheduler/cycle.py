"""The scheduling cycle of the stand-in: one pod at a time, the nominated node first, else
the in-tree filters over a sample of the nodes, the extenders' filters, and the scores
(least-allocated plus the extenders' prioritize); no node leads to preemption and a
FailedScheduling report, a node to the pod being assumed there and its bind started.

Separate from the informers' picture of the cluster (`sim.scheduler.cache`) and from what
follows a decision (`sim.scheduler.binding`, `sim.scheduler.reporting`); `Scheduler`
(`sim.scheduler.scheduler`) combines them and runs the loop that calls `schedule_one`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterator
from typing import TYPE_CHECKING

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
from sim.scheduler.placement import Placement, needs_placement
from sim.scheduler.queue import QueuedPod
from sim.scheduler.volumes import PreFilterError, VolumeCheck, VolumeObject

if TYPE_CHECKING:
    from sim.scheduler.columns import NodeColumns
    from sim.scheduler.config import SchedulerConfig
    from sim.scheduler.preemption import Preemptor
    from sim.scheduler.queue import SchedulingQueue

log = logging.getLogger("vulcan.sim.scheduler")

Statuses = dict[str, tuple[str, list[str]]]


class SchedulingError(Exception):
    """An attempt that failed with an error (not "unschedulable"): back off and retry."""


class FitError(Exception):
    def __init__(self, num_all_nodes: int, statuses: Statuses, pre_filter: str = "") -> None:
        super().__init__("no feasible node")
        self.num_all_nodes = num_all_nodes
        self.statuses = statuses
        self.pre_filter = pre_filter  # a PreFilter's rejection, which stands for every node


class SchedulingCycle:
    """`Scheduler.schedule_one` and the node selection it runs."""

    # Provided by Scheduler.
    config: SchedulerConfig
    extenders: list[HTTPExtender]
    ignored_resources: frozenset[str]
    queue: SchedulingQueue
    nodes: dict[str, SchedNode]
    node_order: list[str]
    columns: NodeColumns
    pods: dict[str, SchedPod]
    assumed: dict[str, tuple[SchedPod, str]]
    affinity_pods: dict[str, SchedPod]
    waiting_on_pods: set[str]
    claims: dict[str, VolumeObject]
    volumes: dict[str, VolumeObject]
    storage_classes: dict[str, VolumeObject]
    next_start_node: int
    random: random.Random
    preemptor: Preemptor
    attempts: int
    unschedulable_attempts: int
    error_attempts: int
    _binds: set[asyncio.Task[None]]

    if TYPE_CHECKING:
        # Provided by Binding and Reporting (declared for the type checker only, so that these
        # never shadow the real methods).
        async def _bind(self, queued: QueuedPod, pod: SchedPod, node: str) -> None: ...

        def _record_failure(
            self, pod: SchedPod, reason: str, message: str, nominated: str | None
        ) -> None: ...

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
            message = fit_error_message(
                fit.num_all_nodes, fit.statuses, post_filter, fit.pre_filter
            )
            self._record_failure(pod, "Unschedulable", message, nominated)
            if pod.spread or pod.pod_affinity is not None:
                self.waiting_on_pods.add(pod.key)
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
        if pod.pod_affinity is not None:
            self.affinity_pods[pod.key] = pod
        self.queue.done(pod.key)
        task = asyncio.create_task(self._bind(queued, pod, node.name), name=f"bind-{pod.key}")
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)

    def placed_pods(self) -> Iterator[tuple[SchedPod, SchedNode]]:
        """Every pod on a node, bound or assumed, with its node."""
        pods = self.pods
        for node in self.nodes.values():
            for key in node.pod_keys:
                pod = pods.get(key)
                if pod is not None:
                    yield pod, node

    def affinity_holders(self) -> Iterator[tuple[SchedPod, SchedNode]]:
        """The placed pods that carry pod (anti-)affinity terms, with their nodes."""
        for key, pod in self.affinity_pods.items():
            if self.pods.get(key) is not pod:
                continue
            name = pod.node or self.assumed.get(key, (None, ""))[1]
            node = self.nodes.get(name)
            if node is not None and key in node.pod_keys:
                yield pod, node

    def placement_for(self, pod: SchedPod) -> Placement | None:
        """PodTopologySpread's and InterPodAffinity's PreFilter, when either has work."""
        if not needs_placement(pod, any(True for _ in self.affinity_holders())):
            return None
        return Placement.build(pod, self.nodes, self.placed_pods(), self.affinity_holders())

    def _judge(
        self,
        pod: SchedPod,
        node: SchedNode,
        placement: Placement | None,
        volumes: VolumeCheck | None = None,
    ) -> tuple[str, list[str]] | None:
        failure = run_filters(pod, node, self.ignored_resources)
        if failure is None and volumes is not None:
            failure = volumes.filter(node)
        if failure is None and placement is not None:
            failure = placement.filter(node)
        return failure

    async def _select_node(self, pod: SchedPod) -> SchedNode:
        ignored = self.ignored_resources
        try:
            volumes = VolumeCheck.build(pod, self.claims, self.volumes, self.storage_classes)
        except PreFilterError as exc:
            raise FitError(len(self.node_order), {}, exc.reason) from None
        placement = self.placement_for(pod)
        if pod.nominated_node is not None:
            node = self.nodes.get(pod.nominated_node)
            if node is not None and self._judge(pod, node, placement, volumes) is None:
                passing, _ = await self._extender_filter(pod, [node])
                if passing:
                    return passing[0]
        total = len(self.node_order)
        if total == 0:
            raise FitError(0, {})
        to_find = num_feasible_nodes_to_find(self.config.percentage_for(pod.scheduler_name), total)
        start = self.next_start_node % total
        scan = None
        if pod.placeable_anywhere and placement is None:
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
            feasible, processed, missed = self._scan_nodes(pod, start, to_find, placement, volumes)
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
                failure = self._judge(pod, self.nodes[name], placement, volumes)
                if failure is not None:
                    statuses[name] = (failure[0], failure[1])
            raise FitError(total, statuses)
        if len(feasible) == 1:
            return feasible[0]
        return await self._prioritize(pod, feasible, placement)

    def _scan_nodes(
        self,
        pod: SchedPod,
        start: int,
        to_find: int,
        placement: Placement | None = None,
        volumes: VolumeCheck | None = None,
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
        anywhere = pod.placeable_anywhere and placement is None
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
            if self._judge(pod, node, placement, volumes) is None:
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

    async def _prioritize(
        self, pod: SchedPod, nodes: list[SchedNode], placement: Placement | None = None
    ) -> SchedNode:
        totals = {node.name: least_allocated(pod, node) for node in nodes}
        if placement is not None:
            for name, score in placement.scores(nodes, self.nodes).items():
                totals[name] += score
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
