"""The records of a timeline (`vulcan.timeline.data` makes them from the API's objects, and
`vulcan.timeline.render` draws them): the events read, the bars (one per pod), the marks and the
timeline itself, with their JSON form (the data written next to the picture); RFC 3339 times.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from core.timestamps import parse_time

Json = Mapping[str, Any]
# Where a bar's end comes from when that time has whole seconds only.
SECOND_RESOLUTION = frozenset({"finishedAt", "condition", "deletionTimestamp"})


def format_time(when: datetime) -> str:
    """RFC 3339 in UTC with microseconds, as the bars are written."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Event:
    """The parts of an event (events.k8s.io/v1, or core/v1) a timeline reads."""

    time: datetime
    reason: str
    kind: str
    namespace: str
    name: str
    uid: str
    note: str

    @classmethod
    def parse(cls, raw: Json) -> Event | None:
        subject = raw.get("regarding") or raw.get("involvedObject") or {}
        meta = raw.get("metadata") or {}
        series = raw.get("series") or {}
        when = (
            parse_time(raw.get("eventTime"))
            or parse_time(series.get("lastObservedTime"))
            or parse_time(raw.get("deprecatedLastTimestamp") or raw.get("lastTimestamp"))
            or parse_time(raw.get("deprecatedFirstTimestamp") or raw.get("firstTimestamp"))
            or parse_time(meta.get("creationTimestamp"))
        )
        if when is None or not subject.get("name"):
            return None
        return cls(
            time=when,
            reason=str(raw.get("reason") or ""),
            kind=str(subject.get("kind") or ""),
            namespace=str(subject.get("namespace") or meta.get("namespace") or ""),
            name=str(subject["name"]),
            uid=str(subject.get("uid") or ""),
            note=str(raw.get("note") or raw.get("message") or ""),
        )


@dataclass(slots=True)
class Bar:
    """One pod on the chart. `start`..`end` is its time on `node` (for a pod that never bound:
    from its creation to now)."""

    pod: str  # namespace/name
    uid: str
    node: str  # "" when it never bound
    queue: str
    group: str  # namespace/podgroup, "" for a pod in no gang
    created: datetime
    start: datetime
    end: datetime
    state: str  # running, succeeded, failed, terminating, deleted, pending
    bound: bool
    start_from: str  # event, condition, startTime, created
    end_from: str  # finishedAt, deletionTimestamp, event, now
    reason: str = ""  # why a pending pod is pending (its PodScheduled message)
    lane: str = ""
    slot: int = 0

    @property
    def end_within(self) -> float:
        """Seconds after `end` within which the pod really ended: metav1.Time (finishedAt,
        condition times, deletionTimestamp) is truncated to whole seconds."""
        return 1.0 if self.end_from in SECOND_RESOLUTION else 0.0

    @property
    def open(self) -> bool:
        """Still going when the picture was taken: the bar ends at "now"."""
        return self.end_from == "now"

    def as_json(self, t0: datetime) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "uid": self.uid,
            "node": self.node,
            "queue": self.queue,
            "group": self.group,
            "lane": self.lane,
            "slot": self.slot,
            "state": self.state,
            "bound": self.bound,
            "open": self.open,
            "created": format_time(self.created),
            "start": format_time(self.start),
            "end": format_time(self.end),
            "start_s": round((self.start - t0).total_seconds(), 6),
            "end_s": round((self.end - t0).total_seconds(), 6),
            "start_from": self.start_from,
            "end_from": self.end_from,
            "end_within_s": self.end_within,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Mark:
    """An event worth a mark on the chart: a gang committed or timed out, a pod evicted."""

    time: datetime
    reason: str
    kind: str  # PodGroup or Pod
    subject: str  # namespace/name
    group: str  # the gang it concerns ("" if none)
    note: str

    def as_json(self, t0: datetime) -> dict[str, Any]:
        return {
            "time": format_time(self.time),
            "time_s": round((self.time - t0).total_seconds(), 6),
            "reason": self.reason,
            "kind": self.kind,
            "subject": self.subject,
            "group": self.group,
            "note": self.note,
        }


@dataclass(slots=True)
class Timeline:
    lanes_by: str  # nodes or queues
    now: datetime
    t0: datetime  # the earliest pod creation (x = 0)
    lanes: list[str]  # top to bottom
    slots: dict[str, int]  # sub-rows per lane (at least 1)
    bars: list[Bar]
    groups: list[str]  # gangs by first bind (then never-bound ones): the colour order
    marks: list[Mark] = field(default_factory=list)
    unknown_end: list[str] = field(default_factory=list)  # gone pods whose end nothing tells
    # node lane -> (its lowest-tier HyperNode, the tier), when the cluster has HyperNodes
    domains: dict[str, tuple[str, int]] = field(default_factory=dict)


def natural_key(text: str) -> tuple[Any, ...]:
    """hollow-node-2 before hollow-node-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))
