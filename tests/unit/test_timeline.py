"""`vulcan timeline`: bars from synthetic pods and events (pure), and the picture and data drawn."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.soak_topology import hypernode_manifest
from core.timestamps import parse_time
from tests.helpers import REPO
from vulcan.timeline.data import NO_QUEUE, PENDING_LANE, build_timeline
from vulcan.timeline.records import Bar, Timeline, format_time

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
NOW = T0 + timedelta(seconds=60)


def at(seconds: float) -> str:
    return format_time(T0 + timedelta(seconds=seconds))


def sec(seconds: float) -> str:
    """A 1-second-resolution timestamp, as metav1.Time is written."""
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    *,
    node: str = "",
    created: float = 0,
    scheduled: float | None = None,
    finished: float | None = None,
    phase: str | None = None,
    group: str = "",
    namespace: str = "default",
    deleting: float | None = None,
    message: str = "",
) -> dict[str, Any]:
    conditions = []
    if scheduled is not None:
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": sec(scheduled)}
        )
    elif message:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
        )
    status: dict[str, Any] = {"phase": phase or ("Running" if node else "Pending")}
    status["conditions"] = conditions
    if finished is not None:
        status["phase"] = phase or "Succeeded"
        terminated = {"exitCode": 0, "finishedAt": sec(finished), "startedAt": sec(scheduled or 0)}
        status["containerStatuses"] = [{"name": "main", "state": {"terminated": terminated}}]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "creationTimestamp": sec(created),
        "annotations": {"scheduling.k8s.io/group-name": group} if group else {},
    }
    if deleting is not None:
        meta["deletionTimestamp"] = sec(deleting)
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


def event(
    reason: str,
    name: str,
    when: float,
    *,
    kind: str = "Pod",
    note: str = "",
    uid: str | None = None,
) -> dict[str, Any]:
    regarding = {"kind": kind, "namespace": "default", "name": name}
    if kind == "Pod":
        regarding["uid"] = f"uid-default-{name}" if uid is None else uid
    return {
        "metadata": {"name": f"{name}.{reason}.{when}", "namespace": "default"},
        "eventTime": at(when),
        "reason": reason,
        "regarding": regarding,
        "note": note,
    }


def podgroup(name: str, queue: str | None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 2, **({"queue": queue} if queue else {})},
    }


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def by_pod(timeline: Timeline) -> dict[str, Bar]:
    return {b.pod.split("/", 1)[1]: b for b in timeline.bars}


def test_a_bar_runs_from_the_scheduled_event_to_the_containers_finish() -> None:
    pods = [pod("a", node="n1", created=0, scheduled=1, finished=4)]
    events = [event("Scheduled", "a", 1.25, note="Successfully assigned default/a to n1")]
    bar = by_pod(build_timeline(pods, events, now=NOW))["a"]
    assert (bar.start, bar.start_from) == (T0 + timedelta(seconds=1.25), "event")
    assert (bar.end, bar.end_from) == (T0 + timedelta(seconds=4), "finishedAt")
    assert (bar.node, bar.lane, bar.state, bar.bound, bar.open) == ("n1", "n1", "succeeded", 1, 0)


def test_without_an_event_the_bind_is_the_podscheduled_condition_then_start_time() -> None:
    by_condition = pod("a", node="n1", scheduled=2, finished=5)
    by_start = pod("b", node="n1", finished=5)
    by_start["status"]["startTime"] = sec(3)
    bars = by_pod(build_timeline([by_condition, by_start], [], now=NOW))
    assert (bars["a"].start, bars["a"].start_from) == (T0 + timedelta(seconds=2), "condition")
    assert (bars["b"].start, bars["b"].start_from) == (T0 + timedelta(seconds=3), "startTime")


def test_an_event_of_another_pod_of_the_same_name_is_not_its_bind() -> None:
    pods = [pod("a", node="n1", scheduled=7, finished=9)]
    events = [event("Scheduled", "a", 1, uid="an-older-pod")]
    bar = by_pod(build_timeline(pods, events, now=NOW))["a"]
    assert bar.start_from == "condition"
    assert bar.start == T0 + timedelta(seconds=7)


def test_running_pods_end_now_and_terminating_ones_at_their_deletion() -> None:
    pods = [
        pod("running", node="n1", scheduled=1),
        pod("stopping", node="n2", scheduled=1, deleting=30),
        pod("grace", node="n3", scheduled=1, deleting=90),  # grace period not over yet
    ]
    bars = by_pod(build_timeline(pods, [], now=NOW))
    assert (bars["running"].end, bars["running"].open, bars["running"].state) == (
        NOW,
        True,
        "running",
    )
    assert (bars["stopping"].end, bars["stopping"].end_from) == (
        T0 + timedelta(seconds=30),
        "deletionTimestamp",
    )
    assert (bars["grace"].end, bars["grace"].state, bars["grace"].open) == (
        NOW,
        "terminating",
        True,
    )


def test_a_finish_truncated_before_a_precise_bind_does_not_make_a_negative_bar() -> None:
    pods = [pod("a", node="n1", scheduled=1, finished=1)]
    bar = by_pod(build_timeline(pods, [event("Scheduled", "a", 1.6)], now=NOW))["a"]
    assert bar.end == bar.start == T0 + timedelta(seconds=1.6)


def test_pods_that_never_bound_are_pending_bars_from_creation_to_now() -> None:
    waiting = pod("w", created=3, group="g", message="0/4 nodes are available")
    done = pod("never-ran", phase="Failed")
    timeline = build_timeline([waiting, done], [], [podgroup("g", "q")], [node("n1")], now=NOW)
    bars = by_pod(timeline)
    assert set(bars) == {"w"}
    assert (bars["w"].start, bars["w"].end, bars["w"].bound) == (T0 + timedelta(seconds=3), NOW, 0)
    assert bars["w"].lane == PENDING_LANE
    assert bars["w"].reason == "0/4 nodes are available"
    assert timeline.lanes == ["n1", PENDING_LANE]


def test_lanes_are_every_node_in_natural_order_and_overlapping_bars_get_slots() -> None:
    pods = [
        pod("a", node="node-2", scheduled=1, finished=5),
        pod("b", node="node-2", scheduled=2, finished=6),
        pod("c", node="node-2", scheduled=5, finished=8),  # a's slot is free again at 5
        pod("d", node="node-10", scheduled=1, finished=2),
    ]
    nodes = [node("node-10"), node("node-2"), node("node-1")]
    timeline = build_timeline(pods, [], nodes=nodes, now=NOW)
    assert timeline.lanes == ["node-1", "node-2", "node-10"]
    assert timeline.slots == {"node-1": 1, "node-2": 2, "node-10": 1}
    bars = by_pod(timeline)
    assert (bars["a"].slot, bars["b"].slot, bars["c"].slot) == (0, 1, 0)


def test_gangs_are_the_pods_podgroups_in_order_of_their_first_bind() -> None:
    pods = [
        pod("b-0", node="n1", scheduled=5, group="b", finished=9),
        pod("a-0", node="n2", scheduled=1, group="a", finished=4),
        pod("a-1", node="n3", scheduled=1, group="a", finished=4),
        pod("solo", node="n4", scheduled=2, finished=3),
    ]
    pods[0]["metadata"]["annotations"] = {}
    pods[0]["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "b"}  # coscheduling
    timeline = build_timeline(pods, [], now=NOW)
    assert timeline.groups == ["default/a", "default/b"]
    bars = by_pod(timeline)
    assert bars["a-0"].group == bars["a-1"].group == "default/a"
    assert (bars["b-0"].group, bars["solo"].group) == ("default/b", "")


def test_queue_lanes_come_from_the_podgroups_spec_queue() -> None:
    pods = [
        pod("a-0", node="n1", created=0, scheduled=2, group="a", finished=4),
        pod("a-1", node="n2", created=0, scheduled=2, group="a", finished=4),
        pod("b-0", node="n1", created=1, scheduled=5, group="b", finished=9),
        pod("c-0", created=1, group="c"),
        pod("solo", node="n3", created=0, scheduled=0, finished=1),
    ]
    pods[4]["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "adhoc"}
    pods.append(pod("plain", node="n3", created=1, scheduled=1, finished=2))
    groups = [podgroup("a", "research"), podgroup("b", "prod"), podgroup("c", None)]
    timeline = build_timeline(pods, [], groups, now=NOW, lanes_by="queues")
    bars = by_pod(timeline)
    assert {name: bar.lane for name, bar in bars.items()} == {
        "a-0": "research",
        "a-1": "research",
        "b-0": "prod",
        "c-0": "default",  # a PodGroup without spec.queue is in Volcano's default queue
        "solo": "adhoc",
        "plain": NO_QUEUE,
    }
    assert timeline.lanes == ["adhoc", "default", "prod", "research", NO_QUEUE]
    # In queue lanes a pod takes its slot from its creation (its wait is drawn too).
    assert timeline.slots["research"] == 2
    with pytest.raises(ValueError, match="lanes"):
        build_timeline(pods, [], groups, now=NOW, lanes_by="racks")


def test_a_finished_vcjobs_pods_keep_their_queue_lane_without_their_podgroup() -> None:
    """Volcano deletes a completed Job's PodGroup; its pods carry volcano.sh/queue-name."""
    pods = [
        pod("j-0", node="n1", created=0, scheduled=1, group="j-u", finished=3),
        pod("k-0", node="n2", created=0, scheduled=1, group="k-u", finished=3),
    ]
    pods[0]["metadata"]["labels"] = {"volcano.sh/queue-name": "qa"}
    pods[1]["metadata"]["annotations"] = {"volcano.sh/queue-name": "qb"}
    timeline = build_timeline(pods, [], [], now=NOW, lanes_by="queues")
    assert {name: bar.lane for name, bar in by_pod(timeline).items()} == {"j-0": "qa", "k-0": "qb"}
    assert NO_QUEUE not in timeline.lanes


def test_pods_gone_from_the_api_are_drawn_from_their_events() -> None:
    events = [
        event("Scheduled", "victim", 2, note="Successfully assigned default/victim to n2"),
        event("Preempted", "victim", 7, note="preempted by default/vip"),
        event("Scheduled", "vanished", 3, note="Successfully assigned default/vanished to n1"),
    ]
    timeline = build_timeline([], events, now=NOW)
    bars = by_pod(timeline)
    assert set(bars) == {"victim"}
    assert (bars["victim"].node, bars["victim"].state) == ("n2", "deleted")
    assert (bars["victim"].start, bars["victim"].end) == (
        T0 + timedelta(seconds=2),
        T0 + timedelta(seconds=7),
    )
    assert timeline.unknown_end == ["default/vanished"]
    assert [(m.reason, m.subject) for m in timeline.marks] == [("Preempted", "default/victim")]


def test_gang_events_are_marks_and_t0_is_the_first_creation() -> None:
    pods = [pod("a-0", node="n1", created=2, scheduled=3, group="a", finished=5)]
    events = [
        event("GangCommitted", "a", 3.2, kind="PodGroup", note="quorum reached"),
        event("Scheduled", "a-0", 3.3),
        event("FailedScheduling", "a-0", 2.5),  # not a mark
    ]
    timeline = build_timeline(pods, events, now=NOW)
    assert timeline.t0 == T0 + timedelta(seconds=2)
    assert [(m.reason, m.group, m.time) for m in timeline.marks] == [
        ("GangCommitted", "default/a", T0 + timedelta(seconds=3.2))
    ]


def test_times_parse_from_rfc3339_with_or_without_fractions() -> None:
    assert parse_time("2026-01-02T03:04:05Z") == T0
    assert parse_time("2026-01-02T03:04:05.250000Z") == T0 + timedelta(seconds=0.25)
    assert parse_time("2026-01-02T04:04:05+01:00") == T0
    assert parse_time("") is None
    assert parse_time("yesterday") is None


# ---------------------------------------------------------------------------------- render


def _workload() -> Timeline:
    pods = [
        pod("a-0", node="n1", created=0, scheduled=1, group="a", finished=3),
        pod("a-1", node="n2", created=0, scheduled=1, group="a", finished=3),
        pod("b-0", node="n1", created=0, scheduled=4, group="b"),
        pod("b-1", created=0, group="b", message="0/2 nodes are available"),
        pod("solo", node="n2", created=0, scheduled=4, finished=5),
    ]
    events = [event("GangCommitted", "a", 1, kind="PodGroup")]
    return build_timeline(pods, events, [podgroup("a", "q"), podgroup("b", "q")], now=NOW)


def test_render_writes_a_png_of_the_size_it_says_and_the_bars_as_drawn(tmp_path: Path) -> None:
    from matplotlib import image

    from vulcan.timeline.render import render

    data = render(_workload(), tmp_path / "t.png", title="test")
    raw = (tmp_path / "t.png").read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.imread(tmp_path / "t.png").shape[:2] == (data["height_px"], data["width_px"])
    colours = {b["pod"]: b["color"] for b in data["bars"]}
    assert colours["default/a-0"] == colours["default/a-1"]
    assert colours["default/b-0"] == colours["default/b-1"] != colours["default/a-0"]
    assert colours["default/solo"] == "#9e9e9e"
    assert [g["group"] for g in data["groups"]] == ["default/a", "default/b"]
    bar = next(b for b in data["bars"] if b["pod"] == "default/a-0")
    assert (bar["start"], bar["end"], bar["start_s"], bar["end_s"]) == (at(1), at(3), 1.0, 3.0)
    open_bar = next(b for b in data["bars"] if b["pod"] == "default/b-0")
    assert open_bar["open"] and open_bar["end"] == format_time(NOW)


def test_render_writes_svg_with_the_pods_as_text(tmp_path: Path) -> None:
    from vulcan.timeline.render import render

    data = render(_workload(), tmp_path / "t.svg")
    text = (tmp_path / "t.svg").read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert "a-0" in text and "GangCommitted" in text
    assert data["format"] == "svg"
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        render(_workload(), tmp_path / "t.gif")


def test_draw_writes_the_data_next_to_the_picture(tmp_path: Path) -> None:
    from vulcan.timeline.command import draw

    objects = {
        "pods": [pod("a", node="n1", scheduled=1, finished=2)],
        "events": [],
        "podgroups": [],
        "nodes": [node("n1")],
    }
    data = draw(objects, tmp_path / "out" / "x.png", now=NOW)
    written = json.loads((tmp_path / "out" / "x.json").read_text())
    assert written == data
    assert [(b["pod"], b["node"], b["start"], b["end"]) for b in written["bars"]] == [
        ("default/a", "n1", at(1), at(2))
    ]


def test_the_command_fails_in_one_line() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vulcan", "timeline", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )

    wrong = run("--output", "x.gif")
    assert wrong.returncode == 2
    assert wrong.stderr.strip().splitlines() == [
        "vulcan timeline: error: x.gif: must end in .png or .svg"
    ]
    missing = run("--output", "x.png", "--kubeconfig", "/nonexistent/kubeconfig")
    assert missing.returncode == 1
    assert len(missing.stderr.strip().splitlines()) == 1
    refused = run("--output", "x.png", "--master", "http://127.0.0.1:9")
    assert refused.returncode == 1
    assert refused.stderr.startswith("vulcan timeline: error:")
    assert len(refused.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------- labels and legend


def _gang_marks(count: int) -> list[Any]:
    from vulcan.timeline.records import Mark

    uid = "-3f6c2b8e-5c1d-4b7a-9a1e-2f0a8b9c7d6e"
    marks = []
    for i in range(count):
        group = f"default/j{i:02d}{uid}"
        for reason, delay in (("Admitted", 0.0), ("GangCommitted", 0.4), ("GangReleased", 9.0)):
            when = T0 + timedelta(seconds=0.3 * i + delay)
            marks.append(Mark(when, reason, "PodGroup", group, group, ""))
    return marks


def test_gang_event_labels_never_overlap_and_stay_inside() -> None:
    from vulcan.timeline.labels import GAP_IN, LABEL_CHAR_IN, merge, place

    labels = merge(_gang_marks(20), T0, "one")
    # A gang's events within 2 s share a label; the job uid is not drawn.
    assert labels[0].text == "j00 Admitted, GangCommitted"
    assert sum(label.text.startswith("j00 ") for label in labels) == 2
    x_max, axes_in = 12.0, 8.8
    rows = place(labels, x_max, axes_in)
    assert 1 < rows < len(labels)
    per_in = x_max / axes_in
    spans: dict[int, list[tuple[float, float]]] = {}
    for label in labels:
        width = (len(label.text) + 1) * LABEL_CHAR_IN * per_in
        start = label.x - width if label.right else label.x
        assert start >= -1e-9 or not label.right
        assert (start + width <= x_max + 1e-9) or label.right
        spans.setdefault(label.row, []).append((start, start + width))
    for row in spans.values():
        row.sort()
        for (_, end), (start, _) in itertools.pairwise(row):
            assert end + GAP_IN * per_in <= start + 1e-9


def test_the_legend_names_every_gang_explains_every_mark_and_fits() -> None:
    from vulcan.timeline.records import Mark
    from vulcan.timeline.render import LEGEND_CHAR_IN, WIDTH_IN, _legend_handles, _legend_layout

    pods = [
        pod(f"j{i:02d}-0", node="n1", created=0, scheduled=1, group=f"j{i:02d}-{i}", finished=3)
        for i in range(20)
    ]
    pods.append(pod("running", node="n2", created=0, scheduled=1))
    timeline = build_timeline(pods, [], now=NOW)
    timeline.marks.append(Mark(T0, "Evicted", "Pod", "default/running", "", ""))
    timeline.marks.append(Mark(T0, "GangCommitted", "PodGroup", "default/j00-0", "", ""))
    handles = _legend_handles(timeline, {g: "#000000" for g in timeline.groups}, {"default"})
    names = [str(h.get_label()) for h in handles]
    assert [n for n in names if n.startswith("j")] == [f"j{i:02d}-{i}" for i in range(20)]
    assert "× pod evicted/preempted" in names
    assert "gang event (label above)" in names and "running at capture" in names
    columns, rows = _legend_layout(handles)
    widest = max(len(n) for n in names) * LEGEND_CHAR_IN + 0.55
    assert columns * widest <= WIDTH_IN and columns * rows >= len(handles)


def test_node_lanes_are_grouped_and_coloured_by_their_lowest_tier_hypernode(
    tmp_path: Path,
) -> None:
    from vulcan.timeline.render import render

    # Two leaves under a spine; n4 is in none. Lanes go leaf by leaf, the loose node last.
    tree = [
        hypernode_manifest("spine", 2, ["leaf-b", "leaf-a"], kind="HyperNode"),
        hypernode_manifest("leaf-b", 1, ["n0", "n3"]),
        hypernode_manifest("leaf-a", 1, ["n1", "n2"]),
    ]
    pods = [
        pod("a", node="n0", created=0, scheduled=1, finished=4, group="g"),
        pod("b", node="n3", created=0, scheduled=1, finished=4, group="g"),
    ]
    nodes = [node(f"n{i}") for i in range(5)]
    timeline = build_timeline(pods, [], [], nodes, now=T0 + timedelta(seconds=9), hypernodes=tree)
    assert timeline.lanes == ["n1", "n2", "n0", "n3", "n4"]
    assert timeline.domains == {
        "n1": ("leaf-a", 1),
        "n2": ("leaf-a", 1),
        "n0": ("leaf-b", 1),
        "n3": ("leaf-b", 1),
    }
    data = render(timeline, tmp_path / "t.svg")
    assert [lane.get("hypernode") for lane in data["lanes"]] == [
        "leaf-a", "leaf-a", "leaf-b", "leaf-b", None
    ]  # fmt: skip
    svg = (tmp_path / "t.svg").read_text()
    assert "HyperNode leaf-a (tier 1)" in svg and "HyperNode leaf-b (tier 1)" in svg
    # Without HyperNodes: natural order, no bands, no HyperNode in the data.
    plain = build_timeline(pods, [], [], nodes, now=T0 + timedelta(seconds=9))
    assert plain.lanes == ["n0", "n1", "n2", "n3", "n4"] and plain.domains == {}
