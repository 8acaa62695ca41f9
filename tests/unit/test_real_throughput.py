"""bench/real_throughput.py: what it does where the real tier's binaries are absent, the
exact shape of its last lines (the contracts other tools parse), and its gang workload's flags,
objects and measures (bench/real_gangs.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import orjson
import pytest

from bench.real_gang_objects import Layout, creations
from bench.real_gangs import GangPhase, Progress, _Member, layout, percentile, summarize
from bench.real_gangs import last_line as gang_last_line
from bench.real_throughput import last_line, parse_args
from tests.helpers import REPO


def test_without_the_binaries_it_says_so_and_exits_without_measuring() -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBEBUILDER_ASSETS", "VULCAN_KUBE_ASSETS")
    }
    result = subprocess.run(
        [sys.executable, "-m", "bench.real_throughput", "--nodes", "10", "--pods", "10"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith("bench.real_throughput needs the real tier's Kubernetes binaries")
    assert "KUBEBUILDER_ASSETS" in lines[0] and "VULCAN_KUBE_ASSETS" in lines[0]
    assert "pods_per_s=" not in result.stdout


def test_last_line_has_exactly_the_keys_in_order() -> None:
    line = last_line(334.25, 141.04, 219.6, 2.345, 0.6)
    assert line == (
        "pods_per_s=334.2 with_extender_pods_per_s=141.0 floor_pods_per_s=219.6 "
        "extender_to_floor=0.642 extender_cpu_ms_per_pod=2.345 floor_cpu_ms_per_pod=0.600"
    )
    shape = re.compile(
        r"pods_per_s=[\d.]+ with_extender_pods_per_s=[\d.]+ floor_pods_per_s=[\d.]+ "
        r"extender_to_floor=[\d.]+ extender_cpu_ms_per_pod=[\d.]+ floor_cpu_ms_per_pod=[\d.]+"
    )
    assert shape.fullmatch(last_line(1000.0, 600.0, 650.0, 1.0, 0.5))


def test_the_workload_defaults_to_plain_pods_and_gangs_take_their_shape() -> None:
    plain = parse_args([])
    assert (plain.workload, plain.gang_shape, plain.gang_size, plain.create_first) == (
        "plain",
        "jobs",
        None,
        False,
    )
    gangs = parse_args(["--workload", "gangs", "--gang-shape", "podgroups", "--create-first"])
    assert (gangs.workload, gangs.gang_shape, gangs.create_first) == ("gangs", "podgroups", True)
    with pytest.raises(SystemExit):
        parse_args(["--workload", "bursts"])
    with pytest.raises(SystemExit):
        parse_args(["--workload", "gangs", "--gang-shape", "deployments"])


def test_gang_layouts_are_100_jobs_of_100_or_1000_podgroups_of_10_for_10000_pods() -> None:
    assert layout(parse_args(["--workload", "gangs"])) == Layout("jobs", 100, 100)
    podgroups = parse_args(["--workload", "gangs", "--gang-shape", "podgroups"])
    assert layout(podgroups) == Layout("podgroups", 1000, 10)
    small = parse_args(["--workload", "gangs", "--pods", "8", "--gang-size", "4"])
    assert layout(small) == Layout("jobs", 2, 4)


def test_gang_flags_that_cannot_make_whole_gangs_are_refused_naming_the_flag() -> None:
    with pytest.raises(
        SystemExit, match="--pods: 10 is not a positive multiple of the gang size 4"
    ):
        layout(parse_args(["--workload", "gangs", "--pods", "10", "--gang-size", "4"]))
    with pytest.raises(SystemExit, match="--gang-size: 0"):
        layout(parse_args(["--workload", "gangs", "--pods", "10", "--gang-size", "0"]))
    with pytest.raises(SystemExit, match="--bind-marker"):
        layout(parse_args(["--workload", "gangs", "--bind-marker"]))


def test_bad_gang_flags_are_said_before_the_binaries_are_looked_for() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.real_throughput", "--workload", "gangs", "--pods", "10"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "--pods: 10 is not a positive multiple of the gang size 100" in result.stderr


def test_percentile_is_the_nearest_rank_of_what_was_measured() -> None:
    hundred = [float(v) for v in range(100, 0, -1)]
    assert percentile(hundred, 0.99) == 99.0
    assert percentile(hundred, 0.5) == 50.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([3.0, 1.0, 2.0], 0.99) == 3.0
    assert percentile([7.5], 0.99) == 7.5
    with pytest.raises(ValueError):
        percentile([], 0.99)


def test_gang_last_line_has_exactly_the_keys_in_order() -> None:
    line = gang_last_line(181.25, 200.0, 31.456, 0.9, 0.75)
    assert line == (
        "gang_pods_per_s=181.2 plain_pods_per_s=200.0 p99_gang_whole_s=31.46 "
        "gang_cpu_ms_per_pod=0.900 plain_cpu_ms_per_pod=0.750 gang_to_plain=0.906"
    )
    shape = re.compile(
        r"gang_pods_per_s=[\d.]+ plain_pods_per_s=[\d.]+ p99_gang_whole_s=[\d.]+ "
        r"gang_cpu_ms_per_pod=[\d.]+ plain_cpu_ms_per_pod=[\d.]+ gang_to_plain=[\d.]+"
    )
    assert shape.fullmatch(gang_last_line(1000.0, 600.0, 2.0, 1.0, 0.5))


def test_podgroup_gangs_are_made_one_after_another_group_first() -> None:
    made = creations("gangs", Layout("podgroups", 2, 3), 6)
    kinds = [orjson.loads(body)["kind"] for _, body in made]
    assert kinds == ["PodGroup", "Pod", "Pod", "Pod", "PodGroup", "Pod", "Pod", "Pod"]
    group = orjson.loads(made[4][1])
    assert group["metadata"]["name"] == "gang-00001" and group["spec"]["minMember"] == 3
    member = orjson.loads(made[5][1])
    assert member["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "gang-00001"}
    assert member["spec"]["schedulerName"] == "volcano"
    assert member["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}
    assert made[5][0] == "/api/v1/namespaces/default/pods"


def test_job_gangs_are_one_task_jobs_whose_pods_are_all_the_gang() -> None:
    made = creations("gangs", Layout("jobs", 2, 4), 8)
    assert [path for path, _ in made] == [
        "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
    ] * 2
    job = orjson.loads(made[1][1])
    assert job["metadata"]["name"] == "gang-00001"
    assert (job["spec"]["minAvailable"], job["spec"]["schedulerName"]) == (4, "volcano")
    (task,) = job["spec"]["tasks"]
    assert task["replicas"] == 4
    assert task["template"]["spec"]["schedulerName"] == "volcano"
    plain = creations("plain", Layout("jobs", 2, 4), 8)
    assert len(plain) == 8
    assert all("schedulerName" not in orjson.loads(body)["spec"] for _, body in plain)


def _pod(name: str, group: str, node: str = "") -> Any:
    meta: dict[str, Any] = {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}}
    return _Member({"metadata": meta, "spec": {"nodeName": node} if node else {}})


def test_a_gang_is_whole_when_its_last_member_is_bound() -> None:
    progress = Progress(pods=4, size=2)
    for name, group in (("a-0", "a"), ("a-1", "a"), ("b-0", "b"), ("b-1", "b")):
        progress.on(_pod(name, group))
    assert progress.all_seen.is_set() and not progress.bound
    progress.on(_pod("a-0", "a", "node-1"))
    progress.on(_pod("a-0", "a", "node-1"))  # the same pod seen bound again counts once
    progress.on(_pod("b-0", "b", "node-2"))
    assert progress.whole == {}
    progress.on(_pod("a-1", "a", "node-1"))
    assert list(progress.whole) == ["a"] and progress.whole["a"] >= 0
    assert not progress.all_bound.is_set()
    progress.on(_pod("b-1", "b", "node-3"))
    assert set(progress.whole) == {"a", "b"} and progress.all_bound.is_set()


def test_the_summary_sets_every_process_cpu_per_pod_of_each_phase_side_by_side(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = GangPhase("plain", 200.0, 200.0, {"kube-apiserver": 4.0, "extender": 1.0}, [])
    gangs = GangPhase("gangs", 150.0, 150.0, {"kube-apiserver": 7.0, "extender": 2.0}, [1.0])
    assert gangs.all_cpu_ms_per_pod(1000) == 9.0
    line = summarize([plain, gangs], 1000, Layout("jobs", 10, 100))
    printed = capsys.readouterr().out
    assert "all processes' CPU ms per pod: plain 5.00, gangs 9.00 (plain/gangs=0.556" in printed
    assert "gang/plain=0.750" in printed
    assert line.startswith("gang_pods_per_s=150.0 plain_pods_per_s=200.0 ")
