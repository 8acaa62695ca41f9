"""Volcano's admission rules: the union of its webhooks and its
ValidatingAdmissionPolicies, for Job, PodGroup, Queue, JobFlow, JobTemplate and Command.

Every function returns a list of `FieldError` (field path + reason, reason text as Volcano words
it); an empty list means valid. Checks that need the cluster (does the queue exist? is it Open?)
run only when a `ClusterView` is given, so the same code serves offline `vulcan validate` and the
API-server side admission.

The rules of the larger kinds live in modules of their own, re-exported here so that this module
stays the one place to import them from: `validation_common` (`ClusterView` and the checks every
kind shares), `validation_pod` (pod templates), `validation_job` (Job and JobSpec),
`validation_queue` (Queue) and `validation_hypernode` (HyperNode). PodGroup, JobFlow,
JobTemplate and Command, small, stay here with `validate`, which dispatches on the kind.
"""

from __future__ import annotations

from core.api.base import KubeObject
from core.api.batch import ALL_ACTIONS, Command, Job
from core.api.cronjob import CronJob
from core.api.errors import FieldError
from core.api.flow import Flow, JobFlow, JobTemplate
from core.api.scheduling import PodGroup, Queue
from core.api.topology import HyperNode
from core.api.validation_common import (
    ClusterView,
    _network_topology_errors,
    _resource_list_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    find_cycle,
    is_go_duration,
    qualified_name_errors,
)
from core.api.validation_cronjob import validate_cronjob
from core.api.validation_hypernode import validate_hypernode
from core.api.validation_job import (
    validate_job,
    validate_job_spec,
    validate_job_update,
    validate_policies,
)
from core.api.validation_pod import validate_pod_template
from core.api.validation_queue import validate_queue, validate_queue_delete

__all__ = [
    "ClusterView",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "find_cycle",
    "is_go_duration",
    "qualified_name_errors",
    "validate",
    "validate_command",
    "validate_cronjob",
    "validate_hypernode",
    "validate_job",
    "validate_job_spec",
    "validate_job_template",
    "validate_job_update",
    "validate_jobflow",
    "validate_pod_group",
    "validate_pod_template",
    "validate_policies",
    "validate_queue",
    "validate_queue_delete",
]


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
        errors += _patch_task_name_errors(item, index)
    cycle = find_cycle(graph)
    if cycle:
        errors.append(
            FieldError("spec.flows", f"jobflow Flow is not DAG (cycle: {' -> '.join(cycle)})")
        )
    return errors


def _patch_task_name_errors(item: Flow, index: int) -> list[FieldError]:
    """Task names of a flow's `patch.jobSpec` are unique, as in any JobSpec. Checked here rather
    than by CEL in the CRD: the pairwise check under every flow is over kube-apiserver's budget."""
    spec = item.patch.job_spec if item.patch else None
    seen: set[str] = set()
    errors: list[FieldError] = []
    for t_index, task in enumerate((spec.tasks or []) if spec else []):
        if task.name and task.name in seen:
            errors.append(
                FieldError(
                    f"spec.flows[{index}].patch.jobSpec.tasks[{t_index}].name",
                    f"duplicated task name {task.name}",
                )
            )
        if task.name:
            seen.add(task.name)
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
                + ", ".join(f'"{action}"' for action in ALL_ACTIONS),
            )
        )
    if command.target is None:
        errors.append(FieldError("target", "Required value"))
    return errors


def validate(obj: KubeObject, view: ClusterView | None = None) -> list[FieldError]:
    """CREATE admission for any of vulcan's kinds (the object should already be defaulted)."""
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
    if isinstance(obj, CronJob):
        return validate_cronjob(obj, view)
    if isinstance(obj, HyperNode):
        return validate_hypernode(obj, view)
    return []
