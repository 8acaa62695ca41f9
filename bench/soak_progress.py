"""The soak's progress invariants, evaluated on the checker's records at each tick:

- stall: a gang with no member bound whose minMember waiting pods fit the free room of the
  schedulable nodes, in a queue with room under its capability and its deserved share, for
  longer than `Limits.stall_after`;
- job not final: a Volcano Job whose pods have all finished, or that stays in a passing phase
  (Restarting, Aborting, Terminating, Completing), for longer than `Limits.job_final_after` —
  unless it waits for pods held terminating by a node that is down.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from bench.soak_fit import SHARE_DIMENSIONS, deserved, pack
from bench.soak_model import JOB_FINAL, TERMINAL, Pod, Resources, add, over, show, sub

if TYPE_CHECKING:
    from bench.soak_checker import Checker

PASSING_PHASES = ("Restarting", "Aborting", "Terminating", "Completing")


def check_stalls(checker: Checker, now: float) -> None:
    free = {
        key: sub(node.allocatable, checker.used_on(key))
        for key, node in checker.nodes.items()
        if node.schedulable
    }
    total: Resources = {}
    for node in checker.nodes.values():
        if node.schedulable:
            total = add(total, node.allocatable)
    used = checker.queue_used()
    waiting: dict[str, list[Resources]] = {}
    for key, group in checker.groups.items():
        members = checker.members(key)
        if any(p.live_bound for p in members):
            continue
        job = checker.jobs.get(group.job) if group.job else None
        if job is not None and job.phase not in ("", "Pending", "Running"):
            continue
        pending = sorted(
            (p.requests for p in members if p.waiting),
            key=lambda r: (r.get("cpu", 0), r.get("memory", 0)),
            reverse=True,
        )
        if len(pending) >= group.min_member:
            waiting[key] = pending[: group.min_member]
    requests: dict[str, Resources] = {q: dict(used.get(q, {})) for q in checker.queues}
    for key, need in waiting.items():
        queue = checker.groups[key].queue
        for res in need:
            requests[queue] = add(requests.get(queue, {}), res)
    shares = deserved(
        total,
        {q: checker.queues[q].weight for q in checker.queues if checker.queues[q].state == "Open"},
        requests,
        {q: queue.capability for q, queue in checker.queues.items()},
    )
    for key in list(checker.groups):
        need = waiting.get(key)
        on, why = False, ""
        if need is not None:
            group = checker.groups[key]
            queue = checker.queues.get(group.queue)
            sum_need: Resources = {}
            for res in need:
                sum_need = add(sum_need, res)
            after = add(used.get(group.queue, {}), sum_need)
            share = shares.get(group.queue, {})
            on = (
                queue is not None
                and queue.state == "Open"
                and not over(after, queue.capability)
                and all(after.get(d, 0) <= share.get(d, 0) for d in SHARE_DIMENSIONS)
                and pack(need, free) is not None
            )
            why = (
                f"{group.min_member} member(s) needing {show(sum_need)} fit the free room "
                f"(queue {group.queue}: would hold {show(after)}, deserved {show(share)}, "
                f"status.allocated {show(queue.allocated) if queue else '-'}); "
                f"PodGroup phase={group.phase or '-'}: {group.message or 'no condition'}"
            )
        checker.hold("stall", key, on, now, checker.limits.stall_after, why)


def check_jobs(checker: Checker, now: float) -> None:
    pods_of: dict[str, list[Pod]] = defaultdict(list)
    for pod in checker.pods.values():
        if pod.job:
            pods_of[pod.job].append(pod)
    for key, job in checker.jobs.items():
        pods = pods_of.get(key, [])
        # Pods on a node that is down stay terminating until its kubelet comes back (as on
        # a real cluster); a controller that waits for them to go is neither late nor stuck.
        held = [p for p in pods if p.deleting and not checker.node_up(p.node)]
        finished = (
            job.phase not in JOB_FINAL
            and job.phase not in PASSING_PHASES
            and len(pods) >= max(job.replicas, 1)
            and all(p.phase in TERMINAL for p in pods)
            and not held
        )
        phases = ", ".join(sorted({p.phase for p in pods}))
        why = f"all {len(pods)} pods finished ({phases}) but phase {job.phase or '-'}"
        why += f"; history: {checker.story(key)}"
        checker.hold("job-not-final", key, finished, now, checker.limits.job_final_after, why)
        stuck = job.phase in PASSING_PHASES and not held
        why = (
            f"phase {job.phase} with {len(pods)} pod(s): "
            + ", ".join(
                f"{p.key} {p.phase}{' terminating' if p.deleting else ''}" for p in pods[:8]
            )
            + f"; history: {checker.story(key)}"
        )
        checker.hold("job-stuck", key, stuck, now, checker.limits.job_final_after, why)
