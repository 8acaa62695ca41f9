"""Volcano's admission rules (spec/volcano.md §6), one invalid variant per rule: each is rejected
with the field path and Volcano's reason, and the valid baseline is accepted."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core.api.admission import admit, apply_defaults, decode
from core.api.batch import Job
from core.api.scheduling import Queue
from core.api.validation import (
    ClusterView,
    find_cycle,
    is_go_duration,
    validate_job_update,
    validate_queue,
    validate_queue_delete,
)


def job(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano",
            "tasks": [
                _task("ps", 1),
                _task("worker", 2),
            ],
        },
    }
    base["spec"].update(spec)
    return base


def _task(name: str, replicas: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    }
                ],
                "restartPolicy": "OnFailure",
            }
        },
        **extra,
    }


def errors_of(doc: dict[str, Any], view: ClusterView | None = None) -> list[tuple[str, str]]:
    return [(e.field, e.reason) for e in admit(doc, view).errors]


def assert_rejected(doc: dict[str, Any], field: str, reason_part: str, view=None) -> None:
    errors = errors_of(doc, view)
    assert any(f == field and reason_part in r for f, r in errors), errors


def test_valid_job_is_admitted() -> None:
    assert errors_of(job()) == []


# ---------------------------------------------------------------------------- Job rules


def test_no_tasks() -> None:
    assert_rejected(job(tasks=[]), "spec.tasks", "No task specified in job spec")


def test_task_min_available_greater_than_replicas() -> None:
    doc = job(tasks=[_task("ps", 1, minAvailable=2), _task("worker", 2)])
    assert_rejected(
        doc,
        "spec.tasks[0].minAvailable",
        "'minAvailable' is greater than 'replicas' in task: ps, job: train",
    )


def test_job_min_available_larger_than_replicas() -> None:
    assert_rejected(
        job(minAvailable=4),
        "spec.minAvailable",
        "job 'minAvailable' should not be greater than total replicas in tasks",
    )


def test_duplicate_task_names() -> None:
    doc = job(tasks=[_task("worker", 1), _task("worker", 2)])
    assert_rejected(doc, "spec.tasks[1].name", "duplicated task name worker")


@pytest.mark.parametrize("name", ["Worker", "worker_1", "-worker", "w" * 64])
def test_task_name_must_be_dns_label(name: str) -> None:
    doc = job(tasks=[_task(name, 3)])
    assert_rejected(doc, "spec.tasks[0].name", "")
    assert any("RFC 1123" in r or "63" in r for _, r in errors_of(doc))


def test_negative_replicas_and_min_available() -> None:
    doc = job(minAvailable=0, tasks=[_task("a", -1), _task("b", 1, minAvailable=-1)])
    assert_rejected(doc, "spec.tasks[0].replicas", "'replicas' < 0 in task: a")
    assert_rejected(doc, "spec.tasks[1].minAvailable", "'minAvailable' < 0 in task: b")


def test_negative_job_fields() -> None:
    assert_rejected(job(minAvailable=-1), "spec.minAvailable", "job 'minAvailable' must be >= 0")
    assert_rejected(job(maxRetry=-1), "spec.maxRetry", "'maxRetry' cannot be less than zero")
    assert_rejected(
        job(ttlSecondsAfterFinished=-5),
        "spec.ttlSecondsAfterFinished",
        "'ttlSecondsAfterFinished' cannot be less than zero",
    )


@pytest.mark.parametrize(
    ("policies", "field", "reason"),
    [
        (
            [{"event": "PodBroken", "action": "RestartJob"}],
            "spec.policies[0].event",
            'Invalid value: "PodBroken": invalid policy event',
        ),
        (
            [{"event": "PodRunning", "action": "RestartJob"}],
            "spec.policies[0].event",
            "invalid policy event",
        ),  # internal-only event
        (
            [{"event": "PodFailed", "action": "Explode"}],
            "spec.policies[0].action",
            'Invalid value: "Explode": invalid policy action',
        ),
        (
            [{"event": "PodFailed", "action": "SyncJob"}],
            "spec.policies[0].action",
            "invalid policy action",
        ),  # internal-only action
        (
            [{"event": "PodFailed", "exitCode": 3, "action": "RestartJob"}],
            "spec.policies[0]",
            "must not specify event and exitCode simultaneously",
        ),
        (
            [{"action": "RestartJob"}],
            "spec.policies[0]",
            "either event and exitCode should be specified",
        ),
        (
            [
                {"event": "PodFailed", "action": "RestartJob"},
                {"events": ["PodFailed"], "action": "AbortJob"},
            ],
            "spec.policies[1].event",
            "duplicate event PodFailed  across different policy",
        ),
        (
            [{"exitCode": 0, "action": "RestartJob"}],
            "spec.policies[0].exitCode",
            "0 is not a valid error code",
        ),
        (
            [{"exitCode": 2, "action": "RestartJob"}, {"exitCode": 2, "action": "AbortJob"}],
            "spec.policies[1].exitCode",
            "duplicate exitCode 2",
        ),
        (
            [{"event": "*", "action": "RestartJob"}, {"event": "PodFailed", "action": "AbortJob"}],
            "spec.policies",
            "if there's * here, no other policy should be here",
        ),
        (
            [{"event": "PodFailed", "action": "RestartJob", "timeout": "ten seconds"}],
            "spec.policies[0].timeout",
            "must be a duration",
        ),
    ],
)
def test_job_policy_rules(policies: list, field: str, reason: str) -> None:
    assert_rejected(job(policies=policies), field, reason)


def test_invalid_policy_message_lists_valid_values() -> None:
    errors = errors_of(job(policies=[{"event": "Nope", "action": "RestartJob"}]))
    assert errors[0][1].startswith(
        'Invalid value: "Nope": invalid policy event; supported values: "*", "PodFailed", '
    )
    assert "[" not in errors[0][1]
    errors = errors_of(job(policies=[{"event": "PodFailed", "action": "Explode"}]))
    assert 'invalid policy action; supported values: "AbortJob", "RestartJob", ' in errors[0][1]


def test_task_level_policies_are_checked_with_their_path() -> None:
    doc = job(
        tasks=[
            _task("ps", 1, policies=[{"event": "Bad", "action": "CompleteJob"}]),
            _task("worker", 2),
        ]
    )
    assert_rejected(doc, "spec.tasks[0].policies[0].event", "invalid policy event")


def test_valid_policies_pass() -> None:
    policies = [
        {"event": "PodEvicted", "action": "RestartJob"},
        {"events": ["PodFailed", "Unknown"], "action": "AbortJob", "timeout": "1m30s"},
        {"exitCode": 137, "action": "RestartPod"},
    ]
    assert errors_of(job(policies=policies)) == []


def test_unknown_plugin_and_mpi_master() -> None:
    assert_rejected(
        job(plugins={"horovod": []}), "spec.plugins[horovod]", "unable to find job plugin: horovod"
    )
    assert_rejected(
        job(plugins={"mpi": []}), "spec.plugins[mpi]", "The specified mpi master task was not found"
    )
    assert errors_of(job(plugins={"mpi": ["--master=ps", "--worker=worker"]})) == []


def test_pod_name_must_be_valid() -> None:
    doc = job(tasks=[_task("w" * 60, 3)])
    doc["metadata"]["name"] = "trainingjob"
    assert_rejected(doc, "spec.tasks[0]", "create pod with name trainingjob-" + "w" * 60)


def test_job_name_must_be_qualified() -> None:
    doc = job()
    doc["metadata"]["name"] = "bad name!"
    assert_rejected(doc, "metadata.name", "create job with name bad name! validate failed")


@pytest.mark.parametrize(
    ("container_patch", "field", "reason"),
    [
        (
            {"resources": {"requests": {"cpu": "1KiB"}}},
            "spec.tasks[0].template.spec.containers[0].resources.requests[cpu]",
            '"1KiB"',
        ),
        (
            {"resources": {"requests": {"memory": "-1Gi"}}},
            "spec.tasks[0].template.spec.containers[0].resources.requests[memory]",
            "must be >= 0",
        ),
        (
            {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
            "spec.tasks[0].template.spec.containers[0].resources.requests[cpu]",
            "must be less than or equal to cpu limit",
        ),
        ({"image": None}, "spec.tasks[0].template.spec.containers[0].image", "Required value"),
        ({"name": "Main"}, "spec.tasks[0].template.spec.containers[0].name", "RFC 1123"),
    ],
)
def test_pod_template_rules(container_patch: dict, field: str, reason: str) -> None:
    doc = job(minAvailable=1, tasks=[_task("main", 1)])
    container = doc["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container.update(container_patch)
    assert_rejected(doc, field, reason)


def test_pod_template_needs_containers() -> None:
    doc = job(minAvailable=1, tasks=[_task("main", 1)])
    doc["spec"]["tasks"][0]["template"] = {"spec": {"containers": []}}
    assert_rejected(doc, "spec.tasks[0].template.spec.containers", "Required value")


def test_topology_policy_needs_integer_cpu() -> None:
    doc = job(minAvailable=1, tasks=[_task("main", 1, topologyPolicy="single-numa-node")])
    doc["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = (
        "1500m"
    )
    assert_rejected(
        doc,
        "spec.tasks[0].template.spec.containers[0].resources.requests[cpu]",
        "the cpu request isn't an integer in spec.task[0] container[0].",
    )


def test_partition_policy_rules() -> None:
    task = _task(
        "w", 4, partitionPolicy={"totalPartitions": 3, "partitionSize": 2, "minPartitions": 1}
    )
    doc = job(minAvailable=2, tasks=[task])
    assert_rejected(
        doc,
        "spec.tasks[0].partitionPolicy",
        "'Replicas' are not equal to TotalPartitions*PartitionSize",
    )
    task = _task(
        "w",
        4,
        minAvailable=3,
        partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1},
    )
    assert_rejected(
        job(minAvailable=2, tasks=[task]),
        "spec.tasks[0].partitionPolicy",
        "'MinAvailable' is not equal to MinPartitions*PartitionSize",
    )
    bad = _task("w", 4, partitionPolicy={"totalPartitions": 0, "partitionSize": 2})
    assert_rejected(
        job(minAvailable=2, tasks=[bad]),
        "spec.tasks[0].partitionPolicy.totalPartitions",
        "greater than or equal to 1",
    )


def test_network_topology_tiers_exclusive() -> None:
    doc = job(networkTopology={"mode": "hard", "highestTierAllowed": 1, "highestTierName": "x"})
    assert_rejected(
        doc, "spec.networkTopology", "must not specify 'highestTierAllowed' and 'highestTierName'"
    )


def test_volume_rules() -> None:
    vols = [
        {"mountPath": "/data", "volumeClaimName": "pvc-a"},
        {"mountPath": "/data", "volumeClaimName": "pvc-b"},
        {"mountPath": "/x"},
        {"mountPath": "", "volumeClaimName": "Bad_Name"},
    ]
    errors = errors_of(job(volumes=vols))
    assert ("spec.volumes[1].mountPath", "duplicated mountPath: /data") in errors
    assert ("spec.volumes[2]", "either VolumeClaim or VolumeClaimName must be specified") in errors
    assert ("spec.volumes[3].mountPath", "mountPath is required") in errors
    assert any(
        f == "spec.volumes[3].volumeClaimName" and "invalid VolumeClaimName Bad_Name" in r
        for f, r in errors
    )


def test_task_dependencies_must_form_a_dag() -> None:
    tasks = [
        _task("a", 1, dependsOn={"name": ["b"]}),
        _task("b", 1, dependsOn={"name": ["a"]}),
        _task("c", 1),
    ]
    assert_rejected(
        job(tasks=tasks),
        "spec.tasks",
        "job has dependencies between tasks, but doesn't form a directed acyclic graph",
    )
    tasks = [_task("a", 2), _task("b", 1, dependsOn={"name": ["a"], "iteration": "all"})]
    assert errors_of(job(tasks=tasks)) == []
    tasks = [_task("a", 2), _task("b", 1, dependsOn={"name": ["zz"]})]
    assert_rejected(job(tasks=tasks), "spec.tasks[1].dependsOn.name[0]", "not defined")


def test_job_queue_rules_need_the_cluster() -> None:
    queues = {
        "default": _queue_obj("default"),
        "closed": _queue_obj("closed", state="Closed"),
        "parent": _queue_obj("parent"),
        "child": _queue_obj("child", parent="parent"),
    }
    view = ClusterView(queues=queues)
    assert errors_of(job(queue="default"), view) == []
    assert_rejected(job(queue="nope"), "spec.queue", "unable to find job queue", view)
    assert_rejected(
        job(queue="closed"),
        "spec.queue",
        "can only submit job to queue with state `Open`, queue `closed` status is `Closed`",
        view,
    )
    assert_rejected(job(queue="parent"), "spec.queue", "can only submit job to leaf queue", view)
    # Offline (no view): nothing to check against.
    assert errors_of(job(queue="nope")) == []


def test_wrong_types_are_rejected_with_paths() -> None:
    doc = job()
    doc["spec"]["tasks"][0]["replicas"] = "3"
    assert_rejected(doc, "spec.tasks[0].replicas", "must be of type int")


def test_job_update_rules() -> None:
    _, old = decode(job())
    assert isinstance(old, Job)
    old = apply_defaults(old)
    new = old.model_copy(deep=True)
    new.spec.tasks[1].replicas = 5
    new.spec.min_available = 4
    assert validate_job_update(old, new) == []
    changed = old.model_copy(deep=True)
    changed.spec.scheduler_name = "other"
    assert validate_job_update(old, changed)[0].reason.startswith(
        "job updates may not change fields other than `minAvailable`"
    )
    fewer = old.model_copy(deep=True)
    fewer.spec.tasks = fewer.spec.tasks[:1]
    fewer.spec.min_available = 1
    assert any("may not add or remove tasks" in e.reason for e in validate_job_update(old, fewer))
    moved = old.model_copy(deep=True)
    moved.spec.queue = "elsewhere"
    assert any(e.field == "spec.queue" for e in validate_job_update(old, moved))


# ------------------------------------------------------------------------- PodGroup rules


def podgroup(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"minMember": 2, **spec},
    }


def test_podgroup_rules() -> None:
    assert errors_of(podgroup()) == []
    assert_rejected(podgroup(minMember=-1), "spec.minMember", "greater than or equal to 0")
    assert_rejected(
        podgroup(minResources={"cpu": "lots"}), "spec.minResources[cpu]", 'invalid quantity "lots"'
    )
    assert_rejected(
        podgroup(
            subGroupPolicy=[
                {"name": "sg", "networkTopology": {"highestTierAllowed": 1, "highestTierName": "t"}}
            ]
        ),
        "spec.subGroupPolicy[0].networkTopology",
        "in subGroupPolicy 'sg': must not specify",
    )
    view = ClusterView(
        queues={"default": _queue_obj("default"), "shut": _queue_obj("shut", state="Closed")}
    )
    assert_rejected(podgroup(queue="missing"), "spec.queue", "unable to find queue", view)
    assert_rejected(
        podgroup(queue="shut"),
        "spec.queue",
        "can only submit PodGroup to queue with state `Open`",
        view,
    )
    assert_rejected(podgroup(queue="Not_A_Name"), "spec.queue", "should match")


# ---------------------------------------------------------------------------- Queue rules


def queue(name: str = "q", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _queue_obj(name: str, state: str | None = None, **spec: Any) -> Queue:
    doc = queue(name, **spec)
    if state:
        doc["status"] = {"state": state}
    return decode(doc)[1]  # type: ignore[return-value]


def test_queue_weight() -> None:
    assert errors_of(queue(weight=3)) == []
    assert errors_of(queue(weight=0)) == []  # defaulted to 1, as Volcano's webhook does
    assert_rejected(queue(weight=-2), "spec.weight", "greater than or equal to 0")
    assert_rejected(queue(weight=70000), "spec.weight", "less than or equal to 65535")


def test_queue_resource_rules() -> None:
    assert_rejected(queue(capability={"cpu": "-1"}), "spec.capability[cpu]", "must be >= 0")
    assert_rejected(queue(capability={"memory": "2GG"}), "spec.capability[memory]", '"2GG"')
    assert_rejected(
        queue(guarantee={"resource": {"cpu": "2"}}),
        "spec.deserved[cpu]",
        "deserved[cpu] must be >= guarantee[cpu]=2",
    )
    assert_rejected(
        queue(deserved={"cpu": "1"}, guarantee={"resource": {"cpu": "2"}}),
        "spec.deserved[cpu]",
        "deserved[cpu]=1 must be >= guarantee[cpu]=2",
    )
    assert_rejected(
        queue(deserved={"cpu": "8"}, capability={"cpu": "4"}),
        "spec.deserved[cpu]",
        "deserved[cpu]=8 must be <= capability[cpu]=4",
    )
    ok = queue(
        deserved={"cpu": "4", "memory": "8Gi"},
        capability={"cpu": "4"},
        guarantee={"resource": {"cpu": "2"}},
    )
    assert errors_of(ok) == []


def test_queue_state_and_parent() -> None:
    doc = queue()
    doc["status"] = {"state": "Closing"}
    assert_rejected(doc, "status.state", "queue state must be in [Open Closed]")
    assert_rejected(queue("q", parent="q"), "spec.parent", "queue q cannot use itself as parent")


def test_queue_hierarchy_annotations() -> None:
    doc = queue()
    doc["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": "root/a/b",
        "volcano.sh/hierarchy-weights": "1/2",
    }
    assert_rejected(
        doc, "metadata.annotations[volcano.sh/hierarchy-weights]", "must have the same length"
    )
    doc["metadata"]["annotations"]["volcano.sh/hierarchy-weights"] = "1/x/2"
    assert_rejected(doc, "metadata.annotations[volcano.sh/hierarchy-weights]", "positive")


def test_queue_tree_rules() -> None:
    queues = {
        "root": _queue_obj("root"),
        "eng": _queue_obj(
            "eng",
            capability={"cpu": "10"},
            deserved={"cpu": "6"},
            guarantee={"resource": {"cpu": "2"}},
        ),
        "eng-a": _queue_obj("eng-a", parent="eng", deserved={"cpu": "4"}),
        "l1": _queue_obj("l1"),
        "l2": _queue_obj("l2", parent="l1"),
        "l3": _queue_obj("l3", parent="l2"),
        "l4": _queue_obj("l4", parent="l3"),
        "l5": _queue_obj("l5", parent="l4"),
        "busy": _queue_obj("busy"),
    }
    view = ClusterView(queues=queues, allocated_pods={"busy": 3})
    assert_rejected(queue("x", parent="ghost"), "spec.parent", '"ghost" not found', view)
    assert_rejected(
        queue("x", parent="eng", capability={"cpu": "12"}),
        "spec.capability[cpu]",
        "queue x capability[cpu]=12 exceeds its ancestor's capability=10",
        view,
    )
    assert_rejected(
        queue("x", parent="eng", deserved={"cpu": "3"}),
        "spec.deserved",
        "sum of children's deserved",
        view,
    )
    assert_rejected(
        queue("x", parent="l5"),
        "spec.parent",
        "queue x exceeds the maximum allowed depth of 5",
        view,
    )
    assert_rejected(
        queue("x", parent="busy"),
        "spec.parent",
        "queue busy cannot be the parent queue of queue x because it has allocated Pods: 3",
        view,
    )
    assert errors_of(queue("x", parent="eng", deserved={"cpu": "2"}), view) == []


def test_root_queue_resources_are_protected() -> None:
    old = _queue_obj("root")
    new = _queue_obj("root", capability={"cpu": "1"})
    assert any("root queue's resource attributes" in e.reason for e in validate_queue(new, old=old))


def test_queue_delete_rules() -> None:
    assert validate_queue_delete(_queue_obj("default"))[0].reason == (
        "`default` queue can not be deleted"
    )
    assert validate_queue_delete(_queue_obj("root"))[0].reason == "`root` queue can not be deleted"
    view = ClusterView(queues={"p": _queue_obj("p"), "c": _queue_obj("c", parent="p")})
    assert validate_queue_delete(_queue_obj("p"), view)[0].reason == (
        "queue p can not be deleted because it has 1 child queues: c"
    )
    assert validate_queue_delete(_queue_obj("c"), view) == []


# -------------------------------------------------------------------------- JobFlow rules


def jobflow(flows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": "f"},
        "spec": {"flows": flows},
    }


def test_jobflow_undefined_target() -> None:
    doc = jobflow([{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a", "ghost"]}}])
    assert errors_of(doc) == [
        (
            "spec.flows[1].dependsOn.targets[1]",
            "jobflow Flow is not DAG: vertex is not defined: ghost",
        )
    ]


def test_jobflow_patch_job_spec_task_names_are_unique() -> None:
    """Left to admission: the CRD's CEL could not afford the pairwise check under every flow."""
    tasks = [{"name": "w", "replicas": 1}, {"name": "w", "replicas": 2}]
    doc = jobflow([{"name": "a", "patch": {"jobSpec": {"tasks": tasks}}}])
    assert errors_of(doc) == [
        ("spec.flows[0].patch.jobSpec.tasks[1].name", "duplicated task name w")
    ]
    tasks[1]["name"] = "ps"
    assert errors_of(doc) == []


def test_jobflow_cycle_and_self_dependency() -> None:
    doc = jobflow(
        [
            {"name": "a", "dependsOn": {"targets": ["c"]}},
            {"name": "b", "dependsOn": {"targets": ["a"]}},
            {"name": "c", "dependsOn": {"targets": ["b"]}},
        ]
    )
    assert_rejected(doc, "spec.flows", "jobflow Flow is not DAG")
    assert_rejected(
        jobflow([{"name": "a", "dependsOn": {"targets": ["a"]}}]),
        "spec.flows",
        "jobflow Flow is not DAG",
    )


def test_jobflow_diamond_is_a_dag_and_duplicates_are_allowed() -> None:
    doc = jobflow(
        [
            {"name": "a"},
            {"name": "b", "dependsOn": {"targets": ["a"]}},
            {"name": "c", "dependsOn": {"targets": ["a"]}},
            {"name": "d", "dependsOn": {"targets": ["b", "c"]}},
            {"name": "a"},
        ]
    )
    assert errors_of(doc) == []


def test_jobflow_flow_name_required() -> None:
    assert_rejected(jobflow([{"name": ""}]), "spec.flows[0].name", "at least 1")
    assert_rejected(jobflow([{"dependsOn": {}}]), "spec.flows[0].name", "Required value")


def test_jobtemplate_is_checked_as_a_job_spec() -> None:
    doc = {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": "t"},
        "spec": copy.deepcopy(job(minAvailable=9)["spec"]),
    }
    assert_rejected(doc, "spec.minAvailable", "should not be greater than total replicas")


def test_command_rules() -> None:
    target = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "u"}
    base = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": "j-abortjob-", "namespace": "default"},
    }
    assert errors_of({**base, "action": "AbortJob", "target": target}) == []
    assert_rejected({**base, "action": "Dance", "target": target}, "action", "Unsupported value")
    assert_rejected({**base, "action": "AbortJob"}, "target", "Required value")


# ------------------------------------------------------------------------------- helpers


def test_find_cycle() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("10s", True),
        ("1h2m3s", True),
        ("1.5m", True),
        ("0", True),
        ("300ms", True),
        ("10", False),
        ("1d", False),
        ("", False),
        ("s", False),
    ],
)
def test_go_durations(text: str, ok: bool) -> None:
    assert is_go_duration(text) is ok


def test_job_update_accepts_the_claim_names_the_controller_generates() -> None:
    doc = job()
    doc["spec"]["volumes"] = [{"mountPath": "/data", "volumeClaim": {"accessModes": ["RWO"]}}]
    _, old = decode(doc)
    assert isinstance(old, Job)
    old = apply_defaults(old)
    named = old.model_copy(deep=True)
    assert named.spec.volumes is not None
    named.spec.volumes[0].volume_claim_name = "train-pvc-abcdef123456"
    assert validate_job_update(old, named) == []
    moved = named.model_copy(deep=True)
    assert moved.spec.volumes is not None
    moved.spec.volumes[0].mount_path = "/elsewhere"
    assert validate_job_update(named, moved)  # anything else about a volume is still fixed
