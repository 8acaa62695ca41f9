"""The lines of an explanation's chain (flow -> job -> PodGroup -> queue -> gang -> nodes):
what each link holds, in one line each. Pure."""

from __future__ import annotations

from typing import Any

from core.resources import ResourceVector, format_quantity
from core.timestamps import epoch_seconds
from explain.focus import flow_job_name, flow_steps, job_phase, key_of, meta
from explain.texts import (
    condition,
    duration,
    origin_reason,
    short,
    unschedulable_message,
)
from explain.world import World, amounts
from plugins.model import gang as gangs
from plugins.model.queue_share import requested_dims, strip_pods

_ZERO = ResourceVector()


def flow_line(flow: dict[str, Any], jobs: list[dict[str, Any]]) -> str:
    phase = ((flow.get("status") or {}).get("state") or {}).get("phase") or "Pending"
    by_name = {meta(j).get("name"): j for j in jobs}
    steps = []
    for step in flow_steps(flow):
        name = str(step.get("name", ""))
        job = by_name.get(flow_job_name(flow, name))
        steps.append(f"{name} {job_phase(job) or 'Pending' if job else 'not created'}")
    return f"{key_of(flow)}: {phase}; steps: " + (", ".join(steps) or "none")


def job_line(job: dict[str, Any], podgroup_key: str | None) -> str:
    status = job.get("status") or {}
    counts = [
        f"{status.get(k, 0)} {k}"
        for k in ("pending", "running", "succeeded", "failed")
        if status.get(k)
    ]
    minimum = status.get("minAvailable", (job.get("spec") or {}).get("minAvailable", 0))
    text = f"{key_of(job)}: {job_phase(job) or 'Pending'}, minAvailable {minimum}"
    text += f", pods: {', '.join(counts)}" if counts else ", no pods yet"
    return text + (f"; PodGroup {podgroup_key}" if podgroup_key else "")


def podgroup_line(raw: dict[str, Any], group_key: str, now: float) -> str:
    spec, status = raw.get("spec") or {}, raw.get("status") or {}
    text = (
        f"{group_key}: {status.get('phase') or 'Pending'}, minMember {spec.get('minMember', 0)}, "
        f"queue {spec.get('queue') or 'default'}"
    )
    message = origin_reason(unschedulable_message(raw))
    # The extender's reasons start with the gang's name, said already.
    for prefix in (f"gang {group_key}: waiting for admission: ", f"gang {group_key}: "):
        message = message.removeprefix(prefix)
    if message:
        # Its age: the condition is rewritten only when the verdict changes.
        since = epoch_seconds((condition(raw, "Unschedulable") or {}).get("lastTransitionTime"))
        age = f" (since {duration(now - since)})" if since else ""
        text += f"; Unschedulable{age}: {short(message, 160)}"
    return text


def queue_line(world: World, queue: str) -> str:
    share = world.model.shares.get(queue)
    source = world.inputs.get(queue)
    if share is None or source is None:
        return f"{queue}: does not exist"
    dims = sorted(
        set(requested_dims(share.request))
        | set(requested_dims(share.allocated))
        | set(requested_dims(share.deserved)),
        key=lambda d: (d not in ("cpu", "memory"), d != "cpu", d),
    )
    capability = strip_pods(share.capability)
    text = (
        f"{queue}: {source.state or 'Open'}, weight {source.weight}; "
        f"deserved {amounts(share.deserved, dims)}; allocated {amounts(share.allocated, dims)}; "
        f"capability {amounts(capability) if not capability.is_zero() else 'unlimited'}"
    )
    borrowing = []
    for name in sorted(world.model.shares):
        other = world.model.shares[name]
        over = other.allocated.saturating_sub(other.deserved)
        if not other.best_effort and requested_dims(over):
            borrowing.append(f"{name} (+{amounts(over)})")
    text += "; borrowing over deserved: " + (", ".join(borrowing) if borrowing else "none")
    return text


def gang_line(view: gangs.GangView, gang: dict[str, Any] | None) -> str:
    text = f"{view.created} of minMember {view.min_member} members created"
    if gang is None:
        bound = sum(1 for pod in view.members if pod.node is not None)
        return text + f"; bound {bound} (held binds, timeout: ask the extender, --extender)"
    counts = gang.get("members") or {}
    timeout = duration(float(gang.get("gangTimeoutSeconds") or 0))
    text += (
        f"; admitted {counts.get('admitted', 0)}, holding binds {counts.get('holdingBinds', 0)}, "
        f"bound {counts.get('bound', 0)}; gang timeout {timeout}"
    )
    hold = gang.get("hold")
    if hold:
        text += f", {duration(float(hold.get('secondsLeft') or 0))} left on the hold"
    left = float(gang.get("backoffSecondsLeft") or 0)
    if left > 0:
        text += f"; backing off {duration(left)}"
    return text


def nodes_line(world: World, request: ResourceVector) -> str:
    schedulable = world.schedulable()
    text = f"{len(schedulable)} of {len(world.snapshot.nodes)} schedulable"
    for dim in requested_dims(request)[:3]:
        total = sum(max(0, world.snapshot.node_free(n).get(dim)) for n in schedulable)
        node, largest = world.largest_free(dim)
        text += (
            f"; {dim}: {format_quantity(dim, total)} free in all, "
            f"at most {format_quantity(dim, largest)} on {node or 'no node'}"
        )
    return text


def largest_request(pods: list[Any]) -> ResourceVector:
    """The per-dimension maximum of the pods' requests (what one node must hold)."""
    result = _ZERO
    for pod in pods:
        result = result.elementwise_max(pod.requests)
    return result
