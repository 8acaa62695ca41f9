"""What one PodGroup adds to its queue's books (`plugins.model.queue_inputs.QueueBooks`): its
phase, the part of its minResources no pod asks for yet, what it has not placed of an admitted
minimum, what its placed members hold beyond it; and the per-queue sums those are added into.
Pure: no I/O."""

from __future__ import annotations

import dataclasses

from core.cache import Snapshot
from core.records import PodGroupRecord
from core.resources import ResourceVector
from plugins.model.elastic import elastic_resources
from plugins.model.gang import gang_view
from plugins.model.gang_ready import members_needed, pending_members
from plugins.model.queue_share import strip_pods, sum_vectors

__all__ = [
    "Contribution",
    "add_into",
    "contribution",
    "gated_request",
    "members_request",
    "take_from",
]

_ZERO = ResourceVector()
_WAITING_PHASES = ("", "Pending")


@dataclasses.dataclass(slots=True, frozen=True)
class Contribution:
    queue: str
    phase: str
    unasked: ResourceVector | None
    inqueue: ResourceVector | None
    elastic: ResourceVector | None = None
    asked: bool = False  # its pods ask for all of its `inqueue` (counted in the queue's request)


def add_into(totals: dict[str, dict[str, int]], queue: str, amount: ResourceVector) -> None:
    into = totals.setdefault(queue, {})
    for name, value in amount.items():
        into[name] = into.get(name, 0) + value


def take_from(totals: dict[str, dict[str, int]], queue: str, amount: ResourceVector) -> None:
    into = totals.get(queue)
    if into is None:
        return
    for name, value in amount.items():
        left = into.get(name, 0) - value
        if left:
            into[name] = left
        else:
            into.pop(name, None)
    if not into:
        totals.pop(queue, None)


def contribution(
    snapshot: Snapshot, group: PodGroupRecord, held: ResourceVector | None
) -> Contribution:
    phase = group.phase or "Pending"
    unasked = inqueue = None
    asked = False
    if group.min_resources is not None:
        if group.phase in _WAITING_PHASES:
            missing = group.min_resources.saturating_sub(members_request(snapshot, group))
            unasked = None if missing.is_zero() else missing
        elif group.phase == "Inqueue" and _ran_out(snapshot, group):
            pass  # nothing left to place, and no controller makes its lost members again
        elif group.phase == "Inqueue":
            placed = members_request(snapshot, group, placed=True) + (held or _ZERO)
            missing = group.min_resources.saturating_sub(placed)
            if held is None:
                missing = missing.elementwise_max(_asked_first(snapshot, group))
            gated = gated_request(snapshot, group)
            if gated is not None:
                missing = missing.saturating_sub(gated)
            inqueue = None if missing.is_zero() else missing
            asked = missing.saturating_sub(members_request(snapshot, group)).is_zero()
    elastic = _elastic_of(snapshot, group, held)
    return Contribution(group.queue, phase, unasked, inqueue, elastic, asked)


def _asked_first(snapshot: Snapshot, group: PodGroupRecord) -> ResourceVector:
    """What the members its placement takes first ask (`plugins.model.demand`: the largest
    first), which may be more than its minResources count (a Volcano Job's count its first
    pods in task order). Enqueued, the gang holds that much: counted at minResources alone,
    every enqueued gang of a queue could need room the others' `inqueue` holds, and none be
    allocated (an embedded soak: six Volcano Jobs enqueued in one queue, each refused)."""
    view = gang_view(snapshot, group.key)
    if view is None or group.min_resources is None:
        return _ZERO
    asked = sum_vectors(pod.requests for pod in pending_members(view)[: members_needed(view)])
    # On the dimensions its minResources name: those are what its queue's books count for it.
    named = group.min_resources
    return ResourceVector({d: v for d, v in asked.items() if d in named and d != "pods"})


def _ran_out(snapshot: Snapshot, group: PodGroupRecord) -> bool:
    """An enqueued group not of a Volcano Job whose members all ran to their end (a bare gang
    that lost members to a failed node and finished the rest): it would hold its queue's room
    for pods nobody makes. A Volcano Job's group is not: its
    controller makes its next task's pods once the first is done."""
    if group.job_owned:
        return False
    keys = snapshot.pods_by_group.get(group.key, ())
    pods = snapshot.pods
    return bool(keys) and all((pod := pods.get(k)) is None or pod.terminal for k in keys)


def _elastic_of(
    snapshot: Snapshot, group: PodGroupRecord, held: ResourceVector | None
) -> ResourceVector | None:
    """What the group's placed members hold beyond what it needs to start (None: nothing)."""
    placed = [
        pod
        for key in snapshot.pods_by_group.get(group.key, ())
        if (pod := snapshot.pods.get(key)) is not None
        and pod.node is not None
        and not pod.terminal
        and not pod.deleting
    ]
    if not placed and held is None:
        return None
    allocated = sum_vectors(pod.requests for pod in placed) + (held or _ZERO)
    elastic = elastic_resources(allocated, group.min_resources, placed, group.min_member)
    elastic = strip_pods(elastic)
    return None if elastic.is_zero() else elastic


def members_request(
    snapshot: Snapshot, group: PodGroupRecord, *, placed: bool = False
) -> ResourceVector:
    """Σ requests of the group's unfinished members: bound ones (`placed`) or waiting ones."""
    pods = snapshot.pods
    return ResourceVector.total(
        pod.requests
        for key in snapshot.pods_by_group.get(group.key, ())
        if (pod := pods.get(key)) is not None
        and not pod.terminal
        and (pod.node is not None) == placed
    )


def gated_request(snapshot: Snapshot, group: PodGroupRecord) -> ResourceVector | None:
    """Σ requests of the group's pending members held by a scheduling gate of the user's (not
    vulcan's own queue-allocation gate); None when there are none (the common case)."""
    total: ResourceVector | None = None
    for key in snapshot.pods_by_group.get(group.key, ()):
        pod = snapshot.pods.get(key)
        if pod is None or not pod.gates or pod.node is not None or pod.terminal:
            continue
        if pod.user_gated:
            total = pod.requests if total is None else total + pod.requests
    return total
