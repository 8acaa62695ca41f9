"""Gang membership and readiness as Volcano's gang plugin defines them.

A gang is one PodGroup and every pod that names it (`scheduling.k8s.io/group-name`, or the
coscheduling label `scheduling.x-k8s.io/pod-group`). Each member gets Volcano's *task status*
(`task_status`), and every count Volcano's gang plugin reads is derived from those statuses:

    ReadyTaskNum  = |Allocated| + |Binding| + |Bound| + |Running| + |Succeeded|
    ValidTaskNum  = |Allocated, Binding, Bound, Running| + |Succeeded| + |Pipelined| + |Pending|
    JobReady     <=> per-role ready check  and  ReadyTaskNum + pending best-effort >= minMember
    JobValid     <=> per-role valid check  and  ValidTaskNum >= minMember

Volcano's in-session statuses have vulcan counterparts the caller supplies: a member holding a
gang-ledger reservation but not yet a bind is `Allocated`; a member whose bind is being held is
`Binding`. Nothing here produces `Pipelined` (vulcan never places onto capacity that is still
being released), so ReadyTaskNum and Volcano's pipelined counts coincide.

Deleting members are not dropped from the view: Volcano keeps them as `Releasing` tasks, which
count towards neither ReadyTaskNum nor ValidTaskNum, but do count as *scheduled* (for the
PodGroup phase) while they still hold a node.

Membership caveat: pods that carry Kubernetes' native gang fields (`spec.schedulingGroup` /
`workloadRef`, KEP-4671) belong to kube-scheduler's own GangScheduling plugin. `PodRecord` does
not carry those fields, so the caller (webhook / informer decoding) must keep such pods out of
the snapshot's groups; this module trusts `PodRecord.group`. Likewise the scheduler name is not
checked: with the `managedResources` install mode gang pods keep `default-scheduler`.

Pure functions of a snapshot: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from core.durations import parse_duration
from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = [
    "ALLOCATED",
    "ALLOCATED_STATUSES",
    "BINDING",
    "BOUND",
    "COMPLETED_STATUSES",
    "FAILED",
    "OCCUPIED_STATUSES",
    "PENDING",
    "PIPELINED",
    "RELEASING",
    "RUNNING",
    "SCHEDULED_STATUSES",
    "SCHEDULING_GATED",
    "SUCCEEDED",
    "UNKNOWN",
    "VALID_STATUSES",
    "GangView",
    "checks_task_minimums",
    "counts_for_quorum",
    "gang_view",
    "is_best_effort",
    "live_counts",
    "quorum_shortfall",
    "task_status",
    "whole",
]

# Volcano's TaskStatus names (pkg/scheduler/api/types.go String()), used verbatim in messages.
PENDING = "Pending"
ALLOCATED = "Allocated"
PIPELINED = "Pipelined"
BINDING = "Binding"
BOUND = "Bound"
RUNNING = "Running"
RELEASING = "Releasing"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
UNKNOWN = "Unknown"
# A pending pod held back by a scheduling gate of the user's (kube-scheduler's
# SchedulingGated): it cannot be scheduled, so it counts towards neither the gang's quorum
# (valid / ready) nor the room the gang asks of its queue until the gate is removed. vulcan's
# own queue-allocation gate is not one: vulcan lifts it when the gang is admitted.
SCHEDULING_GATED = "SchedulingGated"

ALLOCATED_STATUSES = frozenset({ALLOCATED, BINDING, BOUND, RUNNING})
SCHEDULED_STATUSES = frozenset({RUNNING, BOUND, FAILED, SUCCEEDED})
COMPLETED_STATUSES = frozenset({SUCCEEDED, FAILED})
VALID_STATUSES = ALLOCATED_STATUSES | {SUCCEEDED, PIPELINED, PENDING}
OCCUPIED_STATUSES = ALLOCATED_STATUSES | {SUCCEEDED}

# Dimensions that do not make a pod "non best-effort": Volcano keeps the pod count outside its
# Resource (MaxTaskNum), and our request vectors always carry pods: 1.
_NOT_A_RESOURCE = frozenset({"pods"})

_EMPTY: Mapping[str, int] = MappingProxyType({})


def task_status(
    pod: PodRecord,
    allocated: Collection[str] = (),
    binding: Collection[str] = (),
    pipelined: Collection[str] = (),
) -> str:
    """Volcano's task status of a pod (pkg/scheduler/api/helpers.go getTaskStatus).

    `allocated` / `binding` are pod keys with a gang-ledger reservation / a held bind: the
    extender's equivalents of Volcano's in-session Allocated and Binding. `pipelined` are
    reserved members whose room is still held by terminating victims (Volcano's Pipelined: not
    ready, but valid). They only apply to a pending pod without a node; a pod the API already
    shows bound is Bound whatever the ledger says.
    """
    phase = pod.phase
    # Terminal phases win over a deletionTimestamp, as in Volcano: a finished pod being garbage
    # collected is still Succeeded/Failed, not Releasing.
    if phase == SUCCEEDED:
        return SUCCEEDED
    if phase == FAILED:
        return FAILED
    if phase == RUNNING:
        return RELEASING if pod.deleting else RUNNING
    if phase == PENDING:
        if pod.deleting:
            return RELEASING
        if pod.node is not None:
            return BOUND
        if pod.key in binding:
            return BINDING
        if pod.key in pipelined:
            return PIPELINED
        if pod.key in allocated:
            return ALLOCATED
        if pod.gates and pod.user_gated:
            return SCHEDULING_GATED
        return PENDING
    return UNKNOWN


def is_best_effort(requests: ResourceVector) -> bool:
    """Volcano's BestEffort task: it requests nothing (the pod count does not count)."""
    return all(amount <= 0 for name, amount in requests.items() if name not in _NOT_A_RESOURCE)


@dataclass(frozen=True, slots=True)
class GangView:
    """One PodGroup and its member pods, with Volcano's per-status counts.

    `members` holds every pod of the group (sorted by key), including finished and terminating
    ones: Volcano's JobInfo keeps them as tasks, and messages count them (`3/4 tasks ...`).
    `status[pod_key]` is the member's `task_status`; `counts[status]` and
    `task_counts[task][status]` count them (statuses with no member are absent). The task of a
    member is its `volcano.sh/task-spec`, or "" when it has none.
    """

    group_key: str
    min_member: int
    min_task_member: Mapping[str, int]
    min_resources: ResourceVector | None
    phase: str
    members: tuple[PodRecord, ...]
    status: Mapping[str, str]
    counts: Mapping[str, int]
    task_counts: Mapping[str, Mapping[str, int]]
    pending_best_effort: int
    task_pending_best_effort: Mapping[str, int]
    releasing_on_node: int

    def count(self, *statuses: str) -> int:
        return sum(self.counts.get(s, 0) for s in statuses)

    def task_count(self, task: str, statuses: Collection[str]) -> int:
        per_status = self.task_counts.get(task, _EMPTY)
        return sum(per_status.get(s, 0) for s in statuses)

    @property
    def created(self) -> int:
        """Every member pod that exists, whatever its state."""
        return len(self.members)

    @property
    def pending(self) -> int:
        """Members waiting for a node: no node, not deleting, no reservation or held bind."""
        return self.counts.get(PENDING, 0)

    @property
    def allocated(self) -> int:
        """Volcano's AllocatedStatus: reserved, binding, bound or running (not terminating)."""
        return self.count(*ALLOCATED_STATUSES)

    @property
    def occupying(self) -> int:
        """Members holding a node: bound and not finished, terminating ones included (they keep
        their node's capacity until they are gone, as kube-scheduler counts them)."""
        return sum(1 for pod in self.members if pod.occupies_node)

    @property
    def running(self) -> int:
        return self.counts.get(RUNNING, 0)

    @property
    def succeeded(self) -> int:
        return self.counts.get(SUCCEEDED, 0)

    @property
    def failed(self) -> int:
        return self.counts.get(FAILED, 0)

    @property
    def releasing(self) -> int:
        return self.counts.get(RELEASING, 0)

    @property
    def ready_num(self) -> int:
        """Volcano's ReadyTaskNum."""
        return self.count(*OCCUPIED_STATUSES)

    @property
    def valid_num(self) -> int:
        """Volcano's ValidTaskNum."""
        return self.count(*VALID_STATUSES)

    @property
    def scheduled(self) -> int:
        """Scheduled for the PodGroup phase: ScheduledStatus plus Releasing members with a node."""
        return self.count(*SCHEDULED_STATUSES) + self.releasing_on_node

    @property
    def completed(self) -> int:
        return self.count(*COMPLETED_STATUSES)

    @property
    def checks_tasks(self) -> bool:
        """Whether the per-role checks apply (`checks_task_minimums`)."""
        return checks_task_minimums(self.min_member, self.min_task_member)


# ------------------------------------------------------------------------------- quorum


def checks_task_minimums(min_member: int, min_task_member: Mapping[str, int]) -> bool:
    """Volcano skips every per-role check when minMember < Σ minTaskMember (job_info.go:
    CheckTaskValid, CheckTaskReady, CheckTaskPipelined and CheckTaskStarving all return at once
    when `MinAvailable < TaskMinAvailableTotal`): a job whose task minimums add up to more than
    its own minimum is judged on minMember alone. The one rule for admission (`GangView`) and
    the bind barrier's quorum (`quorum_shortfall`): a job whose tasks start one after another
    (`dependsOn`) has such a minimum, and its later tasks' pods only exist once the earlier
    ones run."""
    return min_member >= sum(min_task_member.values())


def quorum_shortfall(
    min_member: int,
    min_task_member: Mapping[str, int],
    have: int,
    have_per_task: Mapping[str, int],
) -> tuple[int, dict[str, tuple[int, int]]]:
    """What a gang with `have` members placed (`have_per_task` of each role) still lacks: the
    members short of minMember, and task -> (have, minimum) for every role short of its
    minTaskMember (none when the per-role checks do not apply). (0, {}) is a quorum."""
    short = max(0, min_member - have)
    tasks: dict[str, tuple[int, int]] = {}
    if checks_task_minimums(min_member, min_task_member):
        for task, minimum in sorted(min_task_member.items()):
            got = have_per_task.get(task, 0)
            if got < minimum:
                tasks[task] = (got, minimum)
    return short, tasks


def counts_for_quorum(pod: PodRecord) -> bool:
    """A member that keeps its gang whole: bound, not being deleted and not Failed (a
    Succeeded member did its part, as in Volcano's ReadyTaskNum)."""
    return pod.node is not None and not pod.deleting and pod.phase != FAILED


def partly_placed(view: GangView) -> bool:
    """Some members run, too few to make its quorum: a gang that lost members (a node failed, a
    member was deleted, a task restarted) and waits for their replacements."""
    live = any(p.node is not None and not p.deleting and not p.terminal for p in view.members)
    return live and not whole(view)


def finished(view: GangView) -> bool:
    """Every member of the gang ran to its end (Succeeded or Failed): nothing left to place.
    A gang with some members finished and others waiting (a job's first task done, its next
    one pending; a job restarted keeping its finished pods) is not."""
    return view.completed > 0 and view.completed >= view.created


def whole(view: GangView) -> bool:
    """Whether the gang's live bound members (`counts_for_quorum`) make its quorum: placed
    whole, not merely scheduled (members being deleted count as scheduled, not here)."""
    have, per_task = live_counts(view.members)
    short, tasks = quorum_shortfall(view.min_member, view.min_task_member, have, per_task)
    return short == 0 and not tasks


def live_counts(members: Iterable[PodRecord]) -> tuple[int, dict[str, int]]:
    """The members that keep the gang whole (`counts_for_quorum`), in all and per task."""
    have = 0
    per_task: dict[str, int] = {}
    for pod in members:
        if counts_for_quorum(pod):
            have += 1
            task = pod.task or ""
            per_task[task] = per_task.get(task, 0) + 1
    return have, per_task


def gang_view(
    snapshot: Snapshot,
    group_key: str,
    *,
    allocated: Collection[str] = (),
    binding: Collection[str] = (),
    pipelined: Collection[str] = (),
) -> GangView | None:
    """The gang of PodGroup `group_key` ("ns/name"), or None when the PodGroup does not exist
    (Volcano ignores pods whose group has no PodGroup). See `task_status` for `allocated`,
    `binding` and `pipelined`."""
    group = snapshot.podgroups.get(group_key)
    if group is None:
        return None
    members = tuple(sorted(snapshot.group_pods(group_key), key=lambda pod: pod.key))
    status: dict[str, str] = {}
    counts: dict[str, int] = {}
    task_counts: dict[str, dict[str, int]] = {}
    best_effort = 0
    task_best_effort: dict[str, int] = {}
    releasing_on_node = 0
    for pod in members:
        state = task_status(pod, allocated, binding, pipelined)
        status[pod.key] = state
        counts[state] = counts.get(state, 0) + 1
        task = pod.task or ""
        per_task = task_counts.setdefault(task, {})
        per_task[state] = per_task.get(state, 0) + 1
        if state == PENDING and is_best_effort(pod.requests):
            best_effort += 1
            task_best_effort[task] = task_best_effort.get(task, 0) + 1
        elif state == RELEASING and pod.node is not None:
            releasing_on_node += 1
    return GangView(
        group_key=group_key,
        min_member=group.min_member,
        min_task_member=MappingProxyType(dict(group.min_task_member)),
        min_resources=group.min_resources,
        phase=group.phase,
        members=members,
        status=MappingProxyType(status),
        counts=MappingProxyType(counts),
        task_counts=MappingProxyType(
            {task: MappingProxyType(c) for task, c in task_counts.items()}
        ),
        pending_best_effort=best_effort,
        task_pending_best_effort=MappingProxyType(task_best_effort),
        releasing_on_node=releasing_on_node,
    )


def annotation_duration(group: PodGroupRecord, *names: str) -> float | None:
    """The first of the group's annotations `names` that is set, as seconds (a Go duration);
    None when none is set or the value is not a duration."""
    for name in names:
        text = group.annotations.get(name)
        if text:
            try:
                return parse_duration(text)
            except Exception:
                return None
    return None
