"""Where the gang events' labels go: above the lanes, in as many rows as it takes for no two
labels to overlap (greedy interval packing on each label's estimated width), and events of one
gang close in time merged into one label ("j03 Admitted, GangCommitted")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from vulcan.timeline.records import Mark

# A Volcano Job's PodGroup is named <job>-<job uid>: the uid says nothing on a chart.
_UID_SUFFIX = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
LABEL_CHAR_IN = 0.052  # width of one character at 6.5 pt (DejaVu Sans, a little generous)
GAP_IN = 0.08  # room between two labels of one row
MERGE_S = 2.0  # events of one gang this close (seconds) share a label


@dataclass(slots=True)
class Label:
    x: float  # seconds from t0 of the first event it names
    text: str
    group: str
    row: int = 0
    right: bool = False  # drawn ending at x (near the chart's right edge)


def merge(marks: list[Mark], t0: datetime, name: str) -> list[Label]:
    """One label per run of a gang's events within MERGE_S of the first: `name` shortens."""
    labels: list[Label] = []
    last: dict[str, tuple[float, Label]] = {}
    for mark in sorted(marks, key=lambda m: (m.time, m.subject)):
        x = (mark.time - t0).total_seconds()
        open_ = last.get(mark.subject)
        if open_ is not None and x - open_[0] <= MERGE_S:
            if mark.reason not in open_[1].text.split(" ", 1)[1].split(", "):
                open_[1].text += f", {mark.reason}"
            continue
        label = Label(x, f"{name_of(mark.subject, name)} {mark.reason}", mark.group)
        labels.append(label)
        last[mark.subject] = (x, label)
    return labels


def name_of(subject: str, one_namespace: str) -> str:
    """A gang's name as drawn: without its namespace when the chart shows one, and without
    the job uid Volcano's job controller appends to its PodGroup's name."""
    name = subject.split("/", 1)[1] if one_namespace and "/" in subject else subject
    return _UID_SUFFIX.sub("", name)


def place(labels: list[Label], x_max: float, axes_in: float) -> int:
    """Give each label a row so that none overlaps another; returns the number of rows."""
    per_in = x_max / axes_in  # seconds per inch of the axes
    ends: list[float] = []  # per row: where its last label ends (seconds)
    spans = []
    for label in labels:
        width = (len(label.text) + 1) * LABEL_CHAR_IN * per_in
        start = label.x
        if start + width > x_max:  # would run off the right edge: end at the event instead
            label.right = True
            start = label.x - width
        spans.append((max(start, 0.0), start + width, label))
    for start, end, label in sorted(spans, key=lambda s: s[0]):
        row = next((i for i, free in enumerate(ends) if free + GAP_IN * per_in <= start), None)
        if row is None:
            row = len(ends)
            ends.append(end)
        else:
            ends[row] = end
        label.row = row
    return len(ends)
