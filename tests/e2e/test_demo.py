"""`vulcan demo`: the demo `make demo` runs, as a user runs it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import EXAMPLES, REPO
from vulcan.cli import build_parser

PROGRESS = re.compile(r"^\s+\d+\.\ds\s+tf-a: (?P<a>[^|]+) \| tf-b: (?P<b>.+)$")


def counts(text: str) -> dict[str, int]:
    """'2 running 2 pending' -> {'running': 2, 'pending': 2}."""
    return {state: int(n) for n, state in re.findall(r"(\d+) (\w+)", text)}


def progress(lines: list[str]) -> list[tuple[dict[str, int], dict[str, int]]]:
    return [(counts(m["a"]), counts(m["b"])) for line in lines if (m := PROGRESS.match(line))]


def test_gang_demo_shows_the_deadlock_then_vulcan_running_the_jobs_in_turn(tmp_path: Path) -> None:
    out = _demo("gang", "--timeline-dir", str(tmp_path))
    plain, rest = out.split("\n2. kube-scheduler + vulcan", 1)
    vulcan, summary = rest.split("\nWhat happened:", 1)

    # Without vulcan: both jobs half-placed, and still so after the wait.
    steps = progress(plain.splitlines())
    half = {"running": 2, "pending": 2}
    assert steps[-1] == (half, half), plain
    assert "deadlock: all 4 GPUs taken" in plain
    assert "Insufficient nvidia.com/gpu" in plain

    # With vulcan: both complete, one after the other (never both running at once), and the
    # held job's PodGroup condition was read from the API.
    steps = progress(vulcan.splitlines())
    assert steps[-1] == ({"succeeded": 4}, {"succeeded": 4}), vulcan
    assert not any(a.get("running") and b.get("running") for a, b in steps), vulcan
    assert any(
        (a == {"succeeded": 4} and not b.get("succeeded"))
        or (b == {"succeeded": 4} and not a.get("succeeded"))
        for a, b in steps
    ), vulcan
    assert "held at filter; PodGroup Unschedulable: NotEnoughResources" in vulcan
    assert "both jobs completed: all 8 workers Succeeded" in vulcan

    lines = [line for line in summary.splitlines() if line.strip()]
    assert "a deadlock" in lines[0]
    assert "admitted whole" in lines[1]
    assert "Unschedulable condition said NotEnoughResources" in lines[2]
    assert "one after the other" in lines[3]
    assert "vulcan completed both jobs" in lines[-1]

    # Each run drawn (as `vulcan timeline` draws), and said where.
    for name in ("gang-deadlock", "gang-vulcan"):
        assert f"  timeline: {tmp_path / name}.png" in out.splitlines()
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    deadlock = json.loads((tmp_path / "gang-deadlock.json").read_text())["bars"]
    assert (
        sorted((b["bound"], b["open"]) for b in deadlock)
        == [(False, True)] * 4 + [(True, True)] * 4
    )
    finished = json.loads((tmp_path / "gang-vulcan.json").read_text())["bars"]
    assert {b["state"] for b in finished} == {"succeeded"} and len(finished) == 8
    first, second = sorted(
        ([b for b in finished if f"/{job}-" in b["pod"]] for job in ("tf-a", "tf-b")),
        key=lambda bars: min(b["start"] for b in bars),
    )
    # One gang after the other: the second bound after the first's last finish (which the API
    # has in whole seconds, truncated).
    assert min(b["start_s"] for b in second) >= max(b["end_s"] for b in first)
    assert len({b["color"] for b in first}) == len({b["color"] for b in second}) == 1


def test_demo_without_argument_is_the_gang_demo() -> None:
    assert build_parser().parse_args(["demo"]).which == "gang"


def test_extender_walkthrough_still_runs() -> None:
    out = _demo("extender")
    assert "web-1 (cpu 3): filter passed" in out
    assert "huge (cpu 32): no node has room (kube-scheduler's own filters)" in out


def test_job_demo_runs_a_volcano_job_to_completion_and_ttl_cleanup() -> None:
    out = _demo("job")
    phases = re.findall(r"job (\w+)\s+podgroup (\S+)", out)
    # The demo prints what it sees when it looks (every 0.1 s): on a busy machine the early
    # states (Pending, Inqueue) can pass between two looks; the end cannot.
    assert any(group in ("Inqueue", "Running") for _, group in phases), phases
    assert [p for p, _ in phases if p in ("Running", "Completed")][-1] == "Completed"
    assert "svc plugin: /etc/volcano/worker.host lists tensorflow-benchmark-worker-0" in out
    assert "job deleted (ttlSecondsAfterFinished)" in out


def test_flow_demo_runs_the_pipeline_stage_by_stage() -> None:
    out = _demo("flow")
    seen = re.findall(r"flow (\w+)\s+jobs (.*)", out)
    assert seen[-1][0] == "Succeed"

    def started(step: str, jobs: str) -> bool:
        return f"{step}:·" not in jobs

    # Every look shows each stage started only once its dependencies completed.
    needs = {"b": ["a"], "c": ["b"], "d": ["b"], "e": ["c", "d"]}
    for _, jobs in seen:
        for step, targets in needs.items():
            if started(step, jobs):
                assert all(f"{t}:Completed" in jobs for t in targets), jobs
    assert "every stage ran after its dependencies" in out


def test_the_packaged_pipeline_is_the_users_fixture() -> None:
    """`vulcan demo flow` runs the pipeline of examples/ unchanged (a copy ships in the
    package, where the demo finds it without a checkout)."""
    packaged = REPO / "vulcan" / "examples" / "jobflow-pipeline.yaml"
    assert packaged.read_text() == (EXAMPLES / "jobflow-pipeline.yaml").read_text()


def _demo(which: str, *args: str) -> str:
    """`vulcan demo WHICH` as a user runs it: its output, once it exited 0."""
    result = subprocess.run(
        [sys.executable, "-m", "vulcan", "demo", which, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout
