"""`diagnose(collected) -> Explanation`: why the object asked about is where it is, as a chain
flow -> job -> PodGroup -> queue -> gang -> nodes, with the true cause first. Pure: a function
of what `explain.collect` read, so every cause can be tested on hand-made objects.

The object's own state comes first (a flow waiting on a step, a job that is not pending, a pod
already bound, a PodGroup not made yet); a waiting gang is then judged by
`explain.gang_causes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.api import keys
from core.records import PodGroupRecord, PodRecord
from explain.chain import (
    flow_line,
    gang_line,
    job_line,
    largest_request,
    nodes_line,
    podgroup_line,
    queue_line,
)
from explain.focus import (
    WAITING_JOB_PHASES,
    flow_job_name,
    flow_steps,
    job_phase,
    key_of,
    meta,
)
from explain.gang_causes import GangCase, explain_gang, is_partial
from explain.placement_causes import member_room
from explain.queue_causes import allocate_refused
from explain.texts import Finding, scheduling_message, short
from explain.world import World, build_world
from plugins.framework.policy import Policy
from plugins.model import gang_ready

if TYPE_CHECKING:
    from explain.collect import Collected

_KIND_WORDS = {"pod": "pod", "podgroup": "podgroup", "job": "vcjob", "jobflow": "jobflow"}
_FAILED_JOB = ("Failed", "Aborted", "Terminated")


@dataclass(slots=True)
class Explanation:
    subject: str  # "vcjob default/tf-b"
    state: str  # the object's phase
    finding: Finding
    chain: list[tuple[str, str]] = field(default_factory=list)
    source: str = ""

    @property
    def cause(self) -> str:
        return self.finding.cause


def diagnose(found: Collected, session: Policy | None = None) -> Explanation:
    """`session`: the scheduler conf's (Volcano's default when None), for the queue shares
    when the extender's last pass is not at hand."""
    focus = found.focus
    world = build_world(found, session)
    chain: list[tuple[str, str]] = []
    finding: Finding | None = None
    if focus.flow is not None:
        chain.append(("flow", flow_line(focus.flow, found.jobs)))
        if focus.job is None:
            finding = flow_finding(found, focus.flow)
    if focus.job is not None:
        chain.append(("job", job_line(focus.job, focus.podgroup_key)))
        if (
            found.kind == "job"
            and job_phase(focus.job) not in WAITING_JOB_PHASES
            and not _partial(world, focus.podgroup)
        ):
            finding = Finding(
                "not-pending", f"not waiting for the scheduler: the job is {job_phase(focus.job)}"
            )
    if focus.pod is not None and finding is None:
        finding = pod_finding(found, world, focus.pod, chain)
    if finding is None and focus.podgroup is None and focus.podgroup_key is not None:
        finding = Finding(
            "podgroup-missing",
            f"its PodGroup {focus.podgroup_key} does not exist",
            [
                "a Volcano Job's PodGroup is made by its job controller: is `vulcan controllers` "
                "running? (see the Job's events)"
            ]
            if focus.job is not None
            else [f"create PodGroup {focus.podgroup_key}, or remove the pod's group annotation"],
        )
    if finding is None and focus.podgroup is not None:
        finding = gang_finding(found, world, focus.podgroup, chain)
        if found.kind == "pod" and finding.cause in ("scheduled", "finished"):
            finding = _pod_beyond_gang(found, focus.pod or {}, finding)
    if finding is None:
        finding = Finding("unknown", "nothing found that holds it back")
    if found.kind == "jobflow" and focus.job is not None and focus.flow is not None:
        step = meta(focus.job).get("name", "").removeprefix(meta(focus.flow).get("name", "") + "-")
        finding.headline = (
            f"step {step} (vcjob {key_of(focus.job)}) is {job_phase(focus.job) or 'Pending'}: "
            + finding.headline
        )
    subject = f"{_KIND_WORDS[found.kind]} {found.namespace}/{found.name}"
    return Explanation(subject, _state(found), finding, chain, _source(found, world))


def _partial(world: World, podgroup: dict[str, Any] | None) -> bool:
    """A Running job may still be partly placed (its gang short of its minimum)."""
    if podgroup is None:
        return False
    view = world.view(PodGroupRecord(podgroup).key)
    return view is not None and is_partial(view)


def gang_finding(
    found: Collected, world: World, raw: dict[str, Any], chain: list[tuple[str, str]]
) -> Finding:
    group = PodGroupRecord(raw)
    view = world.view(group.key)
    if view is None:  # not in the snapshot: cannot happen for a collected PodGroup
        return Finding("unknown", f"PodGroup {group.key} not found")
    case = GangCase(found, world, raw, group, view, found.extender_gang)
    chain.append(("podgroup", podgroup_line(raw, group.key, found.now)))
    chain.append(("queue", queue_line(world, group.queue)))
    chain.append(("gang", gang_line(view, found.extender_gang)))
    pending = gang_ready.pending_members(view) or list(view.members)
    chain.append(("nodes", nodes_line(world, largest_request(pending))))
    return explain_gang(case)


def pod_finding(
    found: Collected, world: World, raw: dict[str, Any], chain: list[tuple[str, str]]
) -> Finding | None:
    """A pod's own state; None when its gang explains it."""
    pod = PodRecord(raw)
    if pod.node is not None:
        return Finding("not-pending", f"bound to node {pod.node} ({pod.phase})")
    if pod.terminal:
        return Finding("finished", f"finished ({pod.phase})")
    if pod.group is not None:
        return None
    # A pod outside any gang: its queue's gate and a node with room (extender's queue_gate).
    queue = pod.queue_annotation or world.snapshot.namespace_queues.get(pod.namespace) or "default"
    chain.append(("queue", queue_line(world, queue)))
    chain.append(("nodes", nodes_line(world, pod.requests)))
    source = world.inputs.get(queue)
    if source is not None and not source.open:
        return Finding("queue-closed", f"queue {queue} is {source.state}: it admits no new work")
    refused = allocate_refused(world, queue, pod.requests)
    if refused is not None:
        return refused
    room = member_room(world, pod)
    if room is not None:
        return room
    message = scheduling_message(raw)
    if message:
        return Finding("scheduler", f"kube-scheduler cannot place it: {short(message)}")
    return Finding("binding", "waiting for kube-scheduler to place it")


def _pod_beyond_gang(found: Collected, raw: dict[str, Any], gang: Finding) -> Finding:
    gates = [str(g.get("name", "")) for g in (raw.get("spec") or {}).get("schedulingGates") or ()]
    if keys.QUEUE_ALLOCATION_GATE in gates:
        return Finding(
            "gated",
            f"its gang is placed ({gang.headline}); this member beyond the gang's minimum waits "
            f"behind {keys.QUEUE_ALLOCATION_GATE}, which vulcan lifts when its queue has room "
            "for it",
        )
    message = scheduling_message(raw)
    if message:
        return Finding("scheduler", f"kube-scheduler cannot place it: {short(message)}")
    return Finding("binding", f"its gang is placed ({gang.headline}); it is placed next")


def flow_finding(found: Collected, flow: dict[str, Any]) -> Finding:
    """A JobFlow none of whose jobs waits for the scheduler: which step it waits on."""
    namespace = meta(flow).get("namespace", "")
    jobs = {meta(j).get("name"): j for j in found.jobs}
    steps = flow_steps(flow)
    phases = {
        str(s.get("name")): job_phase(jobs.get(flow_job_name(flow, str(s.get("name")))))
        if flow_job_name(flow, str(s.get("name"))) in jobs
        else None
        for s in steps
    }
    for step, phase in phases.items():
        if phase in _FAILED_JOB:
            return Finding(
                "flow-failed",
                f"step {step} (vcjob {namespace}/{flow_job_name(flow, step)}) is {phase}: the "
                "steps that depend on it never start",
                ["fix the failed job's cause and create the JobFlow again"],
            )
    if steps and all(p == "Completed" for p in phases.values()):
        return Finding("finished", f"all {len(steps)} steps completed")
    templates = {meta(t).get("name") for t in found.templates}
    for step in steps:
        name = str(step.get("name"))
        if phases[name] is not None:
            continue
        targets = [str(t) for t in ((step.get("dependsOn") or {}).get("targets") or [])]
        unmet = [t for t in targets if phases.get(t) != "Completed"]
        if unmet:
            t = unmet[0]
            now = phases.get(t)
            return Finding(
                "flow-dependencies",
                f"step {name} waits for step {t} to complete (vcjob "
                f"{namespace}/{flow_job_name(flow, t)} is {now or 'not created yet'})",
                [f"step {name} starts when its dependencies complete: {', '.join(targets)}"],
            )
        if name not in templates:
            return Finding(
                "flow-template",
                f"step {name} cannot start: JobTemplate {namespace}/{name} not found",
                [f"create JobTemplate {name} in namespace {namespace}"],
            )
        return Finding(
            "flow-controller",
            f"step {name} may start but has no job yet: the JobFlow controller creates it",
            ["is `vulcan controllers` running? (see the JobFlow's events)"],
        )
    running = [s for s, p in phases.items() if p not in (None, "Completed")]
    if running:
        return Finding("not-pending", f"running: step {running[0]} is {phases[running[0]]}")
    return Finding("unknown", "no step to wait for")


def _state(found: Collected) -> str:
    status = found.target.get("status") or {}
    if found.kind in ("job", "jobflow"):
        return (status.get("state") or {}).get("phase") or "Pending"
    return status.get("phase") or "Pending"


def _source(found: Collected, world: World) -> str:
    text = "the API server"
    if found.extender_queues is not None or found.extender_gang is not None:
        text += f" and the extender at {found.extender_url}"
    elif found.extender_error:
        text += f" (extender at {found.extender_url} not reached: {found.extender_error})"
    else:
        text += " only (give --extender URL for held binds, reservations and timeouts)"
    return text + f"; queue shares {world.shares_from}"


def render(explanation: Explanation) -> str:
    """One screen: the cause on the first line, then the chain, what would unblock it and
    where this was read."""
    lines = [f"{explanation.subject} is {explanation.state}: {explanation.finding.headline}"]
    rows = list(explanation.chain)
    for number, step in enumerate(explanation.finding.unblock):
        rows.append(("unblock" if number == 0 else "", step))
    rows.append(("source", explanation.source))
    for label, text in rows:
        lines.append(f"  {label:<9} {text}")
    return "\n".join(lines) + "\n"


__all__ = ["Explanation", "diagnose", "key_of", "render"]
