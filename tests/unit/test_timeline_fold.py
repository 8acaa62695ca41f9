"""`vulcan timeline` of a run with more pods than a screen holds: one row per gang, at most one
screen tall; a small run is drawn a row per pod exactly as before."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from matplotlib import image

from tests.unit.test_timeline import NOW, _workload, event, node, pod, podgroup
from vulcan.timeline.command import draw
from vulcan.timeline.data import build_timeline
from vulcan.timeline.fold import NO_GANG_ROW, fold
from vulcan.timeline.render import height_px, render
from vulcan.timeline.render_folded import SCREEN_PX


def _job(members: int, name: str = "big", *, created: float = 0, run: float = 20) -> list[Any]:
    """A Volcano Job's gang: `members` pods on 4 nodes, bound together, ending together."""
    return [
        pod(
            f"{name}-worker-{i}",
            node=f"n{i % 4}",
            created=created,
            scheduled=created + 1,
            finished=created + 1 + run,
            group=name,
        )
        for i in range(members)
    ]


def _objects(pods: list[Any], events: list[Any] | None = None) -> dict[str, list[Any]]:
    return {
        "pods": pods,
        "events": events or [],
        "podgroups": [
            podgroup(g, "q")
            for g in {
                p["metadata"]["annotations"].get("scheduling.k8s.io/group-name", "") for p in pods
            }
            if g
        ],
        "nodes": [node(f"n{i}") for i in range(4)],
    }


def _png_size(path: Path) -> tuple[int, int]:
    height, width = image.imread(path).shape[:2]
    return width, height


def test_a_200_pod_jobs_timeline_is_one_row_at_most_one_screen_tall(tmp_path: Path) -> None:
    objects = _objects(_job(200), [event("GangCommitted", "big", 1, kind="PodGroup")])
    per_pod = build_timeline(
        objects["pods"], objects["events"], objects["podgroups"], objects["nodes"], now=NOW
    )
    assert height_px(per_pod) > 5 * SCREEN_PX  # a row per pod: 200 sub-rows

    data = draw(objects, tmp_path / "big.png", now=NOW)

    assert _png_size(tmp_path / "big.png") == (data["width_px"], data["height_px"])
    assert data["height_px"] <= SCREEN_PX
    assert data["folded"] is True
    assert data["rows"] == [{"row": 0, "label": "big (200 pods)"}]
    (gang,) = data["gangs"]
    assert (gang["group"], gang["members"], gang["bound"], gang["open"]) == (
        "default/big",
        200,
        200,
        False,
    )
    assert (gang["created_s"], gang["start_s"], gang["end_s"]) == (0.0, 1.0, 21.0)
    # Every pod is still in the data, as it is in the per-pod picture's.
    assert len(data["bars"]) == 200
    assert [m["reason"] for m in data["marks"]] == ["GangCommitted"]


def test_many_gangs_at_once_still_fit_one_screen(tmp_path: Path) -> None:
    pods = [p for g in range(120) for p in _job(2, f"g{g:03d}", created=g * 0.2, run=40)]
    pods += [
        pod(f"plain-{i}", node="n3", created=i, scheduled=i + 0.5, finished=i + 3)
        for i in range(30)
    ]
    pods += [pod(f"stuck-{i}", created=5, group="stuck") for i in range(3)]
    for suffix in ("png", "svg"):
        data = draw(_objects(pods), tmp_path / f"many.{suffix}", now=NOW)
        assert data["folded"] is True
        assert data["height_px"] <= SCREEN_PX
    assert _png_size(tmp_path / "many.png") == (data["width_px"], data["height_px"])
    gangs = {g["group"]: g for g in data["gangs"]}
    assert len(gangs) == 122  # 120 gangs, the stuck one, and the pods in no gang
    assert (gangs["default/stuck"]["bound"], gangs["default/stuck"]["start"]) == (0, None)
    assert gangs[""]["members"] == 30
    assert all(0 <= g["row"] < len(data["rows"]) for g in data["gangs"])


def test_one_row_per_gang_in_order_of_first_bind_then_the_pods_in_no_gang() -> None:
    pods = [
        *_job(3, "late", created=5),
        *_job(2, "early", created=0),
        pod("solo", node="n1", created=1, scheduled=2, finished=4),
        *[pod(f"waits-{i}", created=2, group="waits") for i in range(2)],
    ]
    pods.append(pod("late-extra", created=6, group="late"))
    timeline = build_timeline(pods, [], now=NOW)
    folded = fold(timeline, max_rows=10)
    assert not folded.shared
    assert folded.labels == [
        "early (2 pods)",
        "late (3/4 pods)",
        "waits (0/2 pods)",
        NO_GANG_ROW + " (1 pod)",
    ]
    late = next(g for g in folded.gangs if g.group == "default/late")
    assert (late.members, late.bound, late.open) == (4, 3, True)  # its pending member waits


def test_gangs_apart_in_time_share_a_row_when_one_each_would_not_fit() -> None:
    pods = [p for g in range(40) for p in _job(3, f"s{g:02d}", created=g * 2.0, run=1)]
    timeline = build_timeline(pods, [], now=NOW)
    folded = fold(timeline, max_rows=10)
    assert folded.shared and folded.rows < 10
    by_row: dict[int, list[Any]] = {}
    for gang in folded.gangs:
        by_row.setdefault(gang.row, []).append(gang)
    for gangs in by_row.values():
        gangs.sort(key=lambda g: g.created)
        for before, after in itertools.pairwise(gangs):
            assert before.end <= after.created  # never two gangs at once on one row
    assert folded.labels[0] == "s00 +" + str(len(by_row[0]) - 1)


def test_a_small_run_is_drawn_a_row_per_pod_as_before(tmp_path: Path) -> None:
    timeline = _workload()
    assert height_px(timeline) <= SCREEN_PX
    objects = {
        "pods": [
            pod("a-0", node="n1", created=0, scheduled=1, group="a", finished=3),
            pod("a-1", node="n2", created=0, scheduled=1, group="a", finished=3),
            pod("b-0", node="n1", created=0, scheduled=4, group="b"),
            pod("b-1", created=0, group="b", message="0/2 nodes are available"),
            pod("solo", node="n2", created=0, scheduled=4, finished=5),
        ],
        "events": [event("GangCommitted", "a", 1, kind="PodGroup")],
        "podgroups": [podgroup("a", "q"), podgroup("b", "q")],
        "nodes": [],
    }
    drawn = draw(objects, tmp_path / "small.svg", now=NOW)
    direct = render(timeline, tmp_path / "direct.svg")
    assert "folded" not in drawn and "gangs" not in drawn
    assert {**drawn, "image": ""} == {**direct, "image": ""}
    assert (tmp_path / "small.svg").read_bytes() == (tmp_path / "direct.svg").read_bytes()
    # The per-pod picture's size, as it was before folding existed: 3 lanes, 4 sub-rows.
    assert (drawn["width_px"], drawn["height_px"]) == (1100, 376)
    assert len(drawn["bars"]) == 5
