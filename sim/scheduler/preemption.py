"""kube-scheduler's DefaultPreemption plugin and the extenders' preempt verb, as the stand-in
needs them.

For a pod that fits nowhere: candidate nodes are those that failed only with `Unschedulable`
(never `...AndUnresolvable`); on each, the dry run removes every lower-priority pod, checks the
in-tree filters (only those: the known gap of kube-scheduler, k/k#94418) and then reprieves as
many victims as possible, highest priority first. The candidates go through each interested
extender's preempt verb, whose answer replaces them (an empty answer vetoes preemption). The
best candidate (fewest PDB violations, then lowest highest-victim priority, lowest priority sum,
fewest victims) loses its victims (DisruptionTarget condition, then a graceful delete) and the
pod is nominated to the node. PodDisruptionBudgets are not modelled (violations are 0).
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core.kube.client import PODS, STRATEGIC_MERGE_PATCH, ApiError
from core.kube.events import NORMAL
from sim.scheduler.extenders import ExtenderError
from sim.scheduler.framework import UNSCHEDULABLE, SchedNode, SchedPod, run_filters

if TYPE_CHECKING:
    from sim.scheduler.scheduler import FitError, Scheduler

log = logging.getLogger("vulcan.sim.scheduler")

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


class _DryRunNode(SchedNode):
    """A node's accounting without some pods (no informer object behind it)."""

    def __init__(self, node: SchedNode) -> None:
        self.name = node.name
        self.raw = node.raw
        self.labels = node.labels
        self.taints = node.taints
        self.unschedulable = node.unschedulable
        self.allocatable = node.allocatable
        self.alloc = node.alloc
        self.requested = node.requested
        self.nonzero_requested = node.nonzero_requested
        self.used = node.used  # replaced, never mutated, by add/remove
        self.nz_cpu = node.nz_cpu
        self.nz_memory = node.nz_memory
        self.pod_keys = set(node.pod_keys)
        self.ports = node.ports  # replaced, never mutated, by add/remove
        self.on_change = None  # a trial: the scheduler's columns never hear of it


class Preemptor:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def _eligible(self, pod: SchedPod) -> str:
        """Empty if the pod may preempt, else why not (PodEligibleToPreemptOthers)."""
        if pod.preemption_policy == "Never":
            return "not eligible due to preemptionPolicy=Never."
        if pod.nominated_node is not None:
            for other in self.scheduler.pods_on(pod.nominated_node):
                if other.deleting and other.priority < pod.priority:
                    return "not eligible due to a terminating pod on the nominated node."
        return ""

    def _dry_run(self, pod: SchedPod, node: SchedNode) -> list[SchedPod] | None:
        """The victims on `node` that make `pod` fit, or None if no set of victims does."""
        ignored = self.scheduler.ignored_resources
        lower = [
            p
            for p in self.scheduler.pods_on(node.name)
            if p.priority < pod.priority and not p.deleting
        ]
        trial = _DryRunNode(node)
        for victim in lower:
            trial.remove(victim)
        if run_filters(pod, trial, ignored) is not None:
            return None
        victims: list[SchedPod] = []
        # Reprieve the most important pods first; whoever no longer fits stays a victim.
        for candidate in sorted(lower, key=lambda p: (-p.priority, p.created)):
            trial.add(candidate)
            if run_filters(pod, trial, ignored) is not None:
                trial.remove(candidate)
                victims.append(candidate)
        return victims

    async def post_filter(self, pod: SchedPod, fit: FitError) -> tuple[str, str | None]:
        """(post-filter message for the FitError, node the pod is nominated to or None)."""
        why_not = self._eligible(pod)
        if why_not:
            return f"preemption: {why_not}", None
        reasons: Counter[str] = Counter()
        candidates: dict[str, list[SchedPod]] = {}
        nodes = self.scheduler.nodes
        # Only nodes that failed with plain Unschedulable may help; every other node (another
        # code, or no status at all) is counted without being visited, as NodesForStatusCode
        # does since the NodeToStatus refactor: a pod refused everywhere as unresolvable (a
        # gang member waiting for admission) costs no walk over every node.
        helpful = {
            name
            for name, status in fit.statuses.items()
            if status[0] == UNSCHEDULABLE and name in nodes
        }
        order = self.scheduler.node_order
        if len(order) > len(helpful):
            reasons[NOT_HELPFUL] = len(order) - len(helpful)
        for name in order if helpful else ():
            if name not in helpful:
                continue
            victims = self._dry_run(pod, nodes[name])
            if not victims:
                reasons[NO_VICTIMS] += 1
                continue
            candidates[name] = victims
        if candidates:
            try:
                candidates = await self._call_extenders(pod, candidates)
            except ExtenderError as exc:
                return f"preemption: {exc}", None
        if not candidates:
            histogram = ", ".join(sorted(f"{n} {r}" for r, n in reasons.items()))
            message = f"preemption: 0/{fit.num_all_nodes} nodes are available"
            return (f"{message}: {histogram}" if histogram else message), None
        node = min(
            candidates,
            key=lambda n: (
                max(v.priority for v in candidates[n]),
                sum(v.priority for v in candidates[n]),
                len(candidates[n]),
            ),
        )
        await self._evict(pod, node, candidates[node])
        return "", node

    async def _call_extenders(
        self, pod: SchedPod, candidates: dict[str, list[SchedPod]]
    ) -> dict[str, list[SchedPod]]:
        for extender in self.scheduler.extenders:
            if not candidates:
                break
            if not extender.config.preempt_verb or not extender.is_interested(pod):
                continue
            try:
                answer = await extender.preempt(
                    pod, {node: (victims, 0) for node, victims in candidates.items()}
                )
            except ExtenderError:
                if extender.config.ignorable:
                    continue
                raise
            replaced: dict[str, list[SchedPod]] = {}
            for node, (uids, _) in answer.items():
                if node not in self.scheduler.nodes:
                    raise ExtenderError(
                        f"extender {extender.name} claims to preempt on node "
                        f"{node} but the node is not found"
                    )
                on_node = {p.uid: p for p in self.scheduler.pods_on(node)}
                chosen = []
                for uid in uids:
                    victim = on_node.get(uid)
                    if victim is None:
                        raise ExtenderError(
                            f"extender {extender.name} claims to preempt pod (UID: {uid}) on "
                            f"node {node}, but the pod is not found on that node"
                        )
                    chosen.append(victim)
                if not chosen:
                    raise ExtenderError(f"expected at least one victim pod on node {node}")
                replaced[node] = chosen
            candidates = replaced
        return candidates

    async def _evict(self, pod: SchedPod, node: str, victims: list[SchedPod]) -> None:
        client = self.scheduler.client
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for victim in victims:
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": f"{pod.scheduler_name}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": now,
            }
            try:
                await client.patch(
                    PODS,
                    victim.name,
                    {"status": {"conditions": [condition]}},
                    victim.namespace,
                    subresource="status",
                    content_type=STRATEGIC_MERGE_PATCH,
                )
                await client.delete(PODS, victim.name, victim.namespace, uid=victim.uid)
            except ApiError as exc:
                if not exc.not_found:
                    log.warning(
                        "preemption could not delete a victim",
                        extra={"victim": victim.key, "error": str(exc)},
                    )
                continue
            self.scheduler._recorder(victim).record(
                victim.reference(),
                NORMAL,
                "Preempted",
                f"Preempted by pod {pod.uid} on node {node}",
                action="Preempting",
                related=pod.reference(),
            )
