"""`vulcan timeline` against a running `vulcan sim up` (extender and controllers): a gang and two
plain pods run to completion and one pod can never bind; the command, run as a user runs it,
writes a PNG and an SVG whose data say what the API says: each bar from the pod's bind (its
PodScheduled condition) to its finish (its container's finishedAt), on the pod's node, gang
members in one colour."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import (
    SimCluster,
    phase,
    pod_manifest,
    scheduled_condition,
    start_cluster,
    wait_for,
)
from tests.helpers import REPO

GANG = "tl-gang"
MEMBERS = ("tl-gang-0", "tl-gang-1")
PLAIN = ("tl-solo-0", "tl-solo-1")
NEVER = "tl-too-big"
RESOLUTION = timedelta(seconds=1)  # metav1.Time: whole seconds, truncated
# The Scheduled event (microseconds) is written just after the Binding whose PodScheduled
# condition (whole seconds) it reports: it may fall a little past the condition's second.
EVENT_LAG = timedelta(seconds=0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-timeline"),
        "--nodes",
        "3",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "1s",
    )


def time_of(text: str) -> datetime:
    return datetime.fromisoformat(text)


def finished_at(pod: dict[str, Any]) -> datetime:
    states = [c["state"]["terminated"] for c in pod["status"]["containerStatuses"]]
    return max(time_of(s["finishedAt"]) for s in states)


def timeline(cluster: SimCluster, output: Path, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vulcan",
            "timeline",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--output",
            str(output),
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"timeline: {output} "), result.stdout
    if "--lanes" not in args:
        # The cluster's 3 nodes; the "(pending)" lane of the pod that never binds is no node.
        assert ", 3 nodes); data: " in result.stdout, result.stdout
    return json.loads(output.with_suffix(".json").read_text())


def test_timeline_draws_each_pod_from_bind_to_finish(cluster: SimCluster, tmp_path: Path) -> None:
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": GANG},
            "spec": {"minMember": len(MEMBERS)},
        }
    )
    gang = [
        pod_manifest(
            name,
            cpu="1",
            duration="1s",
            annotations={"scheduling.k8s.io/group-name": GANG},
            schedulerName="volcano",
        )
        for name in MEMBERS
    ]
    plain = [pod_manifest(name, cpu="1", duration="1s") for name in PLAIN]
    cluster.apply([*gang, *plain, pod_manifest(NEVER, cpu="1000")])
    names = (*MEMBERS, *PLAIN)
    wait_for(
        "the gang and the plain pods to succeed",
        lambda: all(phase(cluster.pod(n)) == "Succeeded" for n in names),
        timeout=60,
    )
    pods = {n: cluster.pod(n) for n in names}

    data = timeline(cluster, tmp_path / "x.png")

    # A PNG that reads back at the size the data says.
    from matplotlib import image
    from PIL import Image

    png = tmp_path / "x.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.imread(png).shape[:2] == (data["height_px"], data["width_px"])
    with Image.open(png) as picture:
        assert picture.format == "PNG"
        assert picture.size == (data["width_px"], data["height_px"])

    # Each bar: on the pod's node, from its bind to its finish, as the API has them.
    bars = {b["pod"].split("/", 1)[1]: b for b in data["bars"]}
    assert set(bars) == {*names, NEVER}
    for name, pod in pods.items():
        bar = bars[name]
        assert (bar["node"], bar["lane"], bar["state"]) == (
            pod["spec"]["nodeName"],
            pod["spec"]["nodeName"],
            "succeeded",
        )
        bound = time_of(scheduled_condition(pod)["lastTransitionTime"])
        start, end = time_of(bar["start"]), time_of(bar["end"])
        assert bound <= start < bound + RESOLUTION + EVENT_LAG, (name, bar, bound)
        assert abs(end - finished_at(pod)) < RESOLUTION, (name, bar)
        assert not bar["open"]

    # The pod that can never bind: pending, from its creation to the moment of the picture.
    never = bars[NEVER]
    assert (never["bound"], never["lane"], never["open"]) == (False, "(pending)", True)
    assert never["end"] == data["now"]
    assert "Insufficient cpu" in never["reason"]

    # The gang in one colour of its own; its commit is marked from the extender's event.
    colours = {name: bars[name]["color"] for name in names}
    assert colours[MEMBERS[0]] == colours[MEMBERS[1]]
    assert colours[MEMBERS[0]] not in (colours[PLAIN[0]], colours[PLAIN[1]])
    assert data["groups"] == [{"group": f"default/{GANG}", "color": colours[MEMBERS[0]]}]
    assert any(
        m["reason"] == "GangCommitted" and m["subject"] == f"default/{GANG}" for m in data["marks"]
    )

    # Queues as lanes, in SVG: the gang in its PodGroup's queue, the plain pods in none.
    svg = tmp_path / "q.svg"
    queues = timeline(cluster, svg, "--lanes", "queues")
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
    lanes = {b["pod"].split("/", 1)[1]: b["lane"] for b in queues["bars"]}
    assert {lanes[n] for n in MEMBERS} == {"default"}
    assert {lanes[n] for n in PLAIN} == {"(no queue)"}
    # The same bars (of the finished pods), only in other lanes.
    same = {b["pod"].split("/", 1)[1]: (b["start"], b["end"]) for b in queues["bars"]}
    assert {n: same[n] for n in names} == {n: (bars[n]["start"], bars[n]["end"]) for n in names}
