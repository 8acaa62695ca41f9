"""Draw a `Timeline` as a Gantt chart (PNG or SVG) with matplotlib's non-interactive Agg backend,
and say exactly what was drawn: `render` returns the chart's data (bars with their colours, the
image's size in pixels) for the JSON written next to the picture.

Rows are lanes (nodes, or queues), each split into as many sub-rows as it has bars at once. A
bar is a pod from bind to end, in its gang's colour (grey: no gang); a bar still running when
the picture was taken ends at the dashed "now" line with an arrow head; a pod that never bound is
a hatched bar from its creation to now. In queue lanes a thin line shows how long each pod
waited between its creation and its bind. Gang events (GangCommitted, ...) are dotted vertical
lines in the gang's colour; evictions and preemptions are crosses on the pod's bar.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from vulcan.timeline.records import Bar, Timeline, format_time

FORMATS = ("png", "svg")
NO_GANG = "#9e9e9e"
DPI = 100
WIDTH_IN = 11.0
SLOT_IN = 0.28  # height of one sub-row
CHAR_IN = 0.062  # width of one character of a bar's label (7 pt)
MARK_BAND = 1.1  # sub-rows above the lanes for the labels of gang events


def palette(groups: list[str]) -> dict[str, str]:
    """A colour per gang, in the order given (tab10, then tab20's lighter shades, cycling)."""
    colours = [matplotlib.colors.to_hex(c) for c in colormaps["tab10"].colors]
    colours += [matplotlib.colors.to_hex(c) for c in colormaps["tab20"].colors[1::2]]
    return {group: colours[i % len(colours)] for i, group in enumerate(groups)}


def colour_of(bar_group: str, colours: dict[str, str]) -> str:
    return colours.get(bar_group, NO_GANG) if bar_group else NO_GANG


def _short(name: str, namespaces: set[str]) -> str:
    """A pod or gang's name without its namespace when the chart shows one namespace."""
    return name.split("/", 1)[1] if len(namespaces) == 1 and "/" in name else name


def _rows(timeline: Timeline) -> tuple[dict[str, float], float]:
    """The y of each lane's top (lanes downwards from 0) and the total height in sub-rows."""
    tops, y = {}, 0.0
    for lane in timeline.lanes:
        tops[lane] = y
        y += timeline.slots[lane]
    return tops, y


def _centre(bar: Bar, tops: dict[str, float]) -> float:
    return tops[bar.lane] + bar.slot + 0.5


def _draw_bars(ax: Any, timeline: Timeline, tops: dict[str, float], ctx: dict[str, Any]) -> None:
    t0, colours, span = timeline.t0, ctx["colours"], ctx["span"]
    for bar in timeline.bars:
        start = (bar.start - t0).total_seconds()
        width = max((bar.end - bar.start).total_seconds(), span / 400)
        y = _centre(bar, tops)
        colour = colour_of(bar.group, colours)
        if timeline.lanes_by == "queues" and bar.bound and bar.start > bar.created:
            waited = (bar.created - t0).total_seconds()
            ax.plot([waited, start], [y, y], color=colour, linewidth=1, alpha=0.7, zorder=2)
        if bar.bound and bar.end_within:
            # The second in which the pod ended (the API's times are whole seconds), faded.
            tail = min(bar.end_within, (timeline.now - bar.end).total_seconds())
            ax.barh(y, tail, left=start + width, height=0.72, color=colour, alpha=0.3, zorder=2)
        if bar.bound:
            ax.barh(
                y,
                width,
                left=start,
                height=0.72,
                color=colour,
                edgecolor="black",
                linewidth=0.5,
                zorder=3,
            )
        else:
            ax.barh(
                y,
                width,
                left=start,
                height=0.72,
                color=colour,
                alpha=0.35,
                hatch="///",
                edgecolor=colour,
                linewidth=0.8,
                linestyle="--",
                zorder=3,
            )
        if bar.open:
            ax.plot(start + width, y, marker=">", color=colour, markersize=5, zorder=4)
        label = _short(bar.pod, ctx["namespaces"])
        if timeline.lanes_by == "queues" and bar.node:
            label += f" @ {bar.node}"
        if width / span * ctx["axes_in"] > (len(label) + 1) * CHAR_IN:
            ax.text(
                start + span / 300,
                y,
                label,
                va="center",
                ha="left",
                fontsize=7,
                color="black" if bar.bound else "dimgray",
                zorder=5,
                clip_on=True,
            )


def _band(timeline: Timeline) -> float:
    """Sub-rows above the lanes for the gang events' labels."""
    return MARK_BAND if any(m.kind == "PodGroup" for m in timeline.marks) else 0.1


def _draw_marks(ax: Any, timeline: Timeline, tops: dict[str, float], ctx: dict[str, Any]) -> None:
    t0, colours, band = timeline.t0, ctx["colours"], _band(timeline)
    bars = {b.pod: b for b in timeline.bars}
    labelled = 0
    for mark in timeline.marks:
        x = (mark.time - t0).total_seconds()
        colour = colour_of(mark.group, colours)
        if mark.kind == "PodGroup":
            ax.axvline(x, color=colour, linestyle=":", linewidth=1.2, zorder=1)
            text = f" {mark.reason} {_short(mark.subject, ctx['namespaces'])}"
            # Two heights, alternating, so that labels of events close in time overlap less.
            y = -band + 0.08 + 0.5 * (labelled % 2)
            ax.text(x, y, text, fontsize=6.5, color=colour, ha="left", va="top", clip_on=True)
            labelled += 1
        elif (bar := bars.get(mark.subject)) is not None:
            ax.plot(x, _centre(bar, tops), marker="x", color="black", markersize=6, zorder=6)
    ax.set_ylim(ctx["total"], -band)


def _legend(fig: Figure, timeline: Timeline, colours: dict[str, str], namespaces: set[str]) -> None:
    handles = [
        Patch(facecolor=colours[g], edgecolor="black", label=_short(g, namespaces))
        for g in timeline.groups
    ]
    if any(not b.group for b in timeline.bars):
        handles.append(Patch(facecolor=NO_GANG, edgecolor="black", label="no gang"))
    if any(b.bound and b.end_within for b in timeline.bars):
        handles.append(
            Patch(facecolor="gray", alpha=0.3, label="ended within this second (1 s resolution)")
        )
    if any(not b.bound for b in timeline.bars):
        handles.append(
            Patch(
                facecolor="white",
                edgecolor="gray",
                hatch="///",
                linestyle="--",
                label="pending (never bound)",
            )
        )
    if handles:
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncols=min(len(handles), 6),
            fontsize=8,
            frameon=False,
        )


def _subtitle(timeline: Timeline) -> str:
    bound = sum(b.bound for b in timeline.bars)
    running = sum(b.bound and b.open for b in timeline.bars)
    pending = len(timeline.bars) - bound
    parts = [f"{bound} pods bound", f"{running} running at capture"]
    if pending:
        parts.append(f"{pending} never bound")
    if timeline.unknown_end:
        parts.append(f"{len(timeline.unknown_end)} deleted (end unknown, not drawn)")
    return ", ".join(parts)


def _last(timeline: Timeline) -> float:
    """Seconds from t0 to the chart's right end: now while something is still going, else the
    last end or event (a finished workload drawn later is not squeezed to the left)."""
    if not timeline.bars or any(bar.open for bar in timeline.bars):
        last = timeline.now
    else:
        ends = [min(b.end + timedelta(seconds=b.end_within), timeline.now) for b in timeline.bars]
        last = max(ends + [m.time for m in timeline.marks])
    return (last - timeline.t0).total_seconds()


def render(timeline: Timeline, output: Path, *, title: str = "") -> dict[str, Any]:
    """Draw `timeline` into `output` (.png or .svg); returns what was drawn, as JSON data."""
    fmt = output.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"{output}: the picture must be .png or .svg")
    tops, total = _rows(timeline)
    colours = palette(timeline.groups)
    namespaces = {b.pod.split("/", 1)[0] for b in timeline.bars}
    span = max(_last(timeline), 1.0)
    rows = max(total, 1) + _band(timeline)
    height_in = 2.4 + 0.3 * ((len(timeline.groups) + 2) // 6) + SLOT_IN * rows
    height_in = round(height_in * DPI) / DPI  # whole pixels: the size said is the size written
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vulcan-timeline"}):
        fig = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
        ax = fig.add_subplot()
        ctx = {
            "colours": colours,
            "span": span,
            "namespaces": namespaces,
            "axes_in": WIDTH_IN * 0.8,
            "total": total,
        }
        _draw_bars(ax, timeline, tops, ctx)
        _draw_marks(ax, timeline, tops, ctx)
        for lane in timeline.lanes[1:]:
            ax.axhline(tops[lane], color="lightgray", linewidth=0.8, zorder=0)
        ax.set_yticks([tops[lane] + timeline.slots[lane] / 2 for lane in timeline.lanes])
        ax.set_yticklabels(timeline.lanes, fontsize=8)
        if any(bar.open for bar in timeline.bars):
            ax.axvline(span, color="black", linestyle="--", linewidth=0.8, zorder=1)
            ax.text(span, total, " now", fontsize=7, va="bottom", ha="left")
        ax.set_xlim(0, span * 1.04)
        ax.set_xlabel(f"seconds since {format_time(timeline.t0)[:-8]}Z (first pod created)")
        ax.grid(axis="x", color="#eeeeee", zorder=0)
        ax.set_axisbelow(True)
        heading = title or f"vulcan timeline: pods per {timeline.lanes_by[:-1]}"
        ax.set_title(f"{heading}\n{_subtitle(timeline)}", fontsize=10)
        _legend(fig, timeline, colours, namespaces)
        metadata = {"Date": None} if fmt == "svg" else {}
        fig.savefig(output, format=fmt, dpi=DPI, metadata=metadata)
    width_px, height_px = round(WIDTH_IN * DPI), round(height_in * DPI)
    return {
        "image": str(output),
        "format": fmt,
        "width_px": width_px,
        "height_px": height_px,
        "lanes_by": timeline.lanes_by,
        "now": format_time(timeline.now),
        "t0": format_time(timeline.t0),
        "lanes": [{"lane": lane, "slots": timeline.slots[lane]} for lane in timeline.lanes],
        "groups": [{"group": g, "color": colours[g]} for g in timeline.groups],
        "bars": [
            {**b.as_json(timeline.t0), "color": colour_of(b.group, colours)} for b in timeline.bars
        ],
        "marks": [m.as_json(timeline.t0) for m in timeline.marks],
        "unknown_end": timeline.unknown_end,
    }
