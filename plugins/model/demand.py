"""What admitting a gang takes from its queue (`gang_demand`). Pure."""

from __future__ import annotations

from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from plugins.model import gang_ready
from plugins.model.gang import GangView
from plugins.model.queue_share import sum_vectors

__all__ = ["gang_demand", "still_asks"]


def gang_demand(
    group: PodGroupRecord,
    members: list[PodRecord],
    need: int,
    view: GangView | None = None,
) -> ResourceVector:
    """What admitting the gang takes from its queue: `minResources` when set, else the
    requests of the members it needs (the first `need`, in placement order). With the `view`,
    minResources less what its members still running hold (a gang that lost some members is
    admitted again for the missing ones, and its queue counts the others already), and at
    least what the first `need` members request."""
    required = sum_vectors(pod.requests for pod in members[:need])
    if group.min_resources is not None:
        if view is None:
            return group.min_resources
        held = sum_vectors(
            pod.requests
            for pod in view.members
            if pod.node is not None and not pod.terminal and not pod.deleting
        )
        # Never less than what the members it places first ask: a Volcano Job's minResources
        # count its first minAvailable pods in task order, the placement takes the largest
        # first, and Volcano's allocate judges each task's own request.
        return group.min_resources.saturating_sub(held).elementwise_max(required)
    return required


def still_asks(group: PodGroupRecord, view: GangView) -> ResourceVector:
    """What the gang still asks its queue for (its minResources less what it holds)."""
    return gang_demand(
        group, gang_ready.pending_members(view), gang_ready.members_needed(view), view
    )
