"""Queue causes of a waiting gang: its queue is missing or not Open, at its capability, unable
to hold its minResources, or at its deserved share while other queues wait.

Whether the queue refuses is asked of the share model itself (`QueueShares.enqueueable` /
`allocatable`, Volcano's JobEnqueueable and Allocatable as the extender asks them); only the
words are made here, from the numbers of the refusing dimensions. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.resources import ResourceVector
from explain.texts import Finding
from explain.world import World, amounts
from plugins.model import gang_ready
from plugins.model.demand import gang_demand
from plugins.model.queue_share import QueueShare, requested_dims, strip_pods

if TYPE_CHECKING:
    from explain.gang_causes import GangCase

_WAITING = ("", "Pending")


def queue_state(case: GangCase) -> Finding | None:
    if case.admitted:
        return None  # admitted before: the queue's state no longer stops its members
    queue = case.group.queue
    source = case.world.inputs.get(queue)
    if source is None or queue not in case.world.model.shares:
        return Finding(
            "queue-missing",
            f"its queue {queue} does not exist",
            [f"create Queue {queue}", "or set the PodGroup's spec.queue to an existing queue"],
        )
    if not source.open:
        return Finding(
            "queue-closed",
            f"queue {queue} is {source.state or 'not Open'}: a queue that is not Open admits "
            "no new work",
            [
                f"open the queue: vcctl queue operate -n {queue} -a open "
                "(a bus.volcano.sh Command OpenQueue)",
                "or submit the work to an Open queue",
            ],
        )
    return None


def queue_limits(case: GangCase) -> Finding | None:
    """Volcano's enqueue check (a Pending group's minResources against the queue's
    realCapability) and allocate check (the members it needs against the queue's deserved
    share, or realCapability under the capacity plugin)."""
    if case.admitted:
        return None
    group, view, model = case.group, case.view, case.world.model
    share = model.shares.get(group.queue)
    if share is None:
        return None
    if group.phase in _WAITING and model.enqueueable(group.queue, group.min_resources):
        need = strip_pods(group.min_resources)
        future = need + share.allocated + share.inqueue - share.elastic
        return refused(case.world, group.queue, need, future, share.real_capability, True)
    if group.phase in _WAITING and view.created == 0:
        return None  # Volcano enqueues a group on its minResources alone
    members, need = gang_ready.pending_members(view), gang_ready.members_needed(view)
    if not members or need == 0:
        return None
    return allocate_refused(case.world, group.queue, gang_demand(group, members, need, view))


def allocate_refused(world: World, queue: str, request: ResourceVector) -> Finding | None:
    """Volcano's Allocatable for `request` in `queue`, as a finding when it refuses."""
    share = world.model.shares.get(queue)
    demand = strip_pods(request)
    if share is None or not world.model.allocatable(queue, demand):
        return None
    limit = share.real_capability if world.plugin == "capacity" else share.deserved
    return refused(world, queue, demand, share.allocated + demand, limit, False)


def refused(
    world: World,
    queue: str,
    need: ResourceVector,
    future: ResourceVector,
    limit: ResourceVector,
    enqueue: bool,
) -> Finding | None:
    """The words for a queue's refusal of `need` (`future`: what it would hold, `limit`: what
    it may); None when the queue deserves all the cluster has of every refusing dimension:
    then the cluster is too small, which the placement check says better."""
    share = world.model.shares[queue]
    short = [d for d in requested_dims(need) if future.get(d) > limit.get(d)] or requested_dims(
        need
    )
    capped = [d for d in short if d in share.capability and future.get(d) > share.capability.get(d)]
    if capped:
        held = share.allocated + share.inqueue
        text = (
            f"queue {queue} is at its capability: it holds {amounts(share.allocated, capped)} "
            f"of its capability {amounts(share.capability, capped)}, and the gang needs "
            f"{amounts(need, capped)} more"
        )
        text += _inqueue(world, queue, share, capped)
        wanted = ResourceVector({d: held.get(d) + need.get(d) for d in capped})
        return Finding(
            "queue-capability",
            text,
            [
                f"raise queue {queue}'s spec.capability to at least {amounts(wanted, capped)}",
                f"or wait for queue {queue}'s running work to finish",
                "or ask for less (fewer or smaller members, a smaller minResources)",
            ],
        )
    if enqueue:
        text = (
            f"queue {queue} cannot hold the gang's minResources: it needs {amounts(need, short)}, "
            f"the queue may hold at most {amounts(share.real_capability, short)} (the cluster "
            f"less other queues' guarantees) and holds {amounts(share.allocated, short)}"
        )
        return Finding(
            "queue-capacity",
            text + _inqueue(world, queue, share, short),
            [
                "wait for the queue's running (or admitted) work to finish",
                "or lower spec.minResources",
            ],
        )
    if all(share.deserved.get(d) >= share.real_capability.get(d) for d in short):
        return None
    return _over_share(world, queue, share, need, short)


def _inqueue(world: World, queue: str, share: QueueShare, dims: list[str]) -> str:
    """ ", and admitted work not placed yet holds nvidia.com/gpu 8 (default/train-...)": the
    queue's `inqueue`, Volcano's minResources of Inqueue groups, which count before any of
    their pods run."""
    if not any(share.inqueue.get(d) for d in dims):
        return ""
    groups = sorted(
        g.key
        for g in world.snapshot.podgroups.values()
        if g.queue == queue and g.phase == "Inqueue" and g.min_resources is not None
    )
    named = f" ({', '.join(groups[:3])}{', ...' if len(groups) > 3 else ''})" if groups else ""
    return f", and admitted work not placed yet holds {amounts(share.inqueue, dims)}{named}"


def _over_share(
    world: World, queue: str, share: QueueShare, need: ResourceVector, short: list[str]
) -> Finding:
    model = world.model
    asking = [n for n, s in model.shares.items() if not strip_pods(s.request).is_zero()]
    weights = sum(world.inputs[n].weight for n in asking if n in world.inputs)
    weight = world.inputs[queue].weight if queue in world.inputs else 1
    waiting = []
    for name in sorted(model.shares):
        other = model.shares[name]
        wants = other.request.saturating_sub(other.allocated)
        if name != queue and any(wants.get(d) > 0 for d in short):
            waiting.append(f"queue {name} waits for {amounts(wants, short)}")
    text = (
        f"queue {queue} is at its deserved share: it holds {amounts(share.allocated, short)} and "
        f"deserves {amounts(share.deserved, short)} (weight {weight} of {weights}), and the "
        f"gang needs {amounts(need, short)} more"
    )
    if waiting:
        text += " while " + ", ".join(waiting)
    return Finding(
        "queue-share",
        text,
        [
            f"wait for queue {queue}'s running work to finish"
            + (" or the other queues' demand to drop" if waiting else ""),
            f"or give queue {queue} more weight (spec.weight {weight})",
            "or ask for less (fewer or smaller members)",
        ],
    )
