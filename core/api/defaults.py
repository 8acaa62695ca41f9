"""Volcano's mutating admission defaults.

Each function returns a defaulted deep copy; the input is never changed. Fields set here are
marked as set, so they appear in `to_dict()` exactly as the API server would store them.
"""

from __future__ import annotations

from core.api import keys
from core.api.batch import Job, JobSpec
from core.api.scheduling import Queue

# Frameworks whose pods need per-pod DNS names, so Volcano adds the `svc` plugin for them.
_NEEDS_SVC = ("tensorflow", "mpi", "pytorch", "ray")


def default_job_spec(spec: JobSpec, scheduler_name: str = keys.DEFAULT_SCHEDULER_NAME) -> JobSpec:
    spec = spec.model_copy(deep=True)
    if not spec.queue:
        spec.queue = keys.DEFAULT_QUEUE
    if not spec.scheduler_name:
        spec.scheduler_name = scheduler_name
    if spec.max_retry == 0:
        spec.max_retry = 3
    for index, task in enumerate(spec.tasks or []):
        if not task.name:
            task.name = f"default{index}"
        pod_spec = task.template.get("spec")
        if (
            isinstance(pod_spec, dict)
            and pod_spec.get("hostNetwork")
            and not pod_spec.get("dnsPolicy")
        ):
            pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
        if task.min_available is None:
            partition = task.partition_policy
            if partition is not None and partition.min_partitions > 0:
                task.min_available = partition.min_partitions * partition.partition_size
            else:
                task.min_available = task.replicas
        if not task.max_retry:
            task.max_retry = 3
    if not spec.min_available:
        spec.min_available = sum(t.min_available or 0 for t in spec.tasks or [])
    if spec.plugins is not None:
        plugins = dict(spec.plugins)
        if any(name in plugins for name in _NEEDS_SVC):
            plugins.setdefault("svc", [])
        if "mpi" in plugins:
            plugins.setdefault("ssh", [])
        spec.plugins = plugins
    return spec


def default_job(job: Job, scheduler_name: str = keys.DEFAULT_SCHEDULER_NAME) -> Job:
    job = job.model_copy(deep=True)
    job.spec = default_job_spec(job.spec, scheduler_name)
    return job


def default_queue(queue: Queue) -> Queue:
    queue = queue.model_copy(deep=True)
    if queue.spec.reclaimable is None:
        queue.spec.reclaimable = True
    if queue.spec.weight == 0:
        queue.spec.weight = 1
    annotations = queue.metadata.annotations or {}
    path = annotations.get(keys.HIERARCHY)
    weights = annotations.get(keys.HIERARCHY_WEIGHTS)
    if path and weights and not path.startswith(keys.ROOT_QUEUE):
        annotations = dict(annotations)
        annotations[keys.HIERARCHY] = f"{keys.ROOT_QUEUE}/{path}"
        annotations[keys.HIERARCHY_WEIGHTS] = f"1/{weights}"
        queue.metadata.annotations = annotations
    return queue
