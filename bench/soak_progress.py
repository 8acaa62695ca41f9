"""The soak's progress invariants, evaluated on the checker's records at each tick:

- stall: a gang with no member bound whose minMember waiting pods fit the free room of the
  schedulable nodes, in a queue with room under its capability and its deserved share, for
  longer than `Limits.stall_after` — room and share left after the waiting gangs ahead of it
  in line (as Volcano's allocate orders jobs: a gang whose minimum is not met yet before one
  whose finished members met it, then priority, then age) that fit took theirs: a gang
  behind older work that takes the room it would need waits its turn and is no stall (the
  first of a line that does not move still is one); so the room vulcan reserved for an
  admitted gang not yet bound (which the API server does not show) counts as taken for the
  gangs behind it;
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
    fitting: dict[str, bool] = {}
    why: dict[str, str] = {}
    shares = deserved(
        total,
        {q: checker.queues[q].weight for q in checker.queues if checker.queues[q].state == "Open"},
        requests,
        {q: queue.capability for q, queue in checker.queues.items()},
    )
    room = {node: dict(res) for node, res in free.items()}
    taken: dict[str, Resources] = {q: dict(res) for q, res in used.items()}
    for key in sorted(waiting, key=lambda k: _line_order(checker, k)):
        need = waiting[key]
        group = checker.groups[key]
        queue = checker.queues.get(group.queue)
        sum_need: Resources = {}
        for res in need:
            sum_need = add(sum_need, res)
        after = add(taken.get(group.queue, {}), sum_need)
        share = shares.get(group.queue, {})
        placed = (
            pack(need, room)
            if queue is not None
            and queue.state == "Open"
            and not over(after, queue.capability)
            and all(after.get(d, 0) <= share.get(d, 0) for d in SHARE_DIMENSIONS)
            else None
        )
        if placed is not None:  # it would run now: what it takes is gone for those behind it
            for index, node in placed.items():
                room[node] = sub(room[node], need[index])
            taken[group.queue] = after
        fitting[key] = placed is not None
        why[key] = (
            f"{group.min_member} member(s) needing {show(sum_need)} fit the free room after "
            f"the gangs ahead of it (queue {group.queue}: would hold {show(after)}, deserved "
            f"{show(share)}, status.allocated {show(queue.allocated) if queue else '-'}); "
            f"PodGroup phase={group.phase or '-'}: {group.message or 'no condition'}"
        )
    for key in list(checker.groups):
        checker.hold(
            "stall", key, fitting.get(key, False), now, checker.limits.stall_after, why.get(key, "")
        )


def _line_order(checker: Checker, key: str) -> tuple[bool, int, str, str]:
    """A waiting gang's place in line, as Volcano orders jobs: a gang whose minimum is already
    met (by members that finished: what waits is its elastic part) after those that are not
    (the gang plugin's job order), then its highest member priority first, then the oldest."""
    members = checker.members(key)
    ready = sum(p.phase == "Succeeded" for p in members) >= checker.groups[key].min_member
    priority = max((p.priority for p in members), default=0)
    return (ready, -priority, checker.groups[key].created, key)


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
