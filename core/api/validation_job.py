"""Volcano's Job admission rules (split from `core.api.validation`): lifecycle policies, tasks
and the dependencies between them, volumes, the job's queue, the JobSpec as a whole (shared with
JobTemplate) and what an UPDATE may change. Separate because the Job is the largest family of
rules; the other kinds' rules live beside it.
"""

from __future__ import annotations

from core.api import keys
from core.api.batch import (
    KNOWN_JOB_PLUGINS,
    USER_ACTIONS,
    USER_EVENTS,
    Job,
    JobSpec,
    LifecyclePolicy,
    TaskSpec,
)
from core.api.errors import FieldError
from core.api.validation_common import (
    ClusterView,
    _network_topology_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    find_cycle,
    is_go_duration,
    qualified_name_errors,
)
from core.api.validation_pod import _cpu_is_integer, validate_pod_template


def _quoted(values: object) -> str:
    """Allowed values as kube-apiserver prints them: `"*", "PodFailed", ...`."""
    return ", ".join(f'"{value}"' for value in values)  # type: ignore[attr-defined]


_EVENTS_SUFFIX = f" supported values: {_quoted(USER_EVENTS)}"
_ACTIONS_SUFFIX = f" supported values: {_quoted(USER_ACTIONS)}"
_VALID_SUFFIX = (
    f"; supported events: {_quoted(USER_EVENTS)}; supported actions: {_quoted(USER_ACTIONS)}"
)

# ------------------------------------------------------------------------------------- Job


def validate_policies(policies: list[LifecyclePolicy] | None, path: str) -> list[FieldError]:
    """Volcano's validatePolicies: event/exitCode exclusivity, enums, duplicates, `*` alone."""
    errors: list[FieldError] = []
    seen_events: set[str] = set()
    seen_codes: set[int] = set()
    event_count = 0
    has_any = False
    for index, policy in enumerate(policies or []):
        where = f"{path}[{index}]"
        events = ([policy.event] if policy.event else []) + list(policy.events or [])
        if events and policy.exit_code is not None:
            errors.append(
                FieldError(
                    where, "must not specify event and exitCode simultaneously" + _VALID_SUFFIX
                )
            )
            continue
        if not events and policy.exit_code is None:
            errors.append(
                FieldError(where, "either event and exitCode should be specified" + _VALID_SUFFIX)
            )
            continue
        for event in events:
            event_count += 1
            if event not in USER_EVENTS:
                errors.append(
                    FieldError(
                        f"{where}.event",
                        f'Invalid value: "{event}": invalid policy event;' + _EVENTS_SUFFIX,
                    )
                )
                continue
            if event == "*":
                has_any = True
            if event in seen_events:
                errors.append(
                    FieldError(
                        f"{where}.event", f"duplicate event {event}  across different policy"
                    )
                )
            seen_events.add(event)
        if policy.exit_code is not None:
            if policy.exit_code == 0:
                errors.append(FieldError(f"{where}.exitCode", "0 is not a valid error code"))
            elif policy.exit_code in seen_codes:
                errors.append(
                    FieldError(f"{where}.exitCode", f"duplicate exitCode {policy.exit_code}")
                )
            seen_codes.add(policy.exit_code)
        if policy.action is None or policy.action not in USER_ACTIONS:
            errors.append(
                FieldError(
                    f"{where}.action",
                    f'Invalid value: "{policy.action or ""}": invalid policy action;'
                    + _ACTIONS_SUFFIX,
                )
            )
        if policy.timeout is not None and not is_go_duration(policy.timeout):
            errors.append(
                FieldError(
                    f"{where}.timeout",
                    f'Invalid value: "{policy.timeout}": must be a duration such as "10s" or '
                    '"1m30s"',
                )
            )
    if has_any and event_count > 1:
        errors.append(FieldError(path, "if there's * here, no other policy should be here"))
    return errors


def _task_errors(task: TaskSpec, index: int, job_name: str) -> list[FieldError]:
    path = f"spec.tasks[{index}]"
    name = task.name or ""
    errors: list[FieldError] = []
    errors += [
        FieldError(f"{path}.name", f'Invalid value: "{name}": {m}')
        for m in dns1123_label_errors(name)
    ]
    if task.replicas < 0:
        errors.append(FieldError(f"{path}.replicas", f"'replicas' < 0 in task: {name}"))
    if task.min_available is not None:
        if task.min_available < 0:
            errors.append(FieldError(f"{path}.minAvailable", f"'minAvailable' < 0 in task: {name}"))
        elif task.min_available > task.replicas:
            errors.append(
                FieldError(
                    f"{path}.minAvailable",
                    f"'minAvailable' is greater than 'replicas' in task: {name}, job: {job_name}",
                )
            )
    if task.max_retry is not None and task.max_retry < -1:
        errors.append(
            FieldError(f"{path}.maxRetry", "task 'maxRetry' must be >= -1 (-1 means unlimited)")
        )
    errors += validate_policies(task.policies, f"{path}.policies")
    pod_name = f"{job_name}-{name}-{index}"
    # Volcano checks IsQualifiedName; a pod name must also be a DNS-1123 subdomain.
    pod_problems = qualified_name_errors(pod_name) or dns1123_subdomain_errors(pod_name)
    if pod_problems:
        errors.append(
            FieldError(path, f"create pod with name {pod_name} validate failed {pod_problems}")
        )
    errors += validate_pod_template(task.template, f"{path}.template")
    if task.topology_policy and task.topology_policy != "none":
        pod_spec = task.template.get("spec") or {}
        for c_index, container in enumerate(pod_spec.get("containers") or []):
            if not _cpu_is_integer(container):
                errors.append(
                    FieldError(
                        f"{path}.template.spec.containers[{c_index}].resources.requests[cpu]",
                        f"the cpu request isn't an integer in spec.task[{index}] "
                        f"container[{c_index}].",
                    )
                )
    partition = task.partition_policy
    if partition is not None:
        where = f"{path}.partitionPolicy"
        if task.replicas != partition.total_partitions * partition.partition_size:
            errors.append(
                FieldError(
                    where,
                    f"'Replicas' are not equal to TotalPartitions*PartitionSize in task: {name}",
                )
            )
        if partition.min_partitions > 0 and task.min_available != (
            partition.min_partitions * partition.partition_size
        ):
            errors.append(
                FieldError(
                    where,
                    f"'MinAvailable' is not equal to MinPartitions*PartitionSize in task: {name}",
                )
            )
        errors += _network_topology_errors(partition.network_topology, f"{where}.networkTopology")
    return errors


def _task_dependency_errors(tasks: list[TaskSpec]) -> list[FieldError]:
    names = {t.name for t in tasks if t.name}
    graph: dict[str, list[str]] = {}
    errors: list[FieldError] = []
    for index, task in enumerate(tasks):
        deps = (task.depends_on.name or []) if task.depends_on else []
        for d_index, dep in enumerate(deps):
            if dep not in names:
                errors.append(
                    FieldError(
                        f"spec.tasks[{index}].dependsOn.name[{d_index}]",
                        f'Invalid value: "{dep}": task depends on a task that is not defined',
                    )
                )
        if task.name:
            graph[task.name] = [d for d in deps if d in names]
    if find_cycle(graph):
        errors.append(
            FieldError(
                "spec.tasks",
                "job has dependencies between tasks, but doesn't form a directed acyclic "
                "graph(DAG)",
            )
        )
    return errors


def validate_job_spec(
    spec: JobSpec, job_name: str, view: ClusterView | None = None
) -> list[FieldError]:
    """Rules of a JobSpec (shared by Job and JobTemplate)."""
    errors: list[FieldError] = []
    tasks = spec.tasks or []
    if not tasks:
        errors.append(FieldError("spec.tasks", "No task specified in job spec"))
    if spec.min_available is not None and spec.min_available < 0:
        errors.append(FieldError("spec.minAvailable", "job 'minAvailable' must be >= 0"))
    if spec.max_retry < 0:
        errors.append(FieldError("spec.maxRetry", "'maxRetry' cannot be less than zero."))
    if spec.ttl_seconds_after_finished is not None and spec.ttl_seconds_after_finished < 0:
        errors.append(
            FieldError(
                "spec.ttlSecondsAfterFinished",
                "'ttlSecondsAfterFinished' cannot be less than zero.",
            )
        )
    seen: dict[str, int] = {}
    for index, task in enumerate(tasks):
        errors += _task_errors(task, index, job_name)
        if task.name:
            if task.name in seen:
                errors.append(
                    FieldError(f"spec.tasks[{index}].name", f"duplicated task name {task.name}")
                )
            seen.setdefault(task.name, index)
    total_replicas = sum(max(t.replicas, 0) for t in tasks)
    if tasks and (spec.min_available or 0) > total_replicas:
        errors.append(
            FieldError(
                "spec.minAvailable",
                "job 'minAvailable' should not be greater than total replicas in tasks",
            )
        )
    errors += validate_policies(spec.policies, "spec.policies")
    errors += _network_topology_errors(spec.network_topology, "spec.networkTopology")
    for plugin in spec.plugins or {}:
        if plugin not in KNOWN_JOB_PLUGINS:
            errors.append(
                FieldError(f"spec.plugins[{plugin}]", f"unable to find job plugin: {plugin}")
            )
    if spec.plugins and "mpi" in spec.plugins:
        master = _flag_value(spec.plugins["mpi"], "master", "master")
        if master not in seen:
            errors.append(
                FieldError("spec.plugins[mpi]", "The specified mpi master task was not found")
            )
    errors += _volume_errors(spec)
    errors += _task_dependency_errors(tasks)
    if spec.running_estimate is not None and not is_go_duration(spec.running_estimate):
        errors.append(
            FieldError(
                "spec.runningEstimate", f'Invalid value: "{spec.running_estimate}": not a duration'
            )
        )
    if view is not None:
        errors += _job_queue_errors(spec.queue, view)
    return errors


def _flag_value(args: list[str], flag: str, default: str) -> str:
    for arg in args:
        for prefix in (f"--{flag}=", f"-{flag}="):
            if arg.startswith(prefix):
                return arg[len(prefix) :]
    return default


def _volume_errors(spec: JobSpec) -> list[FieldError]:
    errors = []
    mount_paths: set[str] = set()
    for index, volume in enumerate(spec.volumes or []):
        path = f"spec.volumes[{index}]"
        if not volume.mount_path:
            errors.append(FieldError(f"{path}.mountPath", "mountPath is required"))
        elif volume.mount_path in mount_paths:
            errors.append(
                FieldError(f"{path}.mountPath", f"duplicated mountPath: {volume.mount_path}")
            )
        mount_paths.add(volume.mount_path)
        if volume.volume_claim is None and not volume.volume_claim_name:
            errors.append(
                FieldError(path, "either VolumeClaim or VolumeClaimName must be specified")
            )
        if volume.volume_claim_name:
            problems = dns1123_subdomain_errors(volume.volume_claim_name)
            if problems:
                errors.append(
                    FieldError(
                        f"{path}.volumeClaimName",
                        f"invalid VolumeClaimName {volume.volume_claim_name} : {problems}",
                    )
                )
    return errors


def _job_queue_errors(queue_name: str, view: ClusterView) -> list[FieldError]:
    if view.queues is None:
        return []
    queue = view.queues.get(queue_name)
    if queue is None:
        return [
            FieldError(
                "spec.queue",
                f'unable to find job queue: queues.scheduling.volcano.sh "{queue_name}" not found',
            )
        ]
    errors = []
    state = (queue.status.state if queue.status else None) or "Open"
    if state != "Open":
        errors.append(
            FieldError(
                "spec.queue",
                f"can only submit job to queue with state `Open`, queue `{queue_name}` status is "
                f"`{state}`",
            )
        )
    if queue_name == keys.ROOT_QUEUE:
        errors.append(FieldError("spec.queue", "can not submit job to root queue"))
    children = [q for q in view.queues.values() if q.spec.parent == queue_name]
    if children:
        errors.append(
            FieldError(
                "spec.queue",
                f"can only submit job to leaf queue, queue `{queue_name}` has {len(children)} "
                "child queues",
            )
        )
    return errors


def validate_job(job: Job, view: ClusterView | None = None) -> list[FieldError]:
    """CREATE admission of a (defaulted) Job."""
    name = job.metadata.name or ""
    errors: list[FieldError] = []
    problems = qualified_name_errors(name) if name else []
    if problems:
        errors.append(
            FieldError("metadata.name", f"create job with name {name} validate failed {problems}")
        )
    return errors + validate_job_spec(job.spec, name, view)


def validate_job_update(old: Job, new: Job) -> list[FieldError]:
    """UPDATE admission: only minAvailable, priorityClassName, task replicas/minAvailable move."""
    errors = validate_job_spec(new.spec, new.metadata.name or "")
    old_tasks, new_tasks = old.spec.tasks or [], new.spec.tasks or []
    if len(old_tasks) != len(new_tasks):
        return [*errors, FieldError("spec.tasks", "job updates may not add or remove tasks")]
    if old.spec.queue != new.spec.queue:
        errors.append(FieldError("spec.queue", _IMMUTABLE_MSG))
    # The job controller writes the names it generated for unnamed claims (Volcano ignores
    # them in this comparison too).
    old_spec = old.spec.model_copy(deep=True)
    for before, after in zip(old_spec.volumes or [], new.spec.volumes or [], strict=False):
        if not before.volume_claim_name and after.volume_claim_name:
            before.volume_claim_name = after.volume_claim_name
    if _comparable(old_spec) != _comparable(new.spec):
        errors.append(FieldError("spec", _IMMUTABLE_MSG))
    return errors


_IMMUTABLE_MSG = (
    "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` "
    "and `PriorityClassName`"
)


def _comparable(spec: JobSpec) -> dict[str, object]:
    data = spec.to_dict()
    for key in ("minAvailable", "priorityClassName"):
        data.pop(key, None)
    for task in data.get("tasks") or []:
        task.pop("replicas", None)
        task.pop("minAvailable", None)
    return data
