"""Volcano's admission rules (spec/volcano.md §6): the union of its webhooks and its
ValidatingAdmissionPolicies, for Job, PodGroup, Queue, JobFlow, JobTemplate and Command.

Every function returns a list of `FieldError` (field path + reason, reason text as Volcano words
it); an empty list means valid. Checks that need the cluster (does the queue exist? is it Open?)
run only when a `ClusterView` is given, so the same code serves offline `vulcan validate` and the
API-server side admission.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from core.api import keys
from core.api.base import DNS1123_LABEL, DNS1123_SUBDOMAIN, KubeObject
from core.api.batch import (
    ALL_ACTIONS,
    KNOWN_JOB_PLUGINS,
    USER_ACTIONS,
    USER_EVENTS,
    Command,
    Job,
    JobSpec,
    LifecyclePolicy,
    TaskSpec,
)
from core.api.errors import FieldError
from core.api.flow import JobFlow, JobTemplate
from core.api.scheduling import NetworkTopologySpec, PodGroup, Queue
from core.resources import QuantityError, parse_quantity

_LABEL_RE = re.compile(DNS1123_LABEL)
_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN)
_QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DURATION_RE = re.compile(r"^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com')"
)
_QUALIFIED_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc')"
)
_VALID_SUFFIX = f" valid events are {list(USER_EVENTS)}, valid actions are {list(USER_ACTIONS)}"


@dataclass(slots=True)
class ClusterView:
    """What admission may consult about the cluster. `queues=None` means "unknown": skip."""

    queues: Mapping[str, Queue] | None = None
    scheduler_names: tuple[str, ...] = (keys.DEFAULT_SCHEDULER_NAME,)
    max_queue_depth: int = 5
    allocated_pods: Mapping[str, int] = field(default_factory=dict)
    podgroups_by_queue: Mapping[str, Sequence[str]] | None = None
    """`namespace/name` of the PodGroups in each queue; None means "unknown": skip the check."""


# --------------------------------------------------------------------------------- helpers


def dns1123_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_RE.match(value):
        errors.append(_LABEL_MSG)
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not _SUBDOMAIN_RE.match(value):
        errors.append(_SUBDOMAIN_MSG)
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """Kubernetes' IsQualifiedName for a name without a prefix (what Volcano checks)."""
    errors = []
    if not value:
        return ["name part must be non-empty"]
    if len(value) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME_RE.match(value):
        errors.append(_QUALIFIED_MSG)
    return errors


def is_go_duration(value: str) -> bool:
    return bool(_DURATION_RE.match(value))


def _network_topology_errors(nt: NetworkTopologySpec | None, path: str) -> list[FieldError]:
    if nt is not None and nt.highest_tier_allowed is not None and nt.highest_tier_name:
        return [
            FieldError(
                path,
                "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
                "simultaneously",
            )
        ]
    return []


def _resource_list_errors(resources: Mapping[str, object] | None, path: str) -> list[FieldError]:
    """Quantities must parse and be non-negative (Volcano's queue and pod rules)."""
    errors = []
    for name, amount in (resources or {}).items():
        try:
            quantity = parse_quantity(amount)  # type: ignore[arg-type]
        except QuantityError as exc:
            errors.append(FieldError(f"{path}[{name}]", str(exc)))
            continue
        if quantity.milli_value() < 0:
            errors.append(FieldError(f"{path}[{name}]", f'Invalid value: "{amount}": must be >= 0'))
    return errors


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
                        f'Invalid value: "{event}": invalid policy event;' + _VALID_SUFFIX,
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
                    + _VALID_SUFFIX,
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


def _container_errors(container: object, path: str, names: set[str]) -> list[FieldError]:
    if not isinstance(container, dict):
        return [FieldError(path, "Invalid value: must be an object")]
    errors = []
    name = container.get("name")
    if not isinstance(name, str) or not name:
        errors.append(FieldError(f"{path}.name", "Required value"))
    else:
        errors += [
            FieldError(f"{path}.name", f'Invalid value: "{name}": {m}')
            for m in dns1123_label_errors(name)
        ]
        if name in names:
            errors.append(FieldError(f"{path}.name", f'Duplicate value: "{name}"'))
        names.add(name)
    if not container.get("image"):
        errors.append(FieldError(f"{path}.image", "Required value"))
    resources = container.get("resources") or {}
    if not isinstance(resources, dict):
        return [*errors, FieldError(f"{path}.resources", "Invalid value: must be an object")]
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    for part, values in (("requests", requests), ("limits", limits)):
        if not isinstance(values, dict):
            errors.append(
                FieldError(f"{path}.resources.{part}", "Invalid value: must be an object")
            )
    if not isinstance(requests, dict) or not isinstance(limits, dict):
        return errors
    errors += _resource_list_errors(requests, f"{path}.resources.requests")
    errors += _resource_list_errors(limits, f"{path}.resources.limits")
    for name_, request in requests.items():
        if name_ not in limits:
            continue
        try:
            if parse_quantity(request).exact > parse_quantity(limits[name_]).exact:
                errors.append(
                    FieldError(
                        f"{path}.resources.requests[{name_}]",
                        f'Invalid value: "{request}": must be less than or equal to {name_} limit'
                        f" of {limits[name_]}",
                    )
                )
        except QuantityError:
            pass  # already reported above
    return errors


def validate_pod_template(template: Mapping[str, object], path: str) -> list[FieldError]:
    """The parts of Kubernetes' PodTemplate validation that matter for scheduling."""
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return [FieldError(f"{path}.spec", "Required value")]
    errors: list[FieldError] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        errors.append(FieldError(f"{path}.spec.containers", "Required value"))
        containers = []
    names: set[str] = set()
    for index, container in enumerate(containers):
        errors += _container_errors(container, f"{path}.spec.containers[{index}]", names)
    for index, container in enumerate(spec.get("initContainers") or []):
        errors += _container_errors(container, f"{path}.spec.initContainers[{index}]", names)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in ("Always", "OnFailure", "Never"):
        errors.append(
            FieldError(
                f"{path}.spec.restartPolicy",
                f'Unsupported value: "{policy}": supported values: "Always", "OnFailure", "Never"',
            )
        )
    errors += _resource_list_errors(spec.get("overhead"), f"{path}.spec.overhead")  # type: ignore[arg-type]
    return errors


def _cpu_is_integer(container: object) -> bool:
    if not isinstance(container, dict):
        return True
    requests = (container.get("resources") or {}).get("requests") or {}
    if "cpu" not in requests:
        return True
    try:
        return parse_quantity(requests["cpu"]).milli_value() % 1000 == 0
    except QuantityError:
        return True  # reported elsewhere


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


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle in a directed graph as a list of vertices, or None when it is a DAG."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(graph, white)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        color[node] = grey
        stack.append(node)
        for nxt in graph.get(node, ()):
            if color.get(nxt, white) == grey:
                return [*stack[stack.index(nxt) :], nxt]
            if color.get(nxt, white) == white and nxt in graph:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = black
        return None

    for vertex in graph:
        if color[vertex] == white:
            found = visit(vertex)
            if found:
                return found
    return None


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


# -------------------------------------------------------------------------------- PodGroup


def validate_pod_group(group: PodGroup, view: ClusterView | None = None) -> list[FieldError]:
    errors = _network_topology_errors(group.spec.network_topology, "spec.networkTopology")
    for index, policy in enumerate(group.spec.sub_group_policy or []):
        for err in _network_topology_errors(
            policy.network_topology, f"spec.subGroupPolicy[{index}].networkTopology"
        ):
            errors.append(FieldError(err.field, f"in subGroupPolicy '{policy.name}': {err.reason}"))
    for task, count in (group.spec.min_task_member or {}).items():
        if count < 0:
            errors.append(
                FieldError(f"spec.minTaskMember[{task}]", f"Invalid value: {count}: must be >= 0")
            )
    errors += _resource_list_errors(group.spec.min_resources, "spec.minResources")
    if view is not None and view.queues is not None and group.spec.queue:
        queue = view.queues.get(group.spec.queue)
        if queue is None:
            errors.append(
                FieldError(
                    "spec.queue",
                    f'unable to find queue: queues.scheduling.volcano.sh "{group.spec.queue}" '
                    "not found",
                )
            )
        else:
            state = (queue.status.state if queue.status else None) or "Open"
            if state != "Open":
                errors.append(
                    FieldError(
                        "spec.queue",
                        "can only submit PodGroup to queue with state `Open`, queue "
                        f"`{group.spec.queue}` status is `{state}`",
                    )
                )
    return errors


# ----------------------------------------------------------------------------------- Queue


def _quantity(amount: object) -> float:
    return parse_quantity(amount).exact  # type: ignore[arg-type, return-value]


def validate_queue(
    queue: Queue, view: ClusterView | None = None, old: Queue | None = None
) -> list[FieldError]:
    """CREATE (old=None) or UPDATE admission of a (defaulted) Queue."""
    name = queue.metadata.name or ""
    spec = queue.spec
    errors: list[FieldError] = []
    if name:
        errors += [
            FieldError("metadata.name", f'Invalid value: "{name}": {m}')
            for m in dns1123_subdomain_errors(name)
        ]
    if spec.weight <= 0:
        errors.append(
            FieldError("spec.weight", f"Invalid value: {spec.weight}: queue weight must be > 0")
        )
    capability = spec.capability or {}
    deserved = spec.deserved or {}
    guarantee = (spec.guarantee.resource if spec.guarantee else None) or {}
    bad = _resource_list_errors(capability, "spec.capability")
    bad += _resource_list_errors(deserved, "spec.deserved")
    bad += _resource_list_errors(guarantee, "spec.guarantee.resource")
    errors += bad
    if not bad:
        for resource, amount in guarantee.items():
            if resource not in deserved:
                errors.append(
                    FieldError(
                        f"spec.deserved[{resource}]",
                        f"deserved[{resource}] must be >= guarantee[{resource}]={amount}",
                    )
                )
            elif _quantity(deserved[resource]) < _quantity(amount):
                errors.append(
                    FieldError(
                        f"spec.deserved[{resource}]",
                        f"deserved[{resource}]={deserved[resource]} must be >= "
                        f"guarantee[{resource}]={amount}",
                    )
                )
        for resource, amount in deserved.items():
            if resource in capability and _quantity(amount) > _quantity(capability[resource]):
                errors.append(
                    FieldError(
                        f"spec.deserved[{resource}]",
                        f"deserved[{resource}]={amount} must be <= "
                        f"capability[{resource}]={capability[resource]}",
                    )
                )
    state = queue.status.state if queue.status else None
    if state is not None and state not in ("Open", "Closed"):
        errors.append(FieldError("status.state", "queue state must be in [Open Closed]"))
    errors += _hierarchy_annotation_errors(queue, view)
    if spec.parent and spec.parent == name:
        errors.append(FieldError("spec.parent", f"queue {name} cannot use itself as parent"))
    if (
        name == keys.ROOT_QUEUE
        and old is not None
        and _resource_fields(old) != _resource_fields(queue)
    ):
        errors.append(
            FieldError(
                "spec",
                "root queue's resource attributes (capability, deserved, guarantee) cannot be "
                "modified",
            )
        )
    if view is not None and view.queues is not None and name != keys.ROOT_QUEUE:
        errors += _queue_tree_errors(queue, view, old)
    return errors


def _resource_fields(queue: Queue) -> tuple[object, object, object]:
    spec = queue.spec
    return (spec.capability, spec.deserved, spec.guarantee.resource if spec.guarantee else None)


def _hierarchy_annotation_errors(queue: Queue, view: ClusterView | None) -> list[FieldError]:
    annotations = queue.metadata.annotations or {}
    path = annotations.get(keys.HIERARCHY)
    weights = annotations.get(keys.HIERARCHY_WEIGHTS)
    if not path and not weights:
        return []
    where = f"metadata.annotations[{keys.HIERARCHY_WEIGHTS}]"
    parts, weight_parts = (path or "").split("/"), (weights or "").split("/")
    if len(parts) != len(weight_parts):
        return [
            FieldError(
                where,
                f"{keys.HIERARCHY} must have the same length with {keys.HIERARCHY_WEIGHTS}",
            )
        ]
    errors = []
    for weight in weight_parts:
        try:
            ok = float(weight) > 0
        except ValueError:
            ok = False
        if not ok:
            errors.append(
                FieldError(
                    where, f"{keys.HIERARCHY_WEIGHTS} must be positive numbers, got {weight}"
                )
            )
    if view is not None and view.queues is not None and path:
        for other in view.queues.values():
            if other.metadata.name == queue.metadata.name:
                continue
            other_path = (other.metadata.annotations or {}).get(keys.HIERARCHY, "")
            if other_path.startswith(path + "/"):
                errors.append(
                    FieldError(
                        f"metadata.annotations[{keys.HIERARCHY}]",
                        f"{path} is not allowed to be in the sub path of {other_path} of queue "
                        f"{other.metadata.name}",
                    )
                )
    return errors


def _queue_tree_errors(queue: Queue, view: ClusterView, old: Queue | None) -> list[FieldError]:
    assert view.queues is not None
    name = queue.metadata.name or ""
    queues = dict(view.queues)
    queues[name] = queue
    parent = queue.spec.parent or keys.ROOT_QUEUE
    errors: list[FieldError] = []
    parent_changed = old is None or (old.spec.parent or keys.ROOT_QUEUE) != parent
    if parent_changed and parent != keys.ROOT_QUEUE:
        if parent not in view.queues:
            errors.append(
                FieldError("spec.parent", f'queues.scheduling.volcano.sh "{parent}" not found')
            )
            return errors
        depth, cursor, visited = 1, parent, {name}
        while cursor and cursor != keys.ROOT_QUEUE and cursor not in visited:
            visited.add(cursor)
            depth += 1
            cursor = queues[cursor].spec.parent or keys.ROOT_QUEUE if cursor in queues else ""
        if depth > view.max_queue_depth:
            errors.append(
                FieldError(
                    "spec.parent",
                    f"queue {name} exceeds the maximum allowed depth of {view.max_queue_depth}",
                )
            )
        has_children = any(
            (q.spec.parent or "") == parent for n, q in view.queues.items() if n != name
        )
        allocated = view.allocated_pods.get(parent, 0)
        if not has_children and allocated:
            errors.append(
                FieldError(
                    "spec.parent",
                    f"queue {parent} cannot be the parent queue of queue {name} because it has "
                    f"allocated Pods: {allocated}",
                )
            )
    # Capability may not exceed the nearest ancestor that sets it.
    for resource, amount in (queue.spec.capability or {}).items():
        cursor = parent
        seen = {name}
        while cursor in queues and cursor not in seen:
            seen.add(cursor)
            limit = (queues[cursor].spec.capability or {}).get(resource)
            if limit is not None:
                if _quantity(amount) > _quantity(limit):
                    errors.append(
                        FieldError(
                            f"spec.capability[{resource}]",
                            f"queue {name} capability[{resource}]={amount} exceeds its ancestor's "
                            f"capability={limit}",
                        )
                    )
                break
            cursor = queues[cursor].spec.parent or keys.ROOT_QUEUE
            if cursor == keys.ROOT_QUEUE and keys.ROOT_QUEUE not in queues:
                break
    # Siblings' guarantee and deserved must fit in the parent's.
    if parent in queues:
        parent_q = queues[parent]
        siblings = [
            q
            for n, q in queues.items()
            if n != parent and (q.spec.parent or keys.ROOT_QUEUE) == parent and n != keys.ROOT_QUEUE
        ]
        for label, getter in (
            (
                "guarantee",
                lambda q: (q.spec.guarantee.resource if q.spec.guarantee else None) or {},
            ),
            ("deserved", lambda q: q.spec.deserved or {}),
        ):
            limit = getter(parent_q)
            if not limit:
                continue
            total: dict[str, float] = {}
            for sibling in siblings:
                for resource, amount in getter(sibling).items():
                    total[resource] = total.get(resource, 0) + _quantity(amount)
            over = {r: v for r, v in total.items() if r in limit and v > _quantity(limit[r])}
            if over:
                errors.append(
                    FieldError(
                        f"spec.{label}",
                        f"parent queue {parent} validation failed: sum of children's {label} "
                        f"({_fmt(total)}) exceeds parent's {label} limit ({_fmt(limit)})",
                    )
                )
    return errors


def _fmt(resources: Mapping[str, object]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(resources.items()))


def validate_queue_delete(queue: Queue, view: ClusterView | None = None) -> list[FieldError]:
    name = queue.metadata.name or ""
    if name == keys.DEFAULT_QUEUE:
        return [FieldError("metadata.name", "`default` queue can not be deleted")]
    if name == keys.ROOT_QUEUE:
        return [FieldError("metadata.name", "`root` queue can not be deleted")]
    if view is None:
        return []
    children = sorted(n for n, q in (view.queues or {}).items() if q.spec.parent == name)
    if children:
        return [
            FieldError(
                "metadata.name",
                f"queue {name} can not be deleted because it has {len(children)} child queues: "
                f"{', '.join(children)}",
            )
        ]
    return _queue_podgroup_errors(name, view)


def _queue_podgroup_errors(name: str, view: ClusterView) -> list[FieldError]:
    """A queue that still has PodGroups cannot go: its jobs would be left without a queue (the
    scheduler would hold them forever). Not a Volcano rule; Volcano only optionally checks
    allocated pods."""
    groups = sorted((view.podgroups_by_queue or {}).get(name) or ())
    if not groups:
        return []
    noun = "PodGroup" if len(groups) == 1 else "PodGroups"
    return [
        FieldError(
            "metadata.name",
            f"queue {name} can not be deleted because it has {len(groups)} {noun}: "
            f"{', '.join(groups)}",
        )
    ]


# --------------------------------------------------------------------------- JobFlow & co


def validate_jobflow(flow: JobFlow) -> list[FieldError]:
    """Volcano's JobFlow webhook and VAP: every target defined, no cycles (self included)."""
    flows = flow.spec.flows or []
    names = {f.name for f in flows}
    errors: list[FieldError] = []
    graph: dict[str, list[str]] = {}
    for index, item in enumerate(flows):
        targets = (item.depends_on.targets or []) if item.depends_on else []
        for t_index, target in enumerate(targets):
            if target not in names:
                errors.append(
                    FieldError(
                        f"spec.flows[{index}].dependsOn.targets[{t_index}]",
                        f"jobflow Flow is not DAG: vertex is not defined: {target}",
                    )
                )
        graph.setdefault(item.name, []).extend(t for t in targets if t in names)
    cycle = find_cycle(graph)
    if cycle:
        errors.append(
            FieldError("spec.flows", f"jobflow Flow is not DAG (cycle: {' -> '.join(cycle)})")
        )
    return errors


def validate_job_template(template: JobTemplate) -> list[FieldError]:
    """Volcano has no JobTemplate webhook, but a template is a JobSpec that becomes a Job: check it
    as one so a broken template is reported when written, not when its flow step starts."""
    return validate_job_spec(template.spec, template.metadata.name or "")


def validate_command(command: Command) -> list[FieldError]:
    errors = []
    if command.action is None or command.action not in ALL_ACTIONS:
        errors.append(
            FieldError(
                "action",
                f'Unsupported value: "{command.action or ""}": supported values: '
                f"{list(ALL_ACTIONS)}",
            )
        )
    if command.target is None:
        errors.append(FieldError("target", "Required value"))
    return errors


def validate(obj: KubeObject, view: ClusterView | None = None) -> list[FieldError]:
    """CREATE admission for any of the six kinds (the object should already be defaulted)."""
    if isinstance(obj, Job):
        return validate_job(obj, view)
    if isinstance(obj, PodGroup):
        return validate_pod_group(obj, view)
    if isinstance(obj, Queue):
        return validate_queue(obj, view)
    if isinstance(obj, JobFlow):
        return validate_jobflow(obj)
    if isinstance(obj, JobTemplate):
        return validate_job_template(obj)
    if isinstance(obj, Command):
        return validate_command(obj)
    return []
