"""The soak's eyes: informers (list + watch) on the API server for pods, PodGroups, queues,
nodes, Volcano Jobs, HyperNodes and Events, feeding the invariant checker and the tally of
what happened. Nothing is read from the extender's or the controllers' memory."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.soak_checker import Checker
from bench.soak_model import (
    Job,
    Node,
    Pod,
    decode_group,
    decode_hypernode,
    decode_job,
    decode_node,
    decode_pod,
    decode_queue,
)
from core.kube.client import (
    EVENTS,
    HYPERNODES,
    NODES,
    PODGROUPS,
    PODS,
    QUEUES,
    VCJOBS,
    KubeClient,
)
from core.kube.informer import Informer

EVICTION_REASONS = ("Preempted", "TaintManagerEviction", "Evicted")
# PodGroup events told in a gang's history (the extender's decisions about it).
GROUP_REASONS = (
    "Admitted",
    "Reclaimed",
    "Preempted",
    "Reclaiming",
    "Preempting",
    "GangCommitted",
    "GangTimedOut",
    "GangReleased",
    "GangCommitFailed",
)


@dataclass(slots=True)
class EventRecord:
    key: str
    rv: str
    uid: str
    kind: str  # of the regarding object
    name: str  # namespace/name of the regarding object
    target_uid: str
    reason: str
    note: str
    count: int
    at: float = 0.0  # when it happened (its eventTime, epoch seconds; 0: not said)


def _epoch(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return 0.0


def decode_event(obj: dict[str, Any]) -> EventRecord:
    meta = obj.get("metadata") or {}
    regarding = obj.get("regarding") or {}
    series = obj.get("series") or {}
    return EventRecord(
        key=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        rv=meta.get("resourceVersion", ""),
        uid=meta.get("uid", ""),
        kind=regarding.get("kind", ""),
        name=f"{regarding.get('namespace', '')}/{regarding.get('name', '')}",
        target_uid=regarding.get("uid", ""),
        reason=obj.get("reason", ""),
        note=obj.get("note", ""),
        count=int(series.get("count") or obj.get("deprecatedCount") or 1),
        at=_epoch(obj.get("eventTime") or meta.get("creationTimestamp")),
    )


@dataclass
class Tally:
    """What happened, as the API server tells it (counted from watches)."""

    evicted: dict[str, str] = field(default_factory=dict)  # pod uid -> reason (first seen)
    reclaimed_pods: set[str] = field(default_factory=set)
    preempted_pods: set[str] = field(default_factory=set)
    reclaim_decisions: int = 0
    gang_timeouts: int = 0
    preempt_decisions: int = 0
    job_retries: dict[str, int] = field(default_factory=dict)  # job uid -> retryCount
    pod_restarts: dict[str, int] = field(default_factory=dict)  # pod uid -> restarts
    jobs_completed: set[str] = field(default_factory=set)
    jobs_failed: set[str] = field(default_factory=set)
    gone: dict[str, float] = field(default_factory=dict)  # key of a deleted object -> when
    last_state: dict[str, str] = field(default_factory=dict)  # deleted pod uid -> as last seen
    node_changes: list[tuple[float, str, str]] = field(default_factory=list)  # (t, node, state)
    _node_state: dict[str, str] = field(default_factory=dict)
    _seen_events: dict[str, int] = field(default_factory=dict)

    def event(self, event: EventRecord) -> bool:
        """Counts a new occurrence; False when the event was seen before."""
        new = event.count - self._seen_events.get(event.uid, 0)
        self._seen_events[event.uid] = event.count
        if new <= 0:
            return False
        if event.kind == "Pod" and event.reason in EVICTION_REASONS:
            self.evicted.setdefault(event.target_uid, event.reason)
            if event.reason == "Preempted":
                if event.note.startswith("reclaimed"):
                    self.reclaimed_pods.add(event.target_uid)
                else:
                    self.preempted_pods.add(event.target_uid)
        elif event.kind == "PodGroup" and event.reason == "Reclaiming":
            self.reclaim_decisions += new
        elif event.kind == "PodGroup" and event.reason == "Preempting":
            self.preempt_decisions += new
        elif event.kind == "PodGroup" and event.reason == "GangTimedOut":
            self.gang_timeouts += new
        return True

    def job(self, job: Job) -> None:
        self.job_retries[job.uid] = max(self.job_retries.get(job.uid, 0), job.retries)
        if job.phase == "Completed":
            self.jobs_completed.add(job.key)
        elif job.phase == "Failed":
            self.jobs_failed.add(job.key)

    def node(self, node: Node, now: float) -> None:
        state = "Ready" if node.ready else "NotReady"
        state += "" if node.schedulable else ",tainted"
        if self._node_state.get(node.key) not in (None, state) or (
            node.key not in self._node_state and state != "Ready"
        ):
            self.node_changes.append((now, node.key, state))
        self._node_state[node.key] = state

    def pod(self, pod: Pod) -> None:
        self.pod_restarts[pod.uid] = max(self.pod_restarts.get(pod.uid, 0), pod.restarts)
        if pod.disruption:
            self.evicted.setdefault(pod.uid, pod.disruption)


class Watches:
    """Informers on every kind the invariants read; each change goes to the checker at once."""

    def __init__(self, client: KubeClient, checker: Checker, tally: Tally) -> None:
        self.checker = checker
        self.tally = tally
        self.pods = Informer(client, PODS, decode_pod)
        self.groups = Informer(client, PODGROUPS, decode_group)
        self.queues = Informer(client, QUEUES, decode_queue)
        self.nodes = Informer(client, NODES, decode_node)
        self.jobs = Informer(client, VCJOBS, decode_job)
        self.events = Informer(client, EVENTS, decode_event)
        self.hypernodes = Informer(client, HYPERNODES, decode_hypernode)
        self._tasks: list[asyncio.Task[None]] = []
        now = time.monotonic

        def on_pod(_old: Any, pod: Pod | None = None) -> None:
            record = pod if pod is not None else _old
            tally.pod(record)
            checker.pod(record.key, record, now())

        def on_pod_gone(pod: Pod) -> None:
            tally.gone[pod.key] = now()
            # What the pod was when it went: who took it is told by its last state.
            tally.last_state[pod.uid] = (
                f"gone at t={now() - checker.origin:.1f}s, last seen {pod.phase}"
                f"{' on ' + pod.node if pod.node else ' on no node'}"
                f"{', terminating' if pod.deleting else ', not terminating'}"
                f"{', ' + pod.disruption if pod.disruption else ''}"
            )
            checker.pod(pod.key, None, now())

        self.pods.add_handlers(on_pod, on_pod, on_pod_gone)
        self.groups.add_handlers(
            lambda g: checker.group(g.key, g, now()),
            lambda _o, g: checker.group(g.key, g, now()),
            lambda g: (tally.gone.__setitem__(g.key, now()), checker.group(g.key, None, now())),
        )
        self.queues.add_handlers(
            lambda q: checker.queue(q.key, q),
            lambda _o, q: checker.queue(q.key, q),
            lambda q: checker.queue(q.key, None),
        )

        def on_node(_old: Any, node: Node | None = None) -> None:
            record = node if node is not None else _old
            tally.node(record, now())
            checker.node(record.key, record)

        self.nodes.add_handlers(on_node, on_node, lambda n: checker.node(n.key, None))
        self.hypernodes.add_handlers(
            lambda h: checker.hypernode(h.key, h),
            lambda _o, h: checker.hypernode(h.key, h),
            lambda h: checker.hypernode(h.key, None),
        )

        def on_job(_old: Any, job: Job | None = None) -> None:
            record = job if job is not None else _old
            tally.job(record)
            checker.job(record.key, record, now())

        self.jobs.add_handlers(
            on_job,
            on_job,
            lambda j: (tally.gone.__setitem__(j.key, now()), checker.job(j.key, None, now())),
        )

        def on_event(_old: Any, event: EventRecord | None = None) -> None:
            record = event if event is not None else _old
            if not tally.event(record):
                return
            if (record.kind == "Pod" and record.reason in EVICTION_REASONS) or (
                record.kind == "PodGroup" and record.reason in GROUP_REASONS
            ):
                # Told with the gang's history: which pods were taken away, and why.
                subject = record.name
                if record.kind == "Pod" and (pod := checker.pods.get(record.name)) is not None:
                    subject = pod.group or record.name
                checker.note(subject, now(), f"{record.reason} {record.name}: {record.note}")
            if record.kind == "Pod" and record.reason == "Preempted":
                # Events may come seconds late: the eviction is dated when it happened.
                late = max(0.0, time.time() - record.at) if record.at else 0.0
                checker.eviction(record.name, record.note, now() - late)

        self.events.add_handlers(on_event, on_event, None)

    async def start(self, timeout: float = 60.0) -> None:
        informers: list[Informer[Any]] = [
            self.nodes,
            self.hypernodes,
            self.queues,
            self.jobs,
            self.groups,
            self.pods,
            self.events,
        ]
        for informer in informers:
            self._tasks.append(asyncio.create_task(informer.run()))
        for informer in informers:
            await informer.wait_synced(timeout)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
