"""Members vulcan never sees: pods of a gang that kube-scheduler does not send to vulcan (their
`schedulerName` is no profile vulcan serves, or they lack the filter entry's marker). They are
reported, not counted: a gang that needs them to reach its minMember cannot be placed by vulcan,
and is neither admitted nor kept enqueued (its room would be held for pods that never come). Pure.
"""

from __future__ import annotations

from core.served import ServedPods
from plugins.model.gang import PENDING, VALID_STATUSES, GangView

__all__ = ["NOT_SENT", "unserved_refusal"]

NOT_SENT = "pods are never sent to vulcan"  # in every such refusal (explain looks for it)


def unserved_refusal(view: GangView, served: ServedPods) -> str | None:
    """Why vulcan cannot place the gang: its pending members that kube-scheduler never sends
    to vulcan are needed for its minMember. None when it has none or can do without them."""
    if served.names is None and served.marker is None:
        return None
    unserved = [
        pod for pod in view.members if view.status.get(pod.key) == PENDING and not served(pod)
    ]
    if not unserved:
        return None
    counted = sum(1 for pod in view.members if view.status.get(pod.key) in VALID_STATUSES)
    if counted - len(unserved) >= view.min_member:
        return None
    count = f"{len(unserved)} of its {len(view.members)} {NOT_SENT}"
    if served.marker is not None:
        return (
            f"pods do not carry {served.marker}, so kube-scheduler does not send them to "
            f"vulcan: {count}"
        )
    names = ", ".join(f'"{name}"' for name in sorted({pod.scheduler_name for pod in unserved}))
    return (
        f"pods use schedulerName {names}, which no vulcan scheduler serves "
        f"(it serves {served.describe()}): {count}"
    )
