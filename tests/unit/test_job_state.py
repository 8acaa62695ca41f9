"""flow_controller.job.state and job_objects: Volcano's Job state machine, completion logic and
policy resolution (Volcano's pkg/controllers/job/state), and the pods and PodGroup
the job controller makes (§4, §5)."""

from __future__ import annotations

from typing import Any

import pytest

from core.api.batch import JobSpec
from core.api.defaults import default_job_spec
from flow_controller.job import objects
from flow_controller.job import state as js


def spec(**fields: Any) -> JobSpec:
    body: dict[str, Any] = {
        "minAvailable": 3,
        "tasks": [
            {"name": "ps", "replicas": 1, "template": _template("1")},
            {"name": "worker", "replicas": 2, "template": _template("2")},
        ],
        **fields,
    }
    return default_job_spec(JobSpec.model_validate(body))


def _template(cpu: str) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    return {"spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]}}


# ------------------------------------------------------------------ the state machine


@pytest.mark.parametrize(
    ("phase", "action", "primitive", "soft", "retry"),
    [
        ("", js.SYNC_JOB, js.SYNC, False, False),
        (js.RUNNING, js.RESTART_JOB, js.KILL, False, True),
        (js.RUNNING, js.RESTART_TASK, js.KILL_TARGET, False, True),
        (js.PENDING, js.ABORT_JOB, js.KILL, True, False),
        (js.RUNNING, js.COMPLETE_JOB, js.KILL, True, False),
        (js.RUNNING, js.TERMINATE_JOB, js.KILL, True, False),
        (js.RUNNING, js.RESUME_JOB, js.SYNC, False, False),  # resume is a sync when running
        (js.RESTARTING, js.SYNC_JOB, js.SYNC, False, False),
        (js.RESTARTING, js.RESTART_JOB, js.KILL, False, False),
        (js.ABORTED, js.RESUME_JOB, js.KILL, True, False),  # no retry: Volcano #3067
        (js.COMPLETED, js.RESTART_JOB, js.KILL, True, False),  # finished: never again
    ],
)
def test_what_an_action_does_in_a_phase(
    phase: str, action: str, primitive: str, soft: bool, retry: bool
) -> None:
    step = js.plan_action(phase, action)
    assert (step.primitive, step.soft, step.retry) == (primitive, soft, retry)


def test_kills_that_end_in_a_phase_wait_for_the_pods_to_go() -> None:
    job = spec()
    busy = js.Counts(running=1)
    gone = js.Counts(succeeded=2)
    for phase, done in (
        (js.ABORTING, js.ABORTED),
        (js.COMPLETING, js.COMPLETED),
        (js.TERMINATING, js.TERMINATED),
    ):
        step = js.plan_action(phase, js.SYNC_JOB)
        assert step.next_phase(phase, busy, job, 0) == phase
        assert step.next_phase(phase, gone, job, 0) == done
    assert js.plan_action(js.ABORTED, js.SYNC_JOB).next_phase(js.ABORTED, gone, job, 0) == (
        js.ABORTED
    )


def test_restarting_fails_at_max_retry_else_goes_back_to_pending_when_pods_are_gone() -> None:
    job = spec(maxRetry=2)
    step = js.plan_action(js.RESTARTING, js.SYNC_JOB)
    assert step.next_phase(js.RESTARTING, js.Counts(terminating=2), job, 1) == js.RESTARTING
    assert step.next_phase(js.RESTARTING, js.Counts(), job, 1) == js.PENDING
    assert step.next_phase(js.RESTARTING, js.Counts(), job, 2) == js.FAILED


def test_pending_becomes_running_once_min_available_pods_started() -> None:
    step = js.plan_action(js.PENDING, js.SYNC_JOB)
    assert step.next_phase("", js.Counts(running=2), spec(), 0) == js.PENDING
    assert step.next_phase("", js.Counts(running=2, succeeded=1), spec(), 0) == js.RUNNING


@pytest.mark.parametrize(
    ("fields", "counts", "expected"),
    [
        ({}, js.Counts(succeeded=3, task_succeeded={"ps": 1, "worker": 2}), js.COMPLETED),
        # A task below its minAvailable fails the job, whatever the others did.
        ({}, js.Counts(succeeded=2, failed=1, task_succeeded={"ps": 1, "worker": 1}), js.FAILED),
        # minAvailable below the tasks' minimums: judged on minAvailable alone (#1046).
        (
            {"minAvailable": 2, "tasks": None},
            js.Counts(succeeded=2, failed=1, task_succeeded={"ps": 1, "worker": 1}),
            js.COMPLETED,
        ),
        ({"minSuccess": 1}, js.Counts(running=2, succeeded=1), js.COMPLETED),
        ({}, js.Counts(running=2, succeeded=1), js.RUNNING),
        ({"minAvailable": 1, "tasks": None}, js.Counts(pending=3), js.PENDING),
    ],
)
def test_running_completion(fields: dict[str, Any], counts: js.Counts, expected: str) -> None:
    job = spec(**fields) if fields.get("tasks", 0) is not None else _loose(**fields)
    assert js.running_outcome(counts, job) == expected


def _loose(**fields: Any) -> JobSpec:
    """Tasks whose minAvailable is 1 each, so minAvailable can sit below their sum."""
    fields.pop("tasks", None)
    body = {
        "tasks": [
            {"name": "ps", "replicas": 1, "minAvailable": 1, "template": _template("1")},
            {"name": "worker", "replicas": 2, "minAvailable": 2, "template": _template("1")},
        ],
        **fields,
    }
    return default_job_spec(JobSpec.model_validate(body))


# ------------------------------------------------------------------ policies


def test_task_policies_come_before_job_policies_and_events_before_exit_codes() -> None:
    job = spec(
        policies=[
            {"event": "PodFailed", "action": "RestartJob"},
            {"exitCode": 3, "action": "AbortJob"},
        ],
        tasks=[
            {
                "name": "ps",
                "replicas": 1,
                "template": _template("1"),
                "policies": [{"events": ["TaskCompleted"], "action": "CompleteJob"}],
            },
            {"name": "worker", "replicas": 2, "template": _template("1")},
        ],
    )

    def action(**request: Any) -> str:
        return js.resolve_action(job, js.Request(**request), job_uid="u", job_version=1)[0]

    assert action(event="TaskCompleted", task="ps", job_version=1) == "CompleteJob"
    assert action(event="PodFailed", task="worker", exit_code=3, job_version=1) == "RestartJob"
    assert action(event="PodEvicted", task="worker", exit_code=3, job_version=1) == "AbortJob"
    assert action(event="PodEvicted", task="worker", job_version=1) == js.SYNC_JOB
    # Stale: a pod of the previous incarnation, or of an older job of the same name.
    assert action(event="PodFailed", task="worker", job_version=0) == js.SYNC_JOB
    assert action(event="PodFailed", job_uid="other", job_version=1) == js.SYNC_JOB
    # Internal events and Commands.
    assert action(event=js.OUT_OF_SYNC, job_version=1) == js.SYNC_JOB
    assert action(event=js.COMMAND_ISSUED, action="AbortJob") == "AbortJob"


def test_pod_pending_only_matches_a_policy_with_a_timeout() -> None:
    job = spec(policies=[{"event": "*", "action": "RestartJob"}])
    request = js.Request(js.POD_PENDING, task="ps")
    assert js.resolve_action(job, request, job_uid="", job_version=0) == (js.SYNC_JOB, None)
    timed = spec(policies=[{"event": "PodPending", "action": "AbortJob", "timeout": "1m"}])
    assert js.resolve_action(timed, request, job_uid="", job_version=0) == ("AbortJob", "1m")


# ------------------------------------------------------------------ objects


def test_min_resources_take_each_tasks_minimum_then_the_surplus() -> None:
    job = spec(minAvailable=2)  # below ps 1 + worker 2: whole tasks in order
    assert objects.job_min_resources(job)["cpu"] == "3"  # ps (1) + one worker (2)
    job = spec(
        minAvailable=2,
        tasks=[
            {"name": "ps", "replicas": 1, "minAvailable": 1, "template": _template("1")},
            {"name": "worker", "replicas": 3, "minAvailable": 0, "template": _template("2")},
        ],
    )
    resources = objects.job_min_resources(job)
    assert resources["cpu"] == "3" and resources["count/pods"] == "2"
    assert resources["requests.memory"] == "2Gi"


def test_a_pod_carries_volcanos_names_labels_and_annotations() -> None:
    job = spec(queue="research", priorityClassName="high")
    meta = {
        "name": "tf",
        "namespace": "team-a",
        "uid": "u-1",
        "annotations": {"volcano.sh/preemptable": "false"},
    }
    pod = objects.build_pod(meta, job, job.tasks[1], 1, version=2, retry_count=1)
    notes, labels = pod["metadata"]["annotations"], pod["metadata"]["labels"]
    assert pod["metadata"]["name"] == "tf-worker-1"
    assert notes["scheduling.k8s.io/group-name"] == "tf-u-1"
    assert notes["volcano.sh/job-version"] == "2" and notes["volcano.sh/job-retry-count"] == "1"
    assert notes["volcano.sh/template-uid"] == "tf-worker"
    assert notes["volcano.sh/preemptable"] == "false"
    assert labels["volcano.sh/job-namespace"] == "team-a"
    assert labels["volcano.sh/queue-name"] == "research"
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["spec"]["priorityClassName"] == "high"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-1"


def test_depends_on_waits_for_all_named_tasks_or_any_of_them() -> None:
    job = spec(
        tasks=[
            {"name": "a", "replicas": 1, "template": _template("1")},
            {"name": "b", "replicas": 1, "template": _template("1")},
            {
                "name": "c",
                "replicas": 1,
                "template": _template("1"),
                "dependsOn": {"name": ["a", "b"]},
            },
            {
                "name": "d",
                "replicas": 1,
                "template": _template("1"),
                "dependsOn": {"name": ["a", "b"], "iteration": "any"},
            },
        ]
    )
    ready = {"a": True, "b": False}
    assert objects.dependencies_met(job.tasks[0], ready)
    assert not objects.dependencies_met(job.tasks[2], ready)
    assert objects.dependencies_met(job.tasks[3], ready)
