"""The objects Volcano's job controller makes for a Job, as pure functions: its PodGroup and its
pods, and whether a task's `dependsOn` is
satisfied."""

from __future__ import annotations

import copy
import hashlib
import secrets
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.api import keys
from core.api.batch import JobSpec, TaskSpec
from core.quota import min_resources, pod_quota_usage
from flow_controller.job.partitions import partition_id, sub_group_policies

OUT_OF_SYNC = "volcano.sh/controller-out-of-sync"
JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
# Job annotations and labels Volcano copies onto every pod.
_COPIED_ANNOTATIONS = (keys.PREEMPTABLE, keys.COOLDOWN_TIME, keys.REVOCABLE_ZONE)
_COPIED_LABELS = (keys.PREEMPTABLE, keys.COOLDOWN_TIME)


def podgroup_name(name: str, uid: str) -> str:
    return f"{name}-{uid}"


def pod_name(job: str, task: str, index: int) -> str:
    return f"{job}-{task}-{index}"


def owner_reference(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": JOB_API_VERSION,
        "kind": "Job",
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def task_min_available(task: TaskSpec) -> int:
    if task.min_available is not None:
        return task.min_available
    partition = task.partition_policy
    if partition is not None and partition.min_partitions > 0:
        return partition.min_partitions * partition.partition_size
    return task.replicas


def _add(total: dict[str, int], usage: Mapping[str, int], times: int) -> None:
    for name, amount in usage.items():
        total[name] = total.get(name, 0) + amount * times


def job_min_resources(spec: JobSpec) -> dict[str, str]:
    """Volcano's calcPGMinResources: the quota usage of the `minAvailable` pods the gang needs
    first — each task's minAvailable in task order, then the tasks' surplus replicas — or, when
    minAvailable is below the tasks' minimums, whole tasks in order."""
    tasks = list(spec.tasks or ())
    wanted = spec.min_available or 0
    usage = {t.name or "": pod_quota_usage((t.template or {}).get("spec") or {}) for t in tasks}
    total: dict[str, int] = {}
    left = wanted
    if wanted < sum(task_min_available(t) for t in tasks):
        for task in tasks:
            take = min(task.replicas, left)
            _add(total, usage[task.name or ""], take)
            left -= take
    else:
        for task in tasks:
            take = min(task_min_available(task), left)
            _add(total, usage[task.name or ""], take)
            left -= take
        for task in tasks:
            take = min(task.replicas - task_min_available(task), left)
            if take > 0:
                _add(total, usage[task.name or ""], take)
                left -= take
    return min_resources(total, 1) if total else {}


def build_podgroup(meta: Mapping[str, Any], spec: JobSpec) -> dict[str, Any]:
    group_spec: dict[str, Any] = {
        "minMember": spec.min_available or 0,
        "minTaskMember": {t.name or "": task_min_available(t) for t in spec.tasks or ()},
        "queue": spec.queue,
        "minResources": job_min_resources(spec),
    }
    if spec.priority_class_name:
        group_spec["priorityClassName"] = spec.priority_class_name
    if spec.network_topology is not None:
        # Volcano's createOrUpdatePodGroup: set when the PodGroup is made, never updated.
        topology = spec.network_topology
        group_topology: dict[str, Any] = {"mode": topology.mode}
        if topology.highest_tier_allowed is not None:
            group_topology["highestTierAllowed"] = topology.highest_tier_allowed
        elif topology.highest_tier_name:
            group_topology["highestTierName"] = topology.highest_tier_name
        group_spec["networkTopology"] = group_topology
    sub_groups = sub_group_policies(spec)
    if sub_groups:
        group_spec["subGroupPolicy"] = sub_groups
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": podgroup_name(meta["name"], meta.get("uid", "")),
            "namespace": meta.get("namespace", ""),
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(meta)],
        },
        "spec": group_spec,
    }


def podgroup_changes(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The spec fields of a PodGroup to rewrite (Volcano updates minMember/minResources,
    priorityClassName and minTaskMember when they differ, and subGroupPolicy — removed as
    well — when the tasks' partition policies changed)."""
    changes: dict[str, Any] = {}
    for name in ("minMember", "minResources", "priorityClassName", "minTaskMember"):
        if name in desired and current.get(name) != desired[name]:
            changes[name] = desired[name]
    if (current.get("subGroupPolicy") or None) != desired.get("subGroupPolicy"):
        changes["subGroupPolicy"] = desired.get("subGroupPolicy")  # None: merge-patch removal
    return changes


def build_pod(
    meta: Mapping[str, Any],
    spec: JobSpec,
    task: TaskSpec,
    index: int,
    *,
    version: int,
    retry_count: int,
) -> dict[str, Any]:
    """Pod `<job>-<task>-<index>` from the task's template with Volcano's labels,
    annotations, owner reference, schedulerName and priorityClassName."""
    job, namespace = meta["name"], meta.get("namespace", "")
    task_name = task.name or "default"
    template = copy.deepcopy(task.template or {})
    template_meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    annotations = dict(template_meta.get("annotations") or {})
    labels = dict(template_meta.get("labels") or {})
    if not pod_spec.get("schedulerName") and spec.scheduler_name:
        pod_spec["schedulerName"] = spec.scheduler_name
    if not pod_spec.get("priorityClassName") and spec.priority_class_name:
        pod_spec["priorityClassName"] = spec.priority_class_name
    annotations.update(
        {
            keys.TASK_INDEX: str(index),
            keys.TASK_SPEC: task_name,
            keys.GROUP_NAME: podgroup_name(job, meta.get("uid", "")),
            keys.JOB_NAME: job,
            keys.VOLCANO_QUEUE_NAME: spec.queue,
            keys.JOB_VERSION: str(version),
            keys.TEMPLATE_UID: f"{job}-{task_name}",
            keys.JOB_RETRY_COUNT: str(retry_count),
        }
    )
    if task.topology_policy:
        annotations["volcano.sh/numa-topology-policy"] = task.topology_policy
    job_annotations = meta.get("annotations") or {}
    for name in _COPIED_ANNOTATIONS:
        if name in job_annotations:
            annotations[name] = job_annotations[name]
    if keys.JDB_MIN_AVAILABLE in job_annotations:
        annotations[keys.JDB_MIN_AVAILABLE] = job_annotations[keys.JDB_MIN_AVAILABLE]
    elif keys.JDB_MAX_UNAVAILABLE in job_annotations:
        annotations[keys.JDB_MAX_UNAVAILABLE] = job_annotations[keys.JDB_MAX_UNAVAILABLE]
    labels.update(
        {
            keys.TASK_INDEX: str(index),
            keys.JOB_NAME: job,
            keys.TASK_SPEC: task_name,
            keys.JOB_NAMESPACE: namespace,
            keys.VOLCANO_QUEUE_NAME: spec.queue,
        }
    )
    partition = partition_id(task, index)
    if partition is not None:
        labels[keys.PARTITION_ID] = partition
    job_labels = meta.get("labels") or {}
    for name in _COPIED_LABELS:
        if name in job_labels:
            labels[name] = job_labels[name]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(job, task_name, index),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(meta)],
        },
        "spec": pod_spec,
    }


def add_markers(pod: dict[str, Any], markers: tuple[str, ...]) -> None:
    """Routing markers (`--pod-resource-markers`) as limits of the pod's first container: what
    kube-scheduler's `managedResources` look for (requests follow limits by the API server's
    defaulting; no node has them and none needs to, see core.api.keys.MARKERS)."""
    containers = pod.get("spec", {}).get("containers") or []
    if not markers or not containers:
        return
    resources = containers[0].setdefault("resources", {})
    limits = resources.setdefault("limits", {})
    for name in markers:
        limits.setdefault(name, "1")
    requests = resources.get("requests")
    if requests is not None:  # a request, if given, must equal the limit (extended resources)
        for name in markers:
            requests.setdefault(name, limits[name])


def scheduler_of(pod: dict[str, Any]) -> str:
    """The scheduler a pod body names (kube-scheduler's default when it names none)."""
    return (pod.get("spec") or {}).get("schedulerName") or keys.KUBE_DEFAULT_SCHEDULER


@dataclass(frozen=True, slots=True)
class BindMarker:
    """`--bind-marker` (second-scheduler install): the bind extender entry's managedResources
    marker, added to the pods vulcan's scheduler schedules (schedulerName one of `schedulers`)
    at creation, so that their binds come to vulcan's gang barrier. A pod of another scheduler
    gets none: a scheduler without vulcan's entries would count it as a resource no node has."""

    name: str
    schedulers: frozenset[str]

    def add_to(self, pod: dict[str, Any]) -> None:
        if scheduler_of(pod) in self.schedulers:
            add_markers(pod, (self.name,))


def add_allocation_gate(pod: dict[str, Any]) -> None:
    """The queue-allocation gate (Volcano's `scheduling.volcano.sh/queue-allocation-gate`):
    kube-scheduler does not try a gated pod (its PreEnqueue), so the members of a job that
    waits for its queue stay out of its queue instead of being tried and refused over and over,
    delaying the members of admitted gangs behind them. vulcan's extender lifts the gate when
    the gang is admitted, and from members that come later to an admitted gang. A gate can only
    be added at creation."""
    spec = pod.setdefault("spec", {})
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        gates = spec["schedulingGates"] = []
    if not any(isinstance(g, dict) and g.get("name") == keys.QUEUE_ALLOCATION_GATE for g in gates):
        gates.append({"name": keys.QUEUE_ALLOCATION_GATE})


def claim_name(job: str) -> str:
    """Volcano's name for an unnamed claim: `<job>-pvc-<12 random [0-9a-z]>`."""
    alphabet = string.digits + string.ascii_lowercase
    return f"{job}-pvc-" + "".join(secrets.choice(alphabet) for _ in range(12))


def build_claim(meta: Mapping[str, Any], name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", ""),
            "ownerReferences": [owner_reference(meta)],
        },
        "spec": copy.deepcopy(dict(spec)),
    }


def mount_volumes(pod: dict[str, Any], job: str, spec: JobSpec) -> None:
    """One volume per claim, mounted at its mountPath in every app container (Volcano names
    the volume `<job>-<12 random>`; here a hash of the claim, the same in every pod)."""
    pod_spec = pod["spec"]
    for volume in spec.volumes or ():
        if not volume.volume_claim_name:
            continue
        digest = hashlib.sha256(volume.volume_claim_name.encode()).hexdigest()[:12]
        name = f"{job}-{digest}"
        volumes = pod_spec.setdefault("volumes", [])
        if not any(v.get("name") == name for v in volumes):
            volumes.append(
                {"name": name, "persistentVolumeClaim": {"claimName": volume.volume_claim_name}}
            )
        for container in pod_spec.get("containers") or ():
            container.setdefault("volumeMounts", []).append(
                {"name": name, "mountPath": volume.mount_path}
            )


def dependencies_met(task: TaskSpec, ready: Mapping[str, bool]) -> bool:
    """Whether a task with `dependsOn` may create its pods: with `iteration: any` (and several
    names) one named task ready is enough, otherwise all must be."""
    depends = task.depends_on
    if depends is None or not depends.name:
        return True
    names: Sequence[str] = depends.name
    if depends.iteration == "any" and len(names) > 1:
        return any(ready.get(name, False) for name in names)
    return all(ready.get(name, False) for name in names)
