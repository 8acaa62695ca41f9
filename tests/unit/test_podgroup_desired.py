"""The PodGroup a workload's pod implies (spec/volcano.md §2.3, §4.5): quota usage key set,
minResources, minMember, queue, inherited annotations, owners, and the update patch."""

from __future__ import annotations

from typing import Any

from core.quota import min_resources, pod_quota_usage
from core.records import PodGroupRecord, PodRecord, WorkloadRecord
from podgroup_controller.desired import (
    desired_podgroup,
    handled,
    min_member,
    podgroup_name,
    update_patch,
)


def pod(
    *,
    owner: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    resources: dict[str, Any] | None = None,
    **spec: Any,
) -> PodRecord:
    meta: dict[str, Any] = {
        "name": "p-0",
        "namespace": "ns",
        "uid": "pod-uid",
        "annotations": annotations or {},
        "labels": labels or {},
    }
    if owner:
        meta["ownerReferences"] = [owner]
    container = {"name": "c", "image": "i", "resources": resources or {}}
    return PodRecord(
        {"metadata": meta, "spec": {"schedulerName": "volcano", "containers": [container], **spec}}
    )


RS_REF = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "web-abc",
    "uid": "rs-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}


def replicaset(annotations: dict[str, str], replicas: int | None = 3) -> WorkloadRecord:
    spec = {} if replicas is None else {"replicas": replicas}
    return WorkloadRecord(
        {
            "metadata": {
                "name": "web-abc",
                "namespace": "ns",
                "uid": "rs-uid",
                "annotations": annotations,
            },
            "spec": spec,
        },
        "ReplicaSet",
    )


def test_quota_usage_key_set_of_volcanos_e2e() -> None:
    """Volcano's e2e "Generate PodGroup and valid minResource when creating job"."""
    both = {"cpu": "1", "memory": "1000Mi", "nvidia.com/gpu": "1"}
    usage = pod_quota_usage(
        {"containers": [{"name": "c", "resources": {"requests": both, "limits": both}}]}
    )
    assert sorted(usage) == sorted(
        [
            "count/pods",
            "pods",
            "cpu",
            "requests.cpu",
            "limits.cpu",
            "memory",
            "requests.memory",
            "limits.memory",
            "nvidia.com/gpu",
            "requests.nvidia.com/gpu",
        ]
    )
    assert min_resources(usage, 3) == {
        "count/pods": "3",
        "cpu": "3",
        "limits.cpu": "3",
        "limits.memory": "3000Mi",
        "memory": "3000Mi",
        "nvidia.com/gpu": "3",
        "pods": "3",
        "requests.cpu": "3",
        "requests.memory": "3000Mi",
        "requests.nvidia.com/gpu": "3",
    }


def test_quota_usage_details() -> None:
    spec = {
        "initContainers": [
            {"name": "init", "resources": {"requests": {"cpu": "2"}}},
            {
                "name": "sidecar",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}},
            },
        ],
        "containers": [
            {
                "name": "c",
                "resources": {
                    "requests": {"cpu": "500m", "hugepages-2Mi": "4Mi", "ephemeral-storage": "1Gi"},
                    "limits": {"cpu": "1", "example.com/fpga": "2"},
                },
            }
        ],
    }
    usage = pod_quota_usage(spec)
    assert usage["cpu"] == usage["requests.cpu"] == 2000  # the plain init container dominates
    assert usage["limits.cpu"] == 1200  # container + sidecar
    assert usage["hugepages-2Mi"] == usage["requests.hugepages-2Mi"] == 4 * 2**20
    assert usage["ephemeral-storage"] == usage["requests.ephemeral-storage"] == 2**30
    # An extended resource's limit is its request (API server defaulting).
    assert usage["example.com/fpga"] == usage["requests.example.com/fpga"] == 2
    assert "limits.example.com/fpga" not in usage and "limits.memory" not in usage
    assert pod_quota_usage(spec, terminal=True) == {"count/pods": 1}
    assert pod_quota_usage({"containers": [{"name": "c"}]}) == {"count/pods": 1, "pods": 1}


def test_bare_pod() -> None:
    p = pod(
        annotations={
            "scheduling.volcano.sh/queue-name": "research",
            "volcano.sh/preemptable": "false",
            "volcano.sh/jdb-max-unavailable": "1",
            "volcano.sh/network-topology-mode": "soft",
            "volcano.sh/network-topology-highest-tier": "2",
            "volcano.sh/other": "not copied from a pod",
        },
        labels={"volcano.sh/cooldown-time": "600s", "app": "x"},
        resources={"requests": {"cpu": "250m"}},
        priorityClassName="high",
    )
    assert handled(p, ("volcano",)) and not handled(p, ("default-scheduler",))
    assert podgroup_name(p) == "podgroup-pod-uid"
    group = desired_podgroup(p, None, "namespace-queue", inherit=True)
    assert group["metadata"] == {
        "name": "podgroup-pod-uid",
        "namespace": "ns",
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "p-0",
                "uid": "pod-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "annotations": {
            "volcano.sh/preemptable": "false",
            "volcano.sh/jdb-max-unavailable": "1",
        },
        "labels": {"volcano.sh/cooldown-time": "600s"},
    }
    assert group["spec"] == {
        "minMember": 1,
        "minResources": {
            "count/pods": "1",
            "cpu": "250m",
            "pods": "1",
            "requests.cpu": "250m",
        },
        "priorityClassName": "high",
        "networkTopology": {"mode": "soft", "highestTierAllowed": 2},
        "queue": "research",  # the pod's annotation beats the namespace's
    }
    assert group["status"] == {"phase": "Pending"}


def test_workload_pod_inherits_from_its_owner() -> None:
    owner = replicaset(
        {
            "scheduling.volcano.sh/group-min-member": "3",
            "volcano.sh/sla-waiting-time": "1h",
            "other.io/x": "no",
        }
    )
    p = pod(owner=RS_REF, resources={"requests": {"cpu": "1"}})
    assert podgroup_name(p) == "podgroup-rs-uid"
    group = desired_podgroup(p, owner, "namespace-queue", inherit=True)
    assert group["metadata"]["ownerReferences"] == [RS_REF]
    assert group["metadata"]["annotations"] == {"volcano.sh/sla-waiting-time": "1h"}
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"]["cpu"] == "3"
    assert group["spec"]["queue"] == "namespace-queue"
    plain = desired_podgroup(p, owner, "", inherit=False)
    assert plain["spec"]["minMember"] == 1 and "annotations" not in plain["metadata"]
    assert plain["spec"]["queue"] == "default"


def test_min_member_parsing() -> None:
    assert min_member(None) == 1
    assert min_member(replicaset({})) == 1
    for text, expected in (("5", 5), (" 2 ", 2), ("0", 0), ("-3", 1), ("three", 1)):
        assert min_member(replicaset({"scheduling.volcano.sh/group-min-member": text})) == expected
    assert replicaset({}, replicas=None).replicas == 1


def test_update_patch() -> None:
    owner = replicaset({"scheduling.volcano.sh/group-min-member": "2"})
    p = pod(owner=RS_REF, resources={"requests": {"cpu": "1"}})
    desired = desired_podgroup(p, owner, "", inherit=True)
    stored = {**desired, "metadata": {**desired["metadata"], "uid": "pg", "annotations": {}}}
    current = PodGroupRecord(stored)
    assert update_patch(current, desired) is None
    # The owner now asks for 4 members and the pods for memory instead of cpu.
    owner4 = replicaset(
        {"scheduling.volcano.sh/group-min-member": "4", "volcano.sh/preemptable": "true"}
    )
    p2 = pod(owner=RS_REF, resources={"requests": {"memory": "1Gi"}})
    patch = update_patch(current, desired_podgroup(p2, owner4, "", inherit=True))
    assert patch == {
        "spec": {
            "minMember": 4,
            "minResources": {
                "count/pods": "4",
                "pods": "4",
                "memory": "4Gi",
                "requests.memory": "4Gi",
                "cpu": None,  # dropped keys are removed, not left behind
                "requests.cpu": None,
            },
        },
        "metadata": {"annotations": {"volcano.sh/preemptable": "true"}},
    }
    # Someone else's annotations stay; the queue is never changed by an update.
    stored["metadata"]["annotations"] = {"user": "mine"}
    stored["spec"] = {**stored["spec"], "queue": "elsewhere"}
    assert update_patch(PodGroupRecord(stored), desired) is None


def test_scheduling_reads_resource_names_only() -> None:
    """The quota names in a controller-made minResources (count/pods, requests.*, limits.*)
    are not resources: the PodGroup record's scheduling vector leaves them out, as Volcano's
    scheduler does, or no node could ever offer them."""
    usage = pod_quota_usage(
        {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "x.io/gpu": "1"}}}]}
    )
    group = PodGroupRecord(
        {
            "metadata": {"name": "g", "namespace": "ns"},
            "spec": {"minMember": 2, "minResources": min_resources(usage, 2)},
        }
    )
    assert group.min_resources is not None
    assert group.min_resources.as_dict() == {"cpu": 2000, "pods": 2, "x.io/gpu": 2}
