"""The JobFlow rules as pure functions: when a step starts, retries, skips, and the phase and
status Volcano computes (volcano-controllers.md §8.3)."""

from __future__ import annotations

from typing import Any

from core.api.flow import JobFlow, JobFlowSpec
from flow_controller.jobflow import state as fs
from flow_controller.jobflow.status import flow_status, same_status


def spec(*steps: tuple[str, list[str]], probe: dict[str, Any] | None = None) -> JobFlowSpec:
    flows: list[dict[str, Any]] = []
    for name, targets in steps:
        item: dict[str, Any] = {"name": name}
        if targets:
            item["dependsOn"] = {"targets": targets, **({"probe": probe} if probe else {})}
        flows.append(item)
    return JobFlowSpec.model_validate({"flows": flows})


DIAMOND = spec(("a", []), ("b", ["a"]), ("c", ["a"]), ("d", ["b", "c"]))


def view(name: str, phase: str, **kw: Any) -> fs.JobView:
    return fs.JobView(name=f"f-{name}", phase=phase, **kw)


def decide(s: JobFlowSpec, phase: str, jobs: dict[str, fs.JobView], **kw: Any) -> fs.Decisions:
    return fs.decide(
        "f",
        s,
        kw.get("annotations", {}),
        phase,
        jobs,
        kw.get("used", {}),
        kw.get("probes", {}),
    )


def test_roots_start_first_and_dependents_only_after_every_target_completed() -> None:
    assert decide(DIAMOND, "", {}).create == [("a", "no dependencies")]
    running = decide(DIAMOND, "Pending", {"a": view("a", "Completing")})
    assert running.create == [] and "to complete (Completing)" in running.waiting["b"]
    both = decide(DIAMOND, "Running", {"a": view("a", "Completed")})
    assert [s for s, _ in both.create] == ["b", "c"]  # in parallel
    half = decide(
        DIAMOND,
        "Running",
        {"a": view("a", "Completed"), "b": view("b", "Completed"), "c": view("c", "Running")},
    )
    assert half.create == []


def test_phase_moves_one_step_a_sync_as_volcano() -> None:
    done = {n: view(n, "Completed") for n in "abcd"}
    assert decide(DIAMOND, "Pending", done).phase == "Running"
    assert decide(DIAMOND, "Running", done).phase == "Succeed"
    assert decide(DIAMOND, "Pending", {"a": view("a", "Pending")}).phase == "Pending"
    assert decide(DIAMOND, "Pending", {"a": view("a", "Running")}).phase == "Running"


def test_a_failed_job_fails_the_flow_and_skips_its_dependents_only() -> None:
    jobs = {"a": view("a", "Completed"), "b": view("b", "Failed"), "c": view("c", "Running")}
    out = decide(DIAMOND, "Running", jobs)
    assert out.phase == "Failed" and out.failure == "job f-b Failed"
    assert out.create == [] and [s for s, _ in out.skipped] == ["d"]
    # Terminated fails it too; a failed flow starts nothing more.
    assert decide(DIAMOND, "Running", {"a": view("a", "Terminated")}).phase == "Failed"
    assert decide(DIAMOND, "Failed", {"a": view("a", "Completed")}).create == []


def test_retries_run_a_failed_job_again_until_the_limit() -> None:
    jobs = {"a": view("a", "Failed")}
    out = decide(DIAMOND, "Running", jobs, annotations={"vulcan.sh/max-retries": "2"})
    assert out.retry == [("a", 1)] and out.phase != "Failed"
    again = decide(
        DIAMOND, "Running", jobs, annotations={"vulcan.sh/max-retries": "2"}, used={"a": 2}
    )
    assert again.retry == [] and again.phase == "Failed"
    per_step = {"vulcan.sh/max-retries": "5", "vulcan.sh/max-retries.a": "0"}
    assert decide(DIAMOND, "Running", jobs, annotations=per_step).phase == "Failed"


def test_on_failure_runs_the_clean_up_before_the_flow_fails() -> None:
    notes = {"vulcan.sh/on-failure": "cleanup"}
    failed = {"a": view("a", "Failed")}
    out = decide(DIAMOND, "Running", failed, annotations=notes)
    assert out.on_failure == "cleanup" and out.phase == "Running"
    cleaning = {**failed, "cleanup": view("cleanup", "Running")}
    assert decide(DIAMOND, "Running", cleaning, annotations=notes).on_failure is None
    cleaned = {**failed, "cleanup": view("cleanup", "Completed")}
    out = decide(DIAMOND, "Running", cleaned, annotations=notes)
    assert out.phase == "Failed" and "clean-up f-cleanup Completed" in out.failure


def test_a_probe_gates_on_running_targets_and_its_result() -> None:
    http = spec(("a", []), ("b", ["a"]), probe={"httpGetList": [{"taskName": "m", "port": 80}]})
    assert decide(http, "Running", {"a": view("a", "Pending")}).waiting["b"].startswith("waiting")
    first = decide(http, "Running", {"a": view("a", "Running")})
    assert first.probes_wanted == ["b"] and first.create == []
    refused = fs.ProbeResult(False, "HTTP 503")
    out = decide(http, "Running", {"a": view("a", "Running")}, probes={"b": refused})
    assert out.create == [] and out.waiting["b"] == "HTTP 503"
    out = decide(http, "Running", {"a": view("a", "Running")}, probes={"b": fs.ProbeResult(True)})
    assert [s for s, _ in out.create] == ["b"]
    task = spec(
        ("a", []), ("b", ["a"]), probe={"taskStatusList": [{"taskName": "m", "phase": "Running"}]}
    )
    pending = view("a", "Running", task_status_count={"m": {"phase": {"Pending": 1}}})
    assert decide(task, "Running", {"a": pending}).create == []
    up = view("a", "Running", task_status_count={"m": {"phase": {"Running": 1}}})
    assert [s for s, _ in decide(task, "Running", {"a": up}).create] == ["b"]


def test_flow_errors_name_cycles_and_bad_annotations() -> None:
    flow = JobFlow.model_validate(
        {
            "metadata": {
                "name": "f",
                "annotations": {"vulcan.sh/max-retries": "x", "vulcan.sh/on-failure": "a"},
            },
            "spec": {
                "flows": [
                    {"name": "a", "dependsOn": {"targets": ["b"]}},
                    {"name": "b", "dependsOn": {"targets": ["a"]}},
                ]
            },
        }
    )
    errors = " | ".join(fs.flow_errors(flow))
    assert "not DAG" in errors and "vulcan.sh/max-retries" in errors
    assert "vulcan.sh/on-failure" in errors


def test_status_lists_histories_and_conditions() -> None:
    jobs = {
        "a": view("a", "Completed", created="2026-01-01T00:00:00Z", running_duration="1m30s"),
        "b": view("b", "Completing"),
        "c": view("c", "Aborted"),
    }
    status = flow_status({}, jobs, ["a", "b", "c", "d"], "Running", "2026-01-01T00:05:00Z")
    assert status["completedJobs"] == ["f-a"] and status["runningJobs"] == ["f-b"]
    assert status["unKnowJobs"] == ["f-c"] and "pendingJobs" not in status
    first = status["jobStatusList"][0]
    assert first["endTimestamp"] == "2026-01-01T00:01:30Z"
    assert first["runningHistories"] == [
        {"startTimestamp": "2026-01-01T00:05:00Z", "state": "Completed"}
    ]
    assert [e["name"] for e in status["jobStatusList"]] == ["f-a", "f-b", "f-c"]
    # Same phases later: nothing to write; a phase change closes the last history entry.
    later = flow_status(status, jobs, ["a", "b", "c"], "Running", "2026-01-01T00:06:00Z")
    assert same_status(status, later)
    moved = flow_status(
        status, {**jobs, "b": view("b", "Completed")}, ["a", "b", "c"], "Running", "T2"
    )
    histories = moved["jobStatusList"][1]["runningHistories"]
    assert histories[0]["endTimestamp"] == "T2" and histories[1]["state"] == "Completed"
