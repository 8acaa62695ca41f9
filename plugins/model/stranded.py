"""A gang stranded half placed: short of its quorum because members taken away (evicted,
deleted) are stuck terminating, so their controller cannot make them again.

A pod being deleted stays in the API until its kubelet confirms it gone; on a lost node nobody
does, for as long as the node stays lost. A Volcano Job's controller makes a member again under
the same name, so it waits for the old pod; the gang's other members run on, too few to make
its quorum, holding their nodes for a gang that cannot be whole. Volcano leaves that to the
job's policies (`PodEvicted -> RestartJob`); vulcan's rule is never half a gang, so once a
member is `after` seconds past the end of its grace period (its kubelet would have confirmed
it by then) the survivors are evicted and the gang is placed again whole when it can be.

Only members taken away count: one that Failed by itself is its job's to handle. Only
survivors some controller makes again are evicted: a bare pod evicted is lost for good.

Pure: the caller passes the members, the nodes and the time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core.records import NodeRecord, PodGroupRecord, PodRecord
from plugins.model.gang import counts_for_quorum, live_counts, quorum_shortfall

__all__ = ["Stranded", "stranded_gang"]

_NAMED = 3  # stuck members named in the reason


@dataclass(frozen=True, slots=True)
class Stranded:
    survivors: tuple[str, ...]  # pod keys to evict
    stuck: tuple[str, ...]  # the members that hold it back
    why: str


def stranded_gang(
    group: PodGroupRecord,
    members: Iterable[PodRecord],
    nodes: Mapping[str, NodeRecord],
    now: float,
    after: float,
) -> Stranded | None:
    """The survivors to evict and why, when `group` is stranded at `now` (POSIX seconds);
    None otherwise."""
    members = list(members)
    stuck = [p for p in members if _stuck(p, now, after)]
    if not stuck:
        return None
    have, per_task = live_counts(members)
    short, tasks = quorum_shortfall(group.min_member, group.min_task_member, have, per_task)
    if not short and not tasks:
        return None
    survivors = [p for p in members if counts_for_quorum(p) and not p.terminal]
    if not survivors or any(p.owner is None for p in survivors):
        return None
    named = ", ".join(_describe(p, nodes, now) for p in stuck[:_NAMED])
    if len(stuck) > _NAMED:
        named += f" and {len(stuck) - _NAMED} more"
    why = (
        f"gang {group.key} cannot be made whole: {len(stuck)} of its members are stuck "
        f"terminating ({named}), so their controller cannot make them again, and "
        f"{have}/{group.min_member} members remain bound; its {len(survivors)} surviving "
        "member(s) are evicted so that it is placed again whole"
    )
    return Stranded(
        tuple(sorted(p.key for p in survivors)), tuple(sorted(p.key for p in stuck)), why
    )


def _stuck(pod: PodRecord, now: float, after: float) -> bool:
    due = pod.deletion_due
    return pod.deleting and pod.node is not None and due is not None and now - due >= after


def _describe(pod: PodRecord, nodes: Mapping[str, NodeRecord], now: float) -> str:
    node = nodes.get(pod.node or "")
    state = "gone" if node is None else ("Ready" if node.ready else "not Ready")
    late = now - (pod.deletion_due or now)
    return f"{pod.key} on node {pod.node} ({state}), {late:.0f}s past its grace period"
