"""The PodGroup a workload's pod implies, as pure functions.

`desired_podgroup` builds the whole object for a create; `update_patch` is the merge patch that
brings an existing group's controller-owned fields (minMember, minResources, priorityClassName,
networkTopology, inherited annotations and labels) to what the pod and its owner imply now —
None when nothing differs, so a reconcile that changes nothing writes nothing. The queue is
chosen once, at creation: moving an admitted group between queues is not a controller's call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from core.api import keys
from core.kube.client import PODGROUPS
from core.kube.status import replacing_merge_patch
from core.quota import min_resources
from core.records import PodGroupRecord, PodRecord, WorkloadRecord

NAME_PREFIX = "podgroup-"
# Owners whose `scheduling.volcano.sh/group-min-member` and volcano.sh/* annotations a group
# inherits (Volcano looks up exactly these kinds).
OWNER_KINDS = {
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
}
_POD_ANNOTATIONS = (keys.PREEMPTABLE, keys.COOLDOWN_TIME, keys.REVOCABLE_ZONE)
_POD_LABELS = (keys.PREEMPTABLE, keys.COOLDOWN_TIME)


def podgroup_name(pod: PodRecord) -> str:
    """`podgroup-<controller owner UID>`, or `podgroup-<pod UID>` for a pod without one: all
    pods of one ReplicaSet/StatefulSet/Job share a group."""
    return NAME_PREFIX + (pod.owner.uid if pod.owner else pod.uid)


def handled(pod: PodRecord, scheduler_names: tuple[str, ...]) -> bool:
    """Volcano's rule: a pod of one of our schedulers that is in no group yet."""
    return pod.scheduler_name in scheduler_names and not pod.group_name


def min_member(owner: WorkloadRecord | None) -> int:
    """The owner's `scheduling.volcano.sh/group-min-member`; 1 when absent, not an integer, or
    negative."""
    text = owner.annotations.get(keys.GROUP_MIN_MEMBER) if owner else None
    if text is None:
        return 1
    try:
        value = int(text.strip())
    except ValueError:
        return 1
    return value if value >= 0 else 1


def queue_of(pod: PodRecord, namespace_queue: str) -> str:
    """The pod's `scheduling.volcano.sh/queue-name`, else its namespace's, else `default`."""
    return pod.annotations.get(keys.QUEUE_NAME) or namespace_queue or keys.DEFAULT_QUEUE


def network_topology(pod: PodRecord) -> dict[str, Any] | None:
    mode = pod.annotations.get(keys.NETWORK_TOPOLOGY_MODE)
    tier = pod.annotations.get(keys.NETWORK_TOPOLOGY_HIGHEST_TIER)
    if mode is None and tier is None:
        return None
    topology: dict[str, Any] = {"mode": "soft" if mode == "soft" else "hard"}
    if tier is not None:
        with contextlib.suppress(ValueError):
            topology["highestTierAllowed"] = int(tier)
    return topology


def inherited_annotations(
    pod: PodRecord, owner: WorkloadRecord | None, inherit: bool
) -> dict[str, str]:
    """The owner's `volcano.sh/*` annotations (when inheriting), then the pod's preemption,
    cooldown, revocable-zone and disruption-budget annotations."""
    out: dict[str, str] = {}
    if inherit and owner is not None:
        out.update((k, v) for k, v in owner.annotations.items() if k.startswith("volcano.sh/"))
    for name in _POD_ANNOTATIONS:
        if name in pod.annotations:
            out[name] = pod.annotations[name]
    if keys.JDB_MIN_AVAILABLE in pod.annotations:
        out[keys.JDB_MIN_AVAILABLE] = pod.annotations[keys.JDB_MIN_AVAILABLE]
    elif keys.JDB_MAX_UNAVAILABLE in pod.annotations:
        out[keys.JDB_MAX_UNAVAILABLE] = pod.annotations[keys.JDB_MAX_UNAVAILABLE]
    return out


def inherited_labels(pod: PodRecord) -> dict[str, str]:
    return {name: pod.labels[name] for name in _POD_LABELS if name in pod.labels}


def owner_references(pod: PodRecord) -> list[dict[str, Any]]:
    """The pod's ownerReferences when it has a controller (the group goes with the workload),
    else a controller reference to the pod itself (the group goes with the pod)."""
    if pod.owner is not None:
        return [ref.to_dict() for ref in pod.owner_refs]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.name,
            "uid": pod.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def desired_spec(pod: PodRecord, owner: WorkloadRecord | None, inherit: bool) -> dict[str, Any]:
    """The controller-owned spec fields (everything but the queue)."""
    members = min_member(owner) if inherit else 1
    spec: dict[str, Any] = {
        "minMember": members,
        "minResources": min_resources(pod.usage, members),
    }
    if pod.priority_class:
        spec["priorityClassName"] = pod.priority_class
    topology = network_topology(pod)
    if topology is not None:
        spec["networkTopology"] = topology
    return spec


def desired_podgroup(
    pod: PodRecord, owner: WorkloadRecord | None, namespace_queue: str, *, inherit: bool
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": podgroup_name(pod),
        "namespace": pod.namespace,
        "ownerReferences": owner_references(pod),
    }
    annotations = inherited_annotations(pod, owner, inherit)
    if annotations:
        metadata["annotations"] = annotations
    labels = inherited_labels(pod)
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": PODGROUPS.kind,
        "metadata": metadata,
        "spec": {**desired_spec(pod, owner, inherit), "queue": queue_of(pod, namespace_queue)},
        "status": {"phase": "Pending"},
    }


def _missing(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in wanted.items() if current.get(k) != v}


def update_patch(current: PodGroupRecord, desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """A merge patch bringing `current` to `desired` (a `desired_podgroup` object), or None.

    Spec fields the controller owns are replaced (a key dropped from minResources is nulled);
    annotations and labels are only added or changed, never removed, since the scheduler and
    users keep their own there.
    """
    spec = desired["spec"]
    patch_spec: dict[str, Any] = {}
    if current.min_member != spec["minMember"]:
        patch_spec["minMember"] = spec["minMember"]
    current_min_resources = current.spec.get("minResources")
    if (current_min_resources or {}) != spec["minResources"]:
        patch_spec["minResources"] = replacing_merge_patch(
            current_min_resources, spec["minResources"]
        )
    if current.priority_class != spec.get("priorityClassName", ""):
        patch_spec["priorityClassName"] = spec.get("priorityClassName")
    topology = spec.get("networkTopology")
    if current.network_topology != topology:
        patch_spec["networkTopology"] = (
            None if topology is None else replacing_merge_patch(current.network_topology, topology)
        )
    meta = desired["metadata"]
    patch_meta: dict[str, Any] = {}
    annotations = _missing(current.annotations, meta.get("annotations") or {})
    if annotations:
        patch_meta["annotations"] = annotations
    labels = _missing(current.labels, meta.get("labels") or {})
    if labels:
        patch_meta["labels"] = labels
    if not patch_spec and not patch_meta:
        return None
    patch: dict[str, Any] = {}
    if patch_spec:
        patch["spec"] = patch_spec
    if patch_meta:
        patch["metadata"] = patch_meta
    return patch
