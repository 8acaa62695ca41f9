"""The folded timeline: one row per gang instead of one per pod, for runs whose per-pod picture
would be taller than a screen (a 200-pod job is one row, not 200 sub-rows).

A gang's row shows it from its first member's creation (a thin line while it waits) through
its first bind to its last member's end, with its member count; pods in no gang share one row
"(no gang)", drawn as they are. Rows are ordered as the gangs' colours are (by first bind, then
the gangs that never bound), by queue first when the lanes are queues. When even one row per
gang would not fit, gangs that never overlap in time share a row (lowest free row first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vulcan.timeline.labels import name_of
from vulcan.timeline.records import Bar, Timeline, format_time

NO_GANG_ROW = "(no gang)"


@dataclass(slots=True)
class GangRow:
    """One gang folded: its members' bars summed up."""

    group: str  # namespace/podgroup; "" for the pods in no gang
    queue: str
    bars: list[Bar]
    row: int = 0
    label: str = ""  # its name as drawn, with its queue and member count

    @property
    def members(self) -> int:
        return len(self.bars)

    @property
    def bound(self) -> int:
        return sum(b.bound for b in self.bars)

    @property
    def created(self) -> datetime:
        return min(b.created for b in self.bars)

    @property
    def start(self) -> datetime | None:
        """The first member's bind (None: no member ever bound)."""
        return min((b.start for b in self.bars if b.bound), default=None)

    @property
    def end(self) -> datetime:
        return max(b.end for b in self.bars)

    @property
    def open(self) -> bool:
        return any(b.open for b in self.bars)

    def name(self, one_namespace: bool) -> str:
        return name_of(self.group, "one" if one_namespace else "") if self.group else NO_GANG_ROW

    def as_json(self, t0: datetime) -> dict[str, Any]:
        start = self.start
        return {
            "group": self.group,
            "queue": self.queue,
            "row": self.row,
            "members": self.members,
            "bound": self.bound,
            "open": self.open,
            "created": format_time(self.created),
            "start": format_time(start) if start else None,
            "end": format_time(self.end),
            "created_s": round((self.created - t0).total_seconds(), 6),
            "start_s": round((start - t0).total_seconds(), 6) if start else None,
            "end_s": round((self.end - t0).total_seconds(), 6),
        }


@dataclass(slots=True)
class Folded:
    gangs: list[GangRow]  # in row order
    rows: int
    shared: bool = False  # some rows hold more than one gang
    labels: list[str] = field(default_factory=list)  # per row


def fold(timeline: Timeline, max_rows: int) -> Folded:
    """One row per gang of `timeline`; gangs share rows only when there are more than
    `max_rows` of them."""
    by_group: dict[str, GangRow] = {}
    for bar in timeline.bars:
        row = by_group.setdefault(bar.group, GangRow(bar.group, bar.queue, []))
        row.bars.append(bar)
        row.queue = row.queue or bar.queue
    order = {group: i for i, group in enumerate(timeline.groups)}
    gangs = sorted(
        by_group.values(),
        key=lambda g: (
            g.queue if timeline.lanes_by == "queues" else "",
            not g.group,  # the pods in no gang last
            order.get(g.group, len(order)),
            g.created,
        ),
    )
    one_namespace = len({b.pod.split("/", 1)[0] for b in timeline.bars}) == 1
    for gang in gangs:
        gang.label = _label(gang, one_namespace, timeline.lanes_by)
    if len(gangs) <= max_rows:
        for i, gang in enumerate(gangs):
            gang.row = i
        return Folded(gangs, len(gangs), labels=[g.label for g in gangs])
    free_at: list[datetime] = []  # per row: when its last gang ended
    names: list[list[str]] = []
    for gang in sorted(gangs, key=lambda g: (g.created, g.group)):
        row = next((i for i, end in enumerate(free_at) if end <= gang.created), len(free_at))
        if row == len(free_at):
            free_at.append(gang.end)
            names.append([])
        else:
            free_at[row] = gang.end
        gang.row = row
        names[row].append(gang.name(one_namespace))
    gangs.sort(key=lambda g: (g.row, g.created))
    labels = [n[0] if len(n) == 1 else f"{n[0]} +{len(n) - 1}" for n in names]
    return Folded(gangs, len(free_at), shared=True, labels=labels)


def _label(gang: GangRow, one_namespace: bool, lanes_by: str) -> str:
    """A row's name: the gang (its queue when the lanes are queues) and how many pods."""
    queue = f" · {gang.queue or '-'}" if lanes_by == "queues" else ""
    count = f"{gang.bound}/{gang.members}" if gang.bound < gang.members else f"{gang.members}"
    pods = "pod" if gang.members == 1 else "pods"
    return f"{gang.name(one_namespace)}{queue} ({count} {pods})"
