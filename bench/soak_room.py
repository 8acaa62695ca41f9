"""The soak's room invariants, on the checker's records:

- node overcommitted: pods holding room on a node (bound, not finished) request more than its
  allocatable — at once;
- queue over capability: the live bound pods of a queue's gangs request more than its
  capability for longer than `Limits.capacity_grace` (watch streams of different kinds may be
  seen slightly out of order).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from bench.soak_model import Resources, add, over, show

if TYPE_CHECKING:
    from bench.soak_checker import Checker


def used_on(checker: Checker, node: str) -> Resources:
    used: Resources = {}
    for key in checker.on_node(node):
        pod = checker.pods.get(key)
        if pod is not None and pod.occupies:
            used = add(used, pod.requests)
    return used


def check_node(checker: Checker, key: str, now: float) -> None:
    node = checker.nodes.get(key)
    if node is None:
        return
    excess = over(used_on(checker, key), node.allocatable)
    why = ""
    if excess:
        pods = [
            f"{p.key} {show(p.requests)}"
            for k in sorted(checker.on_node(key))
            if (p := checker.pods.get(k)) is not None and p.occupies
        ]
        dims = ", ".join(f"{n} {u} > {c}" for n, (u, c) in excess.items())
        why = f"requests exceed allocatable ({dims}); pods: {'; '.join(pods)}"
    checker.hold("node-overcommitted", key, bool(excess), now, 0.0, why)


def queue_used(checker: Checker) -> dict[str, Resources]:
    used: dict[str, Resources] = defaultdict(dict)
    for pod in checker.pods.values():
        group = checker.groups.get(pod.group)
        if group is not None and pod.live_bound:
            used[group.queue] = add(used[group.queue], pod.requests)
    return used


def check_queues(checker: Checker, now: float) -> None:
    used = queue_used(checker)
    for key, queue in checker.queues.items():
        excess = over(used.get(key, {}), queue.capability) if queue.capability else {}
        why = ""
        if excess:
            dims = ", ".join(f"{n} {u} > {c}" for n, (u, c) in excess.items())
            why = (
                f"live bound pods request {show(used.get(key, {}))}; capability {dims}; "
                f"gangs: {_queue_gangs(checker, key)}"
            )
        checker.hold(
            "queue-over-capability", key, bool(excess), now, checker.limits.capacity_grace, why
        )


def _queue_gangs(checker: Checker, queue: str) -> str:
    parts = []
    for key, group in sorted(checker.groups.items()):
        if group.queue != queue:
            continue
        bound = [p for p in checker.members(key) if p.live_bound]
        if not bound:
            continue
        total: Resources = {}
        for pod in bound:
            total = add(total, pod.requests)
        job = f" job={group.job}" if group.job else ""
        times = [checker.bound_at.get(p.uid, (0.0, ""))[0] - checker.origin for p in bound]
        parts.append(
            f"{key} {len(bound)} bound (minMember {group.min_member}{job}) {show(total)} "
            f"bound t={min(times):.1f}-{max(times):.1f}s [{checker.story(key, group.job)}]"
        )
    return "; ".join(parts)
