"""What `vulcan timeline` plots, read from the API server's objects: pure functions from pods,
events, PodGroups and nodes (their JSON, as listed) to bars, one per pod.

A bar runs from the pod's bind to its end:
- bind: the scheduler's `Scheduled` event for the pod (events.k8s.io/v1 `eventTime`, microsecond
  resolution), else the PodScheduled condition's lastTransitionTime, else status.startTime
  (both 1-second resolution);
- end: the latest `finishedAt` of its terminated containers; a pod still running ends "now", a
  terminating one at its deletionTimestamp (or now, while that is still to come); a pod gone
  from the API that has a Scheduled event ends at the last event about it.
Pods that never bound are bars too (`bound` false), from their creation to now, in the lane
"(pending)" (nodes) or their queue's lane (queues). Gangs are the pods' PodGroups (annotation
`scheduling.k8s.io/group-name`, or the coscheduling label); a pod's queue is its PodGroup's
spec.queue, or (the PodGroup gone) the pod's own `volcano.sh/queue-name` label or annotation.
Within a lane, bars that overlap in time get different slots (sub-rows).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime

from core.api import keys
from core.timestamps import parse_time
from vulcan.timeline.domains import node_domains
from vulcan.timeline.records import Bar, Event, Json, Mark, Timeline, natural_key

PENDING_LANE = "(pending)"
NO_QUEUE = "(no queue)"
LANE_KINDS = ("nodes", "queues")
# Events drawn as marks: about PodGroups (a gang's binds committed, timed out, released) and
# about pods (taken off their node by vulcan or kube-scheduler).
GROUP_MARKS = frozenset(
    {"Admitted", "GangCommitted", "GangTimedOut", "GangReleased", "GangCommitFailed"}
)
POD_MARKS = frozenset({"Preempted", "Evicted", "Eviction", "Reclaimed", "GangTimedOut", "Killing"})
# kube-scheduler's Scheduled event: "Successfully assigned NS/NAME to NODE".
_ASSIGNED_TO = re.compile(r" to (\S+)$")


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def group_of(pod: Json) -> str:
    """namespace/podgroup of a pod's gang, or ""."""
    meta = pod.get("metadata") or {}
    name = (meta.get("annotations") or {}).get(keys.GROUP_NAME) or (meta.get("labels") or {}).get(
        keys.COSCHEDULING_POD_GROUP
    )
    return _key(meta.get("namespace") or "", name) if name else ""


def queue_of_pod(pod: Json) -> str:
    """The queue a pod says it belongs to, for when its PodGroup is gone (a Volcano Job's is
    deleted when the job completes): Volcano's job controller labels and annotates its pods
    `volcano.sh/queue-name`; other workloads annotate `scheduling.volcano.sh/queue-name`."""
    meta = pod.get("metadata") or {}
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    return str(
        annotations.get(keys.QUEUE_NAME)
        or annotations.get(keys.VOLCANO_QUEUE_NAME)
        or labels.get(keys.VOLCANO_QUEUE_NAME)
        or ""
    )


def _condition(pod: Json, kind: str) -> Json:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return condition
    return {}


def _finished_at(pod: Json) -> datetime | None:
    status = pod.get("status") or {}
    times = [
        parse_time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for c in (
            *(status.get("initContainerStatuses") or ()),
            *(status.get("containerStatuses") or ()),
        )
    ]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _bind_events(events: Iterable[Event]) -> dict[str, list[Event]]:
    """Scheduled events by pod uid (and by namespace/name, for events that carry no uid)."""
    found: dict[str, list[Event]] = {}
    for event in events:
        if event.kind == "Pod" and event.reason == "Scheduled":
            found.setdefault(event.uid or _key(event.namespace, event.name), []).append(event)
    return found


def _bind_time(pod: Json, scheduled: list[Event]) -> tuple[datetime, str] | None:
    if scheduled:
        return max(e.time for e in scheduled), "event"
    condition = _condition(pod, "PodScheduled")
    if condition.get("status") == "True" and (
        when := parse_time(condition.get("lastTransitionTime"))
    ):
        return when, "condition"
    if when := parse_time((pod.get("status") or {}).get("startTime")):
        return when, "startTime"
    return None


def _end(pod: Json, start: datetime, now: datetime) -> tuple[datetime, str, str]:
    """(end, end_from, state) of a bound pod."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    finished = _finished_at(pod)
    if phase in ("Succeeded", "Failed"):
        if finished is not None:
            return max(finished, start), "finishedAt", phase.lower()
        last = max(
            (
                t
                for c in (pod.get("status") or {}).get("conditions") or ()
                if (t := parse_time(c.get("lastTransitionTime")))
            ),
            default=start,
        )
        return max(last, start), "condition", phase.lower()
    deleting = parse_time(meta.get("deletionTimestamp"))
    if deleting is not None and deleting <= now:
        return max(deleting, start), "deletionTimestamp", "terminating"
    return max(now, start), "now", "terminating" if deleting else "running"


def _bars_of_pods(
    pods: Iterable[Json], binds: dict[str, list[Event]], queues: Mapping[str, str], now: datetime
) -> list[Bar]:
    bars = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        uid = meta.get("uid") or ""
        created = parse_time(meta.get("creationTimestamp")) or now
        group = group_of(pod)
        queue = queues.get(group) or queue_of_pod(pod)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        scheduled = [
            e
            for e in binds.get(uid, ()) or binds.get(_key(namespace, name), ())
            if not e.uid or e.uid == uid
        ]
        bind = _bind_time(pod, scheduled) if node else None
        if bind is None:
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            if phase in ("Succeeded", "Failed"):
                continue  # finished without ever holding a node: nothing to draw
            message = str(_condition(pod, "PodScheduled").get("message") or "")
            bars.append(
                Bar(
                    pod=_key(namespace, name),
                    uid=uid,
                    node="",
                    queue=queue,
                    group=group,
                    created=created,
                    start=created,
                    end=max(now, created),
                    state="pending",
                    bound=False,
                    start_from="created",
                    end_from="now",
                    reason=message,
                )
            )
            continue
        start, start_from = bind
        end, end_from, state = _end(pod, start, now)
        bars.append(
            Bar(
                pod=_key(namespace, name),
                uid=uid,
                node=node,
                queue=queue,
                group=group,
                created=min(created, start),
                start=start,
                end=end,
                state=state,
                bound=True,
                start_from=start_from,
                end_from=end_from,
            )
        )
    return bars


def _bars_of_gone_pods(events: list[Event], listed: set[str]) -> tuple[list[Bar], list[str]]:
    """Pods deleted since they bound, known from their Scheduled events only."""
    bars, unknown = [], []
    gone: dict[str, list[Event]] = {}
    for event in events:
        if event.kind == "Pod" and event.uid and event.uid not in listed:
            gone.setdefault(event.uid, []).append(event)
    for uid, about in gone.items():
        scheduled = [e for e in about if e.reason == "Scheduled"]
        if not scheduled:
            continue
        bind = max(scheduled, key=lambda e: e.time)
        match = _ASSIGNED_TO.search(bind.note)
        later = [e.time for e in about if e.time > bind.time]
        pod = _key(bind.namespace, bind.name)
        if match is None or not later:
            unknown.append(pod)
            continue
        bars.append(
            Bar(
                pod=pod,
                uid=uid,
                node=match.group(1),
                queue="",
                group="",
                created=bind.time,
                start=bind.time,
                end=max(later),
                state="deleted",
                bound=True,
                start_from="event",
                end_from="event",
            )
        )
    return bars, unknown


def _marks(events: Iterable[Event], groups_of_pods: Mapping[str, str]) -> list[Mark]:
    marks = []
    for e in events:
        subject = _key(e.namespace, e.name)
        if e.kind == "PodGroup" and e.reason in GROUP_MARKS:
            marks.append(Mark(e.time, e.reason, e.kind, subject, subject, e.note))
        elif e.kind == "Pod" and e.reason in POD_MARKS:
            group = groups_of_pods.get(e.uid) or groups_of_pods.get(subject, "")
            marks.append(Mark(e.time, e.reason, e.kind, subject, group, e.note))
    return sorted(marks, key=lambda m: (m.time, m.subject))


def _pack(bars: list[Bar], from_creation: bool) -> dict[str, int]:
    """Give overlapping bars of a lane different slots (lowest free first); slots per lane."""
    free_at: dict[str, list[datetime]] = {}
    for bar in sorted(bars, key=lambda b: (b.created if from_creation else b.start, b.pod)):
        begin = bar.created if from_creation else bar.start
        ends = free_at.setdefault(bar.lane, [])
        slot = next((i for i, end in enumerate(ends) if end <= begin), len(ends))
        if slot == len(ends):
            ends.append(bar.end)
        else:
            ends[slot] = bar.end
        bar.slot = slot
    return {lane: len(ends) for lane, ends in free_at.items()}


def build_timeline(
    pods: Iterable[Json],
    events: Iterable[Json],
    podgroups: Iterable[Json] = (),
    nodes: Iterable[Json] = (),
    *,
    now: datetime,
    lanes_by: str = "nodes",
    hypernodes: Iterable[Json] = (),
) -> Timeline:
    """The bars, lanes and marks of a chart of `pods` (one per pod) as of `now`."""
    if lanes_by not in LANE_KINDS:
        raise ValueError(f"lanes must be one of {', '.join(LANE_KINDS)}, not {lanes_by!r}")
    pods = list(pods)
    parsed = sorted((e for raw in events if (e := Event.parse(raw))), key=lambda e: e.time)
    queues = {
        _key((g.get("metadata") or {}).get("namespace") or "", g["metadata"]["name"]): str(
            (g.get("spec") or {}).get("queue") or "default"
        )
        for g in podgroups
        if (g.get("metadata") or {}).get("name")
    }
    bars = _bars_of_pods(pods, _bind_events(parsed), queues, now)
    listed = {(p.get("metadata") or {}).get("uid") or "" for p in pods}
    gone, unknown_end = _bars_of_gone_pods(parsed, listed)
    bars += gone
    for bar in bars:
        if lanes_by == "queues":
            bar.lane = bar.queue or NO_QUEUE
        else:
            bar.lane = bar.node or PENDING_LANE
    slots = _pack(bars, from_creation=lanes_by == "queues")
    domains: dict[str, tuple[str, int]] = {}
    if lanes_by == "nodes":
        nodes = list(nodes)
        names = {(n.get("metadata") or {}).get("name") or "" for n in nodes} | {
            b.node for b in bars if b.node
        }
        domains = node_domains(hypernodes, nodes)
        # Domain by domain (nodes in none last), so a gang kept in one shows in one band.
        order = sorted(
            (n for n in names if n),
            key=lambda n: (
                n not in domains,
                natural_key(domains.get(n, ("", 0))[0]),
                natural_key(n),
            ),
        )
        if any(not b.bound for b in bars):
            order.append(PENDING_LANE)
    else:
        named = {b.lane for b in bars} - {NO_QUEUE}
        order = sorted(named, key=natural_key) + ([NO_QUEUE] if NO_QUEUE in slots else [])
    groups: list[str] = []
    for bar in sorted(bars, key=lambda b: (not b.bound, b.start, b.pod)):
        if bar.group and bar.group not in groups:
            groups.append(bar.group)
    t0 = min((b.created for b in bars), default=now)
    groups_of_pods = {b.uid: b.group for b in bars} | {b.pod: b.group for b in bars}
    return Timeline(
        lanes_by=lanes_by,
        now=now,
        t0=t0,
        lanes=order,
        slots={lane: max(1, slots.get(lane, 0)) for lane in order},
        bars=sorted(bars, key=lambda b: (order.index(b.lane), b.slot, b.start, b.pod)),
        groups=groups,
        marks=_marks(parsed, groups_of_pods),
        unknown_end=sorted(unknown_end),
        domains={lane: domains[lane] for lane in order if lane in domains},
    )
