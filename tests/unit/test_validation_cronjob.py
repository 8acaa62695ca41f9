"""CronJob admission rules with Kubernetes' messages (core.api.validation_cronjob), through the
same admission chain `vulcan validate` and the webhook use."""

from __future__ import annotations

from typing import Any

from core.api.admission import admit


def cronjob(name: str = "nightly", **spec: Any) -> dict[str, Any]:
    task = {
        "name": "main",
        "replicas": 1,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }
    body = {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"tasks": [task]}}, **spec}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": body,
    }


def problems(obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in admit(obj).errors]


def test_a_valid_cronjob_gets_volcanos_defaults() -> None:
    result = admit(cronjob(timeZone="America/New_York", schedule="@daily"))
    assert result.allowed, result.errors
    spec = result.obj.to_dict()["spec"]  # type: ignore[union-attr]
    assert spec["concurrencyPolicy"] == "Allow" and spec["suspend"] is False
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)


def test_name_leaves_room_for_the_job_suffix() -> None:
    assert problems(cronjob("a" * 40)) == []
    too_long = problems(cronjob("a" * 53))
    assert too_long[0] == (
        f'metadata.name: Invalid value: "{"a" * 53}": must be no more than 52 characters'
    )
    # Kubernetes' 52 fits a batch/v1 Job; a Volcano Job's pod names (`<job>-<task>-<index>`)
    # must also fit 63 characters, which Volcano's Job webhook would refuse at the first run.
    # Said when the CronJob is written instead:
    assert problems(cronjob("a" * 52)) == [
        f"spec.jobTemplate.spec.tasks[0]: create pod with name {'a' * 52}-99999999-main-0 "
        "validate failed ['name part must be no more than 63 characters']"
    ]


def test_time_zone_rules() -> None:
    assert problems(cronjob(timeZone="")) == [
        'spec.timeZone: Invalid value: "": timeZone must be nil or non-empty string'
    ]
    assert problems(cronjob(timeZone="../etc/passwd")) == [
        'spec.timeZone: Invalid value: "../etc/passwd": unknown time zone ../etc/passwd'
    ]
    assert problems(cronjob(timeZone="Europe/Atlantis")) == [
        'spec.timeZone: Invalid value: "Europe/Atlantis": unknown time zone Europe/Atlantis'
    ]


def test_schedule_rules() -> None:
    assert problems(cronjob(schedule="")) == ["spec.schedule: Required value"]
    assert problems(cronjob(schedule="0 3 * *")) == [
        'spec.schedule: Invalid value: "0 3 * *": expected exactly 5 fields, found 4: [0 3 * *]'
    ]


def test_schema_rules_come_from_the_model() -> None:
    errors = problems(cronjob(concurrencyPolicy="Sometimes", startingDeadlineSeconds=-1))
    assert any(e.startswith("spec.concurrencyPolicy:") for e in errors), errors
    assert any(e.startswith("spec.startingDeadlineSeconds:") for e in errors), errors


def test_the_template_is_checked_as_a_job() -> None:
    obj = cronjob()
    obj["spec"]["jobTemplate"]["spec"]["policies"] = [{"event": "PodFailed", "exitCode": 3}]
    assert problems(obj) == [
        "spec.jobTemplate.spec.policies[0]: must not specify event and exitCode simultaneously; "
        'supported events: "*", "PodFailed", "PodEvicted", "PodPending", "Unknown", '
        '"TaskCompleted", "TaskFailed", "JobUpdated"; supported actions: "AbortJob", '
        '"RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob", '
        '"CompleteJob", "ResumeJob"'
    ]
