"""One record type per kind: the pod record carries what the extender and the controllers read,
with the values a job's pods have in common shared instead of copied."""

from __future__ import annotations

from typing import Any

from core.records import OwnerRef, PodGroupRecord, PodRecord


def job_pod(name: str, *, phase: str = "Running", exit_code: int | None = None) -> dict[str, Any]:
    statuses: list[dict[str, Any]] = []
    if exit_code is not None:
        statuses = [{"name": "c", "ready": False, "state": {"terminated": {"exitCode": exit_code}}}]
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "annotations": {
                "scheduling.k8s.io/group-name": "job-1-abc",
                "volcano.sh/job-name": "job-1",
                "volcano.sh/task-spec": "worker",
                "volcano.sh/task-index": "3",
                "volcano.sh/job-version": "2",
                "scheduling.volcano.sh/queue-name": "research",
                "unrelated/annotation": "x" * 200,
            },
            "labels": {"volcano.sh/preemptable": "false", "app": "big"},
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": "job-1",
                    "uid": "job-uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": phase, "containerStatuses": statuses},
    }


def test_pod_record_has_what_both_sides_read() -> None:
    pod = PodRecord(job_pod("job-1-worker-3", phase="Failed", exit_code=137))
    # The extender's side.
    assert pod.group == "team-a/job-1-abc" and pod.task == "worker"
    assert pod.queue_annotation == "research" and not pod.annotations_preemptable
    assert pod.requests.cpu == 1000 and pod.terminal and not pod.occupies_node
    # The controllers' side.
    assert pod.group_name == "job-1-abc" and pod.job_name == "job-1"
    assert (pod.index, pod.job_version, pod.exit_code) == (3, 2, 137)
    assert pod.usage == {"count/pods": 1}  # a finished pod counts as an object only
    assert pod.owner == OwnerRef("batch.volcano.sh/v1alpha1", "Job", "job-1", "job-uid", True, True)
    # Only the picked annotations and labels are kept.
    assert "unrelated/annotation" not in pod.annotations
    # Labels are whole: pod affinity and topology spread selectors read any of them.
    assert pod.labels["app"] == "big"


def test_pods_of_a_job_share_their_common_values() -> None:
    a, b = PodRecord(job_pod("a")), PodRecord(job_pod("b"))
    assert a.annotations is b.annotations and a.labels is b.labels
    assert a.usage is b.usage and a.requests is b.requests
    assert a.owner is not None and b.owner is not None
    assert a.owner.uid is b.owner.uid  # interned


def test_owner_reference_round_trips_to_the_api_form() -> None:
    pod = PodRecord(job_pod("a"))
    assert [ref.to_dict() for ref in pod.owner_refs] == job_pod("a")["metadata"]["ownerReferences"]


def test_podgroup_record_keeps_raw_spec_and_scheduling_vector() -> None:
    group = PodGroupRecord(
        {
            "metadata": {
                "name": "job-1-abc",
                "namespace": "team-a",
                "ownerReferences": job_pod("a")["metadata"]["ownerReferences"],
            },
            "spec": {"minMember": 2, "minResources": {"cpu": "2", "requests.cpu": "2"}},
        }
    )
    assert group.job_owned and group.queue == "default" and group.phase == "Pending"
    assert group.spec["minResources"] == {"cpu": "2", "requests.cpu": "2"}
    assert group.min_resources is not None and group.min_resources.as_dict() == {"cpu": 2000}


def test_preemptable_is_read_as_go_reads_a_bool() -> None:
    """One parser (Go's ParseBool) for `volcano.sh/preemptable` everywhere: "False" is false
    (the reclaim walk used to read anything but "false" as true), unreadable is not evicted."""

    def flag(value: str | None, where: str = "annotations") -> bool:
        obj = job_pod("p")
        obj["metadata"]["labels"] = {}
        if value is not None:
            obj["metadata"][where] = {"volcano.sh/preemptable": value}
        return PodRecord(obj).annotations_preemptable

    assert flag(None) is True
    for no in ("False", "false", "0", "F", "FALSE"):
        assert flag(no) is False, no
        assert flag(no, "labels") is False, no
    assert flag("True") is True and flag("1") is True
    assert flag("yes") is False  # not a Go bool: not evicted
