"""Draw a `Timeline` as a Gantt chart (PNG or SVG) with matplotlib's non-interactive Agg backend,
and say exactly what was drawn: `render` returns the chart's data (bars with their colours, the
image's size in pixels) for the JSON written next to the picture.

Rows are lanes (nodes, or queues), each split into as many sub-rows as it has bars at once. A
bar is a pod from bind to end, in its gang's colour (grey: no gang); a bar still running when
the picture was taken ends at the dashed "now" line with an arrow head; a pod that never bound is
a hatched bar from its creation to now. In queue lanes a thin line shows how long each pod
waited between its creation and its bind. Gang events (GangCommitted, ...) are dotted vertical
lines in the gang's colour, labelled above the lanes in rows that never overlap
(`vulcan.timeline.labels`); evictions and preemptions are crosses on the pod's bar. The legend
names every gang and explains every mark, in as many columns as fit the width.
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from vulcan.timeline.domains import domain_handles, draw_domains
from vulcan.timeline.labels import Label, merge, name_of, place
from vulcan.timeline.records import Bar, Timeline, format_time

FORMATS = ("png", "svg")
NO_GANG = "#9e9e9e"
DPI = 100
WIDTH_IN = 11.0
SLOT_IN = 0.28  # height of one sub-row
CHAR_IN = 0.062  # width of one character of a bar's label (7 pt)
LABEL_ROW = 0.62  # sub-rows per row of gang event labels above the lanes
AXES_IN = WIDTH_IN * 0.8  # the axes' width (the rest: lane names, margins)
LEGEND_CHAR_IN = 0.066  # one character of a legend entry (8 pt), a little generous
LEGEND_ROW_IN = 0.24
FRAME_IN = 2.2  # title, axis, labels and margins around the rows


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


def _labels(timeline: Timeline, span: float, namespaces: set[str]) -> tuple[list[Label], int]:
    """The gang events' labels, placed in rows; (labels, rows)."""
    shown = "one" if len(namespaces) == 1 else ""
    marks = [m for m in timeline.marks if m.kind == "PodGroup"]
    labels = merge(marks, timeline.t0, shown)
    return labels, place(labels, span * 1.04, AXES_IN)


def _band(rows: int) -> float:
    """Sub-rows above the lanes for `rows` rows of gang event labels."""
    return rows * LABEL_ROW + 0.25 if rows else 0.1


def _draw_marks(ax: Any, timeline: Timeline, tops: dict[str, float], ctx: dict[str, Any]) -> None:
    t0, colours, band = timeline.t0, ctx["colours"], ctx["band"]
    bars = {b.pod: b for b in timeline.bars}
    for mark in timeline.marks:
        x = (mark.time - t0).total_seconds()
        if mark.kind == "PodGroup":
            colour = colour_of(mark.group, colours)
            ax.axvline(x, color=colour, linestyle=":", linewidth=1.0, alpha=0.8, zorder=1)
        elif (bar := bars.get(mark.subject)) is not None:
            ax.plot(x, _centre(bar, tops), marker="x", color="black", markersize=6, zorder=6)
    for label in ctx["labels"]:
        y = -band + 0.12 + LABEL_ROW * label.row
        ax.text(
            label.x,
            y,
            f"{label.text} " if label.right else f" {label.text}",
            fontsize=6.5,
            color=colour_of(label.group, colours),
            ha="right" if label.right else "left",
            va="top",
            clip_on=True,
            # Readable over the dotted lines of other events.
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.4, "alpha": 0.85},
            zorder=7,
        )
    ax.set_ylim(ctx["total"], -band)


def _legend_handles(timeline: Timeline, colours: dict[str, str], namespaces: set[str]) -> list[Any]:
    """A patch per gang, then one entry per kind of mark the chart shows."""
    handles: list[Any] = [
        Patch(
            facecolor=colours[g],
            edgecolor="black",
            label=name_of(g, "one" if len(namespaces) == 1 else ""),
        )
        for g in timeline.groups
    ]
    if any(not b.group for b in timeline.bars):
        handles.append(Patch(facecolor=NO_GANG, edgecolor="black", label="no gang"))
    if any(b.bound and b.end_within for b in timeline.bars):
        handles.append(Patch(facecolor="gray", alpha=0.3, label="ended within 1 s (faded)"))
    handles += state_handles(timeline)
    if timeline.lanes_by == "queues" and any(
        b.bound and b.start > b.created for b in timeline.bars
    ):
        handles.append(Line2D([], [], color="gray", linewidth=1, label="waited: created → bound"))
    if any(m.kind == "PodGroup" for m in timeline.marks):
        handles.append(
            Line2D([], [], color="gray", linestyle=":", label="gang event (label above)")
        )
    return handles + evicted_handles(timeline)


def state_handles(timeline: Timeline) -> list[Any]:
    """The entries for bars never bound and bars running at capture, where there are any."""
    handles: list[Any] = []
    if any(not b.bound for b in timeline.bars):
        pending = Patch(
            facecolor="white", edgecolor="gray", hatch="///", linestyle="--",
            label="pending: never bound",
        )  # fmt: skip
        handles.append(pending)
    if any(b.open for b in timeline.bars):
        handles.append(
            Line2D([], [], color="gray", marker=">", linestyle="-", label="running at capture")
        )
    return handles


def evicted_handles(timeline: Timeline) -> list[Any]:
    """The entry for the × of a pod evicted or preempted, where there is one."""
    if not any(m.kind == "Pod" for m in timeline.marks):
        return []
    return [
        Line2D([], [], color="black", marker="x", linestyle="none", label="× pod evicted/preempted")
    ]


def _legend_layout(handles: list[Any]) -> tuple[int, int]:
    """(columns, rows): as many columns of the widest entry as fit the figure's width."""
    if not handles:
        return 0, 0
    widest = max(len(str(h.get_label())) for h in handles) * LEGEND_CHAR_IN + 0.55
    columns = max(1, min(len(handles), int((WIDTH_IN - 0.3) // widest)))
    return columns, math.ceil(len(handles) / columns)


def _legend(fig: Figure, handles: list[Any]) -> None:
    columns, _ = _legend_layout(handles)
    if handles:
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncols=columns,
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


def _layout(timeline: Timeline) -> dict[str, Any]:
    """Everything the per-pod picture's size depends on, and that size."""
    tops, total = _rows(timeline)
    colours = palette(timeline.groups)
    namespaces = {b.pod.split("/", 1)[0] for b in timeline.bars}
    span = max(_last(timeline), 1.0)
    labels, label_rows = _labels(timeline, span, namespaces)
    band = _band(label_rows)
    handles = _legend_handles(timeline, colours, namespaces)
    handles += domain_handles(timeline.lanes, timeline.domains)
    _, legend_rows = _legend_layout(handles)
    rows = max(total, 1) + band
    height_in = FRAME_IN + LEGEND_ROW_IN * legend_rows + SLOT_IN * rows
    height_in = round(height_in * DPI) / DPI  # whole pixels: the size said is the size written
    return {
        "tops": tops,
        "total": total,
        "colours": colours,
        "namespaces": namespaces,
        "span": span,
        "labels": labels,
        "band": band,
        "handles": handles,
        "height_in": height_in,
    }


def height_px(timeline: Timeline) -> int:
    """How tall the per-pod picture of `timeline` would be, in pixels."""
    return round(_layout(timeline)["height_in"] * DPI)


def render(timeline: Timeline, output: Path, *, title: str = "") -> dict[str, Any]:
    """Draw `timeline` into `output` (.png or .svg); returns what was drawn, as JSON data."""
    fmt = output.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"{output}: the picture must be .png or .svg")
    layout = _layout(timeline)
    tops, total, colours = layout["tops"], layout["total"], layout["colours"]
    namespaces, span, band = layout["namespaces"], layout["span"], layout["band"]
    labels, handles, height_in = layout["labels"], layout["handles"], layout["height_in"]
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vulcan-timeline"}):
        fig = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
        ax = fig.add_subplot()
        ctx = {
            "colours": colours,
            "span": span,
            "namespaces": namespaces,
            "axes_in": AXES_IN,
            "total": total,
            "band": band,
            "labels": labels,
        }
        rows = {lane: (tops[lane], timeline.slots[lane]) for lane in timeline.lanes}
        draw_domains(ax, timeline.lanes, timeline.domains, rows)
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
        _legend(fig, handles)
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
        "lanes": [
            {"lane": lane, "slots": timeline.slots[lane]}
            | ({"hypernode": timeline.domains[lane][0]} if lane in timeline.domains else {})
            for lane in timeline.lanes
        ],
        "groups": [{"group": g, "color": colours[g]} for g in timeline.groups],
        "bars": [
            {**b.as_json(timeline.t0), "color": colour_of(b.group, colours)} for b in timeline.bars
        ],
        "marks": [m.as_json(timeline.t0) for m in timeline.marks],
        "unknown_end": timeline.unknown_end,
    }
