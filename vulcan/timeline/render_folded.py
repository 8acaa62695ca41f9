"""Draw a folded timeline (`vulcan.timeline.fold`): one row per gang, never taller than one
screen (`SCREEN_PX`). Used instead of the per-pod picture (`vulcan.timeline.render`) when that
one would be taller than a screen.

A gang is a bar in its colour from its first member's bind to its last member's end, after a
thin line from its first member's creation (how long it waited); a gang none of whose members
bound is a hatched bar from its creation to now, and a gang with members still unbound gets a
hatched bar under its own. The pods in no gang share one row, each drawn as in the per-pod
picture. Gang events are dotted ticks on their gang's row (their names are in the data), evictions
crosses. When rows must be thinner than the per-pod picture's to fit, they are, down to lines.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from vulcan.timeline.fold import Folded, GangRow, fold
from vulcan.timeline.records import Timeline, format_time
from vulcan.timeline.render import (
    DPI,
    FORMATS,
    FRAME_IN,
    LEGEND_ROW_IN,
    NO_GANG,
    SLOT_IN,
    WIDTH_IN,
    _last,
    _legend,
    _legend_layout,
    _subtitle,
    colour_of,
    evicted_handles,
    palette,
    state_handles,
)

# One screen: a 1080-pixel display less a viewer's or browser's bars. A taller picture must be
# scrolled, and its rows can no longer be compared at a glance.
SCREEN_PX = 1000
SCREEN_IN = SCREEN_PX / DPI
MIN_FONT_PT = 4.0  # below this a row's name is unreadable: the rows go unnamed (see the data)


def _handles(timeline: Timeline) -> list[Any]:
    """What the folded picture's marks mean (a bounded list: the rows name the gangs)."""
    gang = Patch(facecolor="gray", edgecolor="black", label="gang: first bind → last end")
    handles: list[Any] = [gang]
    if any(not b.group for b in timeline.bars):
        handles.append(Patch(facecolor=NO_GANG, edgecolor="black", label="pod in no gang"))
    handles.append(Line2D([], [], color="gray", linewidth=1, label="waited: created → bound"))
    handles += state_handles(timeline)
    if any(m.kind == "PodGroup" for m in timeline.marks):
        handles.append(Line2D([], [], color="gray", linestyle=":", label="gang event"))
    return handles + evicted_handles(timeline)


def _bar(ax: Any, x: float, width: float, y: float, height: float, **style: Any) -> None:
    ax.barh(y, width, left=x, height=height, **style)


def _pending_style(colour: str) -> dict[str, Any]:
    return {
        "color": colour,
        "alpha": 0.35,
        "hatch": "///",
        "edgecolor": colour,
        "linewidth": 0.8,
        "linestyle": "--",
        "zorder": 2,
    }


def _draw_gang(ax: Any, timeline: Timeline, gang: GangRow, ctx: dict[str, Any]) -> None:
    t0, span, y = timeline.t0, ctx["span"], gang.row + 0.5
    colour = colour_of(gang.group, ctx["colours"])
    solid = {"color": colour, "edgecolor": "black", "linewidth": 0.5, "zorder": 3}
    least = span / 400  # the narrowest bar still drawn

    def seconds(when: Any) -> float:
        return float((when - t0).total_seconds())

    if not gang.group:  # the pods in no gang: each as it is
        for bar in gang.bars:
            width = max(seconds(bar.end) - seconds(bar.start), least)
            style = solid if bar.bound else _pending_style(colour)
            _bar(ax, seconds(bar.start), width, y, 0.72, **style)
        return
    pending = [b for b in gang.bars if not b.bound]
    if pending:
        first = min(b.created for b in pending)
        width = max(seconds(gang.end) - seconds(first), least)
        _bar(ax, seconds(first), width, y, 0.72, **_pending_style(colour))
    start = gang.start
    if start is not None:
        if start > gang.created:
            ax.plot(
                [seconds(gang.created), seconds(start)],
                [y, y],
                color=colour,
                linewidth=1,
                alpha=0.7,
                zorder=2,
            )
        bound_end = max(b.end for b in gang.bars if b.bound)
        width = max(seconds(bound_end) - seconds(start), least)
        _bar(ax, seconds(start), width, y, 0.72, **solid)
        readable = ctx["font"] >= MIN_FONT_PT
        if ctx["shared"] and readable and width / span * ctx["axes_in"] > 0.06 * len(gang.label):
            ax.text(
                seconds(start) + span / 300,
                y,
                gang.label,
                va="center",
                ha="left",
                fontsize=min(7.0, ctx["font"]),
                zorder=5,
                clip_on=True,
            )
    if gang.open:
        ax.plot(seconds(gang.end), y, marker=">", color=colour, markersize=5, zorder=4)


def _draw_marks(ax: Any, timeline: Timeline, folded: Folded, colours: dict[str, str]) -> None:
    rows = {g.group: g.row for g in folded.gangs}
    for mark in timeline.marks:
        row = rows.get(mark.group)
        if row is None:
            continue
        x = (mark.time - timeline.t0).total_seconds()
        if mark.kind == "PodGroup":
            colour = colour_of(mark.group, colours)
            ax.plot([x, x], [row + 0.08, row + 0.92], color=colour, linestyle=":", zorder=4)
        else:
            ax.plot(x, row + 0.5, marker="x", color="black", markersize=6, zorder=6)


def render_folded(timeline: Timeline, output: Path, *, title: str = "") -> dict[str, Any]:
    """Draw `timeline` folded into `output` (.png or .svg), at most `SCREEN_PX` tall; returns
    what was drawn, as JSON data (the per-pod bars too)."""
    fmt = output.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"{output}: the picture must be .png or .svg")
    colours = palette(timeline.groups)
    handles = _handles(timeline)
    _, legend_rows = _legend_layout(handles)
    room_in = SCREEN_IN - FRAME_IN - LEGEND_ROW_IN * legend_rows
    folded = fold(timeline, max_rows=max(1, math.floor(room_in / SLOT_IN)))
    rows = max(folded.rows, 1)
    row_in = min(SLOT_IN, room_in / rows)
    height_in = math.floor((FRAME_IN + LEGEND_ROW_IN * legend_rows + row_in * rows) * DPI) / DPI
    span = max(_last(timeline), 1.0)
    font = min(8.0, row_in * 72 * 0.85)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vulcan-timeline"}):
        fig = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
        ax = fig.add_subplot()
        ctx = {
            "colours": colours,
            "span": span,
            "shared": folded.shared,
            "axes_in": WIDTH_IN * 0.8,
            "font": font,
        }
        for gang in folded.gangs:
            _draw_gang(ax, timeline, gang, ctx)
        _draw_marks(ax, timeline, folded, colours)
        for row in range(1, rows):
            ax.axhline(row, color="lightgray", linewidth=0.5, zorder=0)
        if timeline.lanes_by == "queues" and not folded.shared:
            # Gangs are grouped by queue: a darker line where the next queue's gangs begin.
            for before, after in itertools.pairwise(folded.gangs):
                if before.queue != after.queue:
                    ax.axhline(after.row, color="gray", linewidth=1.0, zorder=0)
        ax.set_yticks([row + 0.5 for row in range(rows)])
        ax.set_yticklabels(folded.labels if font >= MIN_FONT_PT else [""] * rows, fontsize=font)
        ax.set_ylim(rows, 0)
        if any(bar.open for bar in timeline.bars):
            ax.axvline(span, color="black", linestyle="--", linewidth=0.8, zorder=1)
        ax.set_xlim(0, span * 1.04)
        ax.set_xlabel(f"seconds since {format_time(timeline.t0)[:-8]}Z (first pod created)")
        ax.grid(axis="x", color="#eeeeee", zorder=0)
        ax.set_axisbelow(True)
        gangs = sum(bool(g.group) for g in folded.gangs)
        heading = title or "vulcan timeline: pods per gang"
        folded_note = (
            f"{len(timeline.bars)} pods folded into {gangs} gang{'s' if gangs != 1 else ''}, "
            "one row each"
        )
        if folded.shared:
            folded_note += " (gangs apart in time share a row)"
        ax.set_title(f"{heading}\n{_subtitle(timeline)}; {folded_note}", fontsize=10)
        _legend(fig, handles)
        metadata = {"Date": None} if fmt == "svg" else {}
        fig.savefig(output, format=fmt, dpi=DPI, metadata=metadata)
    return {
        "image": str(output),
        "format": fmt,
        "width_px": round(WIDTH_IN * DPI),
        "height_px": round(height_in * DPI),
        "lanes_by": timeline.lanes_by,
        "folded": True,
        "now": format_time(timeline.now),
        "t0": format_time(timeline.t0),
        "lanes": [{"lane": lane, "slots": timeline.slots[lane]} for lane in timeline.lanes],
        "rows": [{"row": i, "label": label} for i, label in enumerate(folded.labels)],
        "gangs": [
            {**g.as_json(timeline.t0), "color": colour_of(g.group, colours)} for g in folded.gangs
        ],
        "groups": [{"group": g, "color": colours[g]} for g in timeline.groups],
        "bars": [
            {**b.as_json(timeline.t0), "color": colour_of(b.group, colours)} for b in timeline.bars
        ],
        "marks": [m.as_json(timeline.t0) for m in timeline.marks],
        "unknown_end": timeline.unknown_end,
    }
