"""The soak's progress invariants, evaluated on the checker's records at each tick:

- stall: a gang with no member bound whose minMember waiting pods fit the free room of the
  schedulable nodes (within one HyperNode its networkTopology allows, each subgroup within one
  of its own: `bench.soak_domains.place`), in a queue with room under its capability and its
  deserved share, for longer than `Limits.stall_after` — room and share left after the waiting
  gangs ahead of it in line (as Volcano's allocate orders jobs: a gang whose minimum is not met
  yet before one whose finished members met it, then priority, then age) that fit took theirs:
  a gang
  behind older work that takes the room it would need waits its turn and is no stall (the
  first of a line that does not move still is one); so the room vulcan reserved for an
  admitted gang not yet bound (which the API server does not show) counts as taken for the
  gangs behind it; and a gang not enqueued yet waits, as Volcano's enqueue makes it, while its
  queue's allocated + the minResources of its enqueued gangs that do not fit now - its elastic
  part + its own minResources exceed the queue's realCapability (`_enqueue_room`): what enqueued
  gangs hold is theirs until they run;
- job not final: a Volcano Job whose pods have all finished, or that stays in a passing phase
  (Restarting, Aborting, Terminating, Completing), for longer than `Limits.job_final_after` —
  unless it waits for pods held terminating by a node that is down.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from bench.soak_domains import place
from bench.soak_fit import SHARE_DIMENSIONS, deserved, pack
from bench.soak_model import JOB_FINAL, TERMINAL, Group, Pod, Resources, add, over, show, sub
from bench.soak_room import queue_used, used_on

if TYPE_CHECKING:
    from bench.soak_checker import Checker

PASSING_PHASES = ("Restarting", "Aborting", "Terminating", "Completing")


def check_stalls(checker: Checker, now: float) -> None:
    free = {
        key: sub(node.allocatable, used_on(checker, key))
        for key, node in checker.nodes.items()
        if node.schedulable
    }
    total: Resources = {}
    for node in checker.nodes.values():
        if node.schedulable:
            total = add(total, node.allocatable)
    used = queue_used(checker)
    waiting: dict[str, list[Resources]] = {}
    needed: dict[str, list[Pod]] = {}  # the members `waiting` holds the requests of
    for key, group in checker.groups.items():
        members = checker.members(key)
        if any(p.live_bound for p in members):
            continue
        job = checker.jobs.get(group.job) if group.job else None
        if job is not None and job.phase not in ("", "Pending", "Running"):
            continue
        pending = sorted(
            (p for p in members if p.waiting),
            key=lambda p: (p.requests.get("cpu", 0), p.requests.get("memory", 0)),
            reverse=True,
        )
        if len(pending) >= group.min_member:
            needed[key] = pending[: group.min_member]
            waiting[key] = [p.requests for p in needed[key]]
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
    enqueue = _EnqueueRoom(checker, waiting, total)
    for key in sorted(waiting, key=lambda k: _line_order(checker, k)):
        need = waiting[key]
        group = checker.groups[key]
        queue = checker.queues.get(group.queue)
        sum_need: Resources = {}
        for res in need:
            sum_need = add(sum_need, res)
        after = add(taken.get(group.queue, {}), sum_need)
        share = shares.get(group.queue, {})
        held_back = enqueue.refusal(key, taken.get(group.queue, {}))
        placed = (
            _pack(checker, group, needed[key], room)
            if queue is not None
            and queue.state == "Open"
            and not held_back
            and not over(after, queue.capability)
            and all(after.get(d, 0) <= share.get(d, 0) for d in SHARE_DIMENSIONS)
            else None
        )
        if placed is not None:  # it would run now: what it takes is gone for those behind it
            for index, node in placed.items():
                room[node] = sub(room[node], need[index])
            taken[group.queue] = after
            enqueue.placed(key)
        fitting[key] = placed is not None
        why[key] = held_back or (
            f"{group.min_member} member(s) needing {show(sum_need)} fit the free room after "
            f"the gangs ahead of it (queue {group.queue}: would hold {show(after)}, deserved "
            f"{show(share)}, status.allocated {show(queue.allocated) if queue else '-'}); "
            f"PodGroup phase={group.phase or '-'}: {group.message or 'no condition'}"
        )
    for key in list(checker.groups):
        checker.hold(
            "stall", key, fitting.get(key, False), now, checker.limits.stall_after, why.get(key, "")
        )


def _pack(
    checker: Checker, group: Group, pods: list[Pod], room: dict[str, Resources]
) -> dict[int, str] | None:
    """Where the members would go: within a HyperNode (each subgroup within one of its own)
    when the gang has a networkTopology or subgroups, else anywhere."""
    if group.topology or group.subgroups:
        return place(checker.tree, group, pods, room)
    return pack([p.requests for p in pods], room)


class _EnqueueRoom:
    """Volcano's enqueue rule as the stall check applies it: a gang not enqueued yet is refused
    while allocated + inqueue - elastic + its minResources exceed its queue's realCapability
    (capability, else the cluster's total: the soak's queues have no guarantee), on the
    dimensions it asks for. `inqueue`: what vulcan's books count for the queue's enqueued gangs
    waiting with no member bound (`_hold`), less those the walk placed."""

    def __init__(self, checker: Checker, waiting: dict[str, list[Resources]], total: Resources):
        self._checker = checker
        self._total = total
        self._inqueue: dict[str, Resources] = defaultdict(dict)
        self._enqueued: set[str] = set()
        for key in waiting:
            group = checker.groups[key]
            if group.phase not in ("", "Pending"):
                self._enqueued.add(key)
                self._inqueue[group.queue] = add(self._inqueue[group.queue], self._hold(group))
        self._elastic: dict[str, Resources] = defaultdict(dict)
        bound: dict[str, Resources] = defaultdict(dict)
        for pod in checker.pods.values():
            if pod.live_bound and pod.group in checker.groups:
                bound[pod.group] = add(bound[pod.group], pod.requests)
        for key, held in bound.items():
            group = checker.groups[key]
            beyond = {n: v for n, v in sub(held, _minimum(group)).items() if v > 0}
            self._elastic[group.queue] = add(self._elastic[group.queue], beyond)

    def _hold(self, group: Group) -> Resources:
        """What vulcan's books count for an enqueued gang with no member bound: its
        minResources, or what its largest members ask where that is more (its placement takes
        the largest first: `plugins.model.group_contribution`)."""
        minimum = _minimum(group)
        pending = sorted(
            (p for p in self._checker.members(group.key) if not p.node and not p.deleting),
            key=lambda p: (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.key),
        )
        asked: Resources = {}
        for pod in pending[: group.min_member]:
            asked = add(asked, pod.requests)
        return {n: max(v, asked.get(n, 0)) for n, v in minimum.items()}

    def placed(self, key: str) -> None:
        if key in self._enqueued:
            group = self._checker.groups[key]
            self._inqueue[group.queue] = sub(self._inqueue[group.queue], self._hold(group))

    def refusal(self, key: str, allocated: Resources) -> str:
        """Why enqueue refuses gang `key` now ("" when it may be enqueued, or already is)."""
        if key in self._enqueued:
            return ""
        group = self._checker.groups[key]
        queue = self._checker.queues.get(group.queue)
        minimum = _minimum(group)
        inqueue, elastic = self._inqueue[group.queue], self._elastic[group.queue]
        held = sub(add(add(allocated, inqueue), minimum), elastic)
        limit = dict(self._total)
        for name, cap in (queue.capability if queue is not None else {}).items():
            limit[name] = min(cap, limit.get(name, cap))
        excess = {n: v for n, v in over(held, limit).items() if minimum.get(n, 0) > 0}
        if not excess:
            return ""
        return (
            f"waits for its queue's enqueued gangs (Volcano's enqueue rule): queue "
            f"{group.queue} allocated {show(allocated)} + inqueue {show(inqueue)} - elastic "
            f"{show(elastic)} + minResources {show(minimum)} > realCapability {show(limit)}"
        )


def _minimum(group: Group) -> Resources:
    return {n: v for n, v in group.min_resources.items() if n != "pods"}


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
