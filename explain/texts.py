"""Small readers of raw API objects for the explanation (conditions, events, times) and the
`Finding` every cause check returns. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.timestamps import epoch_seconds

MESSAGE_LIMIT = 240  # characters of a condition or event message shown in one line


@dataclass(slots=True)
class Finding:
    """Why the object is where it is: `cause` (a stable key, for tests and callers), the
    `headline` (the first line says it) and what would unblock it."""

    cause: str
    headline: str
    unblock: list[str] = field(default_factory=list)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or ():
        if isinstance(entry, dict) and entry.get("type") == kind:
            return entry
    return None


def unschedulable_message(podgroup: dict[str, Any] | None) -> str:
    entry = condition(podgroup, "Unschedulable")
    if entry is None or entry.get("status") != "True":
        return ""
    return str(entry.get("message") or "")


def origin_reason(message: str) -> str:
    """The part of a gang condition that says why: Volcano's "... Origin reason is: X"."""
    marker = "Origin reason is: "
    return message.split(marker, 1)[1] if marker in message else message


def scheduling_message(pod: dict[str, Any]) -> str:
    """What the scheduler last said about a pending pod (PodScheduled=False), without
    kube-scheduler's "preemption: ..." postscript."""
    entry = condition(pod, "PodScheduled")
    if entry is None or entry.get("status") != "False" or entry.get("reason") == "SchedulingGated":
        # SchedulingGated is the API server's word at creation, not a scheduler's attempt.
        return ""
    text = str(entry.get("message") or entry.get("reason") or "")
    return text.split(" preemption: ", 1)[0].strip().rstrip(".")


def scheduling_time(pod: dict[str, Any]) -> float:
    entry = condition(pod, "PodScheduled") or {}
    return epoch_seconds(entry.get("lastTransitionTime")) or 0.0


def short(text: str, limit: int = MESSAGE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def duration(seconds: float) -> str:
    """A Go-like duration for people: 45s, 2m5s, 1h3m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds}s" if seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes}m" if minutes else f"{hours}h"


# ------------------------------------------------------------------------------ events


def event_subject(event: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) an event is about (events.k8s.io `regarding`, core `involvedObject`)."""
    about = event.get("regarding") or event.get("involvedObject") or {}
    return str(about.get("kind") or ""), str(about.get("name") or "")


def event_text(event: dict[str, Any]) -> str:
    return str(event.get("note") or event.get("message") or "")


def event_time(event: dict[str, Any]) -> float:
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("eventTime"),
        event.get("deprecatedLastTimestamp"),
        event.get("lastTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        when = epoch_seconds(value)
        if when is not None:
            return when
    return 0.0


def events_about(
    events: Iterable[dict[str, Any]], kind: str, names: Iterable[str]
) -> list[dict[str, Any]]:
    """The events of objects of `kind` named `names`, oldest first."""
    wanted = set(names)
    found = [e for e in events if event_subject(e)[0] == kind and event_subject(e)[1] in wanted]
    return sorted(found, key=event_time)
