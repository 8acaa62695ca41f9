"""Victim selection for reclaim (between queues) and preempt (within a queue), gang-aware.

The unit of eviction is a `VictimUnit`: every running member of one PodGroup, or one pod that
belongs to no gang. Volcano's gang filter evicts members only while the job keeps minAvailable;
vulcan goes further and never evicts part of a running gang (a gang with a member gone stalls
while still holding the rest), so the gang filter is satisfied by construction.

Which units a reclaim or preempt may take is decided by the session's plugins
(`plugins.framework.policy`: priority, conformance, drf, proportion, capacity, combined by tier)
over the action's own candidates (`plugins.actions.evictions.accepted_victims`: another, reclaimable
queue for reclaim; the same queue and not the preemptor's job for preempt; preemptable units only,
`volcano.sh/preemptable` read as Go's ParseBool, annotation over label). This module holds
the unit, the critical rule (`is_critical`), the victim order and the walk.

Victim order: lowest priority first, then units whose loss breaks no gang (a plain pod, or
one elastic member of a job above its minimum: `VictimUnit.elastic`, taken member by member
before its whole gang), then the youngest (latest creationTimestamp), then group
and pod keys for determinism. The walk takes units in that order, skipping units that free
nothing still missing, until the need is covered, then reprieves (from the most valuable down)
every taken unit the others cover without. Reprieving is safe for the queue rules: dropping an
earlier victim only leaves its queue holding more, which can only make later victims of that
queue more acceptable.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from core.api.booleans import PREEMPTABLE, preemptable_flag
from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from plugins.model.elastic import elastic_resources, surplus_members
from plugins.model.job_order import parse_time
from plugins.model.queue_share import sum_vectors

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = [
    "CRITICAL_NAMESPACE",
    "CRITICAL_PRIORITY_CLASSES",
    "PREEMPTABLE_KEY",
    "VictimUnit",
    "books_released",
    "effective_units",
    "is_critical",
    "preemptable_flag",
    "select_victims",
    "unit_of",
    "victim_order_key",
    "victim_units",
    "victim_units_of",
    "walk_victims",
]

PREEMPTABLE_KEY = PREEMPTABLE
R = TypeVar("R")
_ZERO = ResourceVector()
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
CRITICAL_NAMESPACE = "kube-system"


@dataclass(frozen=True, slots=True)
class VictimUnit:
    """What one eviction decision removes: a whole running gang, or one non-gang pod."""

    group: str | None  # PodGroup key, None for a pod outside any gang
    queue: str
    priority: int  # the job's priority (PriorityClass value); a lone pod's own priority
    pods: tuple[str, ...]  # keys of the pods evicted together
    freed: ResourceVector  # Σ requests of those pods
    preemptable: bool  # every pod is `volcano.sh/preemptable`
    critical: bool  # some pod is critical (conformance)
    breaks_gang: bool  # evicting it leaves a gang below minMember / kills a running gang
    creation: str  # creationTimestamp of the group (or pod), RFC 3339
    # One elastic member of a running gang (beyond its minimum, `plugins.model.elastic`): its gang
    # keeps running without it. A gang with such members is also offered whole (`pods` every
    # bound member); taking the whole gang subsumes its elastic units (`effective_units`).
    elastic: bool = False
    # What its gang's books count as elastic (its members' hold beyond what the gang needs to
    # start: `plugins.model.elastic.elastic_resources`), the same on every unit of the gang.
    group_elastic: ResourceVector = _ZERO


def books_released(units: Iterable[VictimUnit]) -> list[tuple[str, ResourceVector, ResourceVector]]:
    """What evicting `units` takes out of their queues' books, per gang: (queue, allocated
    freed, elastic freed). A gang's elastic only falls as far as its books count it: members
    taken one by one free min(Σ freed, its elastic) of it, the whole gang all of it."""
    out: list[tuple[str, ResourceVector, ResourceVector]] = []
    by_group: dict[str, list[VictimUnit]] = {}
    for unit in units:
        if unit.group is None:
            out.append((unit.queue, unit.freed, _ZERO))
        else:
            by_group.setdefault(unit.group, []).append(unit)
    for group_units in by_group.values():
        whole = next((u for u in group_units if not u.elastic), None)
        if whole is not None:
            out.append((whole.queue, whole.freed, whole.group_elastic))
            continue
        freed = sum_vectors(u.freed for u in group_units)
        within = freed.saturating_sub(freed.saturating_sub(group_units[0].group_elastic))
        out.append((group_units[0].queue, freed, within))
    return out


def is_critical(priority_class_name: str | None, namespace: str) -> bool:
    """The conformance plugin's exclusion: critical priority classes and kube-system pods."""
    return priority_class_name in CRITICAL_PRIORITY_CLASSES or namespace == CRITICAL_NAMESPACE


def victim_order_key(unit: VictimUnit) -> tuple[int, int, float, str, tuple[str, ...]]:
    """Sort key: lowest priority, breaks no gang, youngest, then group/pods."""
    return (
        unit.priority,
        1 if unit.breaks_gang else 0,
        -parse_time(unit.creation),
        unit.group or "",
        unit.pods,
    )


def effective_units(units: Iterable[VictimUnit]) -> list[VictimUnit]:
    """`units` without the elastic units of gangs that are taken whole as well (the whole
    unit evicts those members already): what is evicted, each pod once."""
    units = list(units)
    whole = {u.group for u in units if u.group is not None and not u.elastic}
    return [u for u in units if not (u.elastic and u.group in whole)]


def _covers(units: Iterable[VictimUnit], need: Mapping[str, int]) -> bool:
    freed: dict[str, int] = {}
    for unit in effective_units(units):
        for name in need:
            freed[name] = freed.get(name, 0) + unit.freed.get(name)
    return all(freed.get(name, 0) >= amount for name, amount in need.items())


def walk_victims(
    units: Sequence[VictimUnit],
    enough: Callable[[list[VictimUnit]], R],
    *,
    helps: Callable[[VictimUnit], bool] | None = None,
) -> tuple[list[VictimUnit], R] | None:
    """The one victim walk, for reclaim and preempt, of single pods and of whole gangs (see the
    module docstring). `units` are the acceptable ones (the session's Preemptable /
    Reclaimable decided which). They are taken in victim order while `enough(taken)` is falsy,
    those that `helps` (default: all). Then every taken unit the others do without is given
    back, the most valuable first. Returns the units in victim order with
    `enough`'s last truthy answer (e.g. a gang's placement), or None when all acceptable units
    together are not enough."""
    taken: list[VictimUnit] = []
    result = enough(taken)
    if result:
        return [], result
    for unit in sorted(units, key=victim_order_key):
        if helps is not None and not helps(unit):
            continue  # frees nothing still missing: evicting it would be pure loss
        taken.append(unit)
        result = enough(taken)
        if result:
            break
    if not result:
        return None
    for unit in reversed(list(taken)):  # reprieve the most valuable victims first
        if unit not in taken:
            continue
        rest = [other for other in taken if other is not unit]
        if unit.elastic and any(
            o.group == unit.group and not o.elastic for o in rest
        ):  # its gang goes whole anyway: reprieving the member alone spares nothing
            continue
        kept = enough(rest)
        if kept:
            taken, result = rest, kept
    return effective_units(taken), result


def select_victims(need: ResourceVector, units: Sequence[VictimUnit]) -> list[VictimUnit] | None:
    """`walk_victims` until the units free `need` (every dimension, `pods` included: a free pod
    slot is a node resource). [] when nothing is needed, None when they cannot."""
    wanted = {name: amount for name, amount in need.items() if amount > 0}
    if not wanted:
        return []

    def helps(unit: VictimUnit) -> bool:
        return any(unit.freed.get(name) > 0 for name in wanted)

    walked = walk_victims(units, lambda taken: _covers(taken, wanted), helps=helps)
    return None if walked is None else walked[0]


def unit_of(
    group: str | None,
    queue: str,
    created: str,
    pods: Sequence[PodRecord],
    *,
    elastic: bool = False,
    group_elastic: ResourceVector = _ZERO,
) -> VictimUnit:
    """One eviction decision: a whole running gang's bound members, one elastic member of a
    gang (`elastic`: the gang keeps its minimum without it), or one pod of no gang."""
    return VictimUnit(
        group=group,
        queue=queue,
        priority=max(pod.priority for pod in pods),
        pods=tuple(pod.key for pod in pods),
        freed=sum_vectors(pod.requests for pod in pods),
        preemptable=all(pod.annotations_preemptable for pod in pods),
        critical=any(is_critical(pod.priority_class, pod.namespace) for pod in pods),
        breaks_gang=group is not None and not elastic,
        creation=created,
        elastic=elastic,
        group_elastic=group_elastic,
    )


def victim_units(
    snapshot: Snapshot,
    exclude_group: str,
    releasing: Collection[str],
    queue_of: Callable[[PodRecord], str],
    served: Callable[[PodRecord], bool],
) -> list[VictimUnit]:
    """Everything that could be evicted, as whole units: each running gang (but
    `exclude_group`) with all its bound members (evicting some would leave it hanging), each
    elastic member of a gang above its minimum on its own (`plugins.model.elastic.surplus_members`),
    and each bound pod of no gang. Only pods vulcan schedules (`served`): another scheduler's
    pods are never victims, in a gang or not. Pods already being freed (terminating, or
    `releasing`) are none."""
    units: list[VictimUnit] = []
    for other in snapshot.podgroups.values():
        if other.key == exclude_group:
            continue
        bound = [
            pod
            for k in snapshot.pods_by_group.get(other.key, ())
            if (pod := snapshot.pods.get(k)) is not None
            and pod.occupies_node
            and not pod.deleting
            and k not in releasing
        ]
        if bound and all(served(pod) for pod in bound):
            units += _gang_units(other, bound)
    for pod in snapshot.pods.values():
        if (
            pod.group is None
            and pod.occupies_node
            and not pod.deleting
            and pod.key not in releasing
            and served(pod)
        ):
            units.append(unit_of(None, queue_of(pod), pod.created, [pod]))
    return units


def victim_units_of(
    snapshot: Snapshot,
    queue: str,
    releasing: Collection[str],
    served: Callable[[PodRecord], bool],
) -> list[VictimUnit]:
    """`victim_units` of one queue: its running gangs (each whole, and each elastic member on
    its own) and its bound pods of no gang, from the cache's index of the queue's pods that
    hold a node (`Snapshot.bound_by_queue`). Only pods vulcan schedules (`served`); none being
    freed."""
    pods = snapshot.pods
    groups: dict[str, list[PodRecord]] = {}
    units: list[VictimUnit] = []
    for key in snapshot.bound_by_queue.get(queue, ()):
        pod = pods.get(key)
        if pod is None or not pod.occupies_node or pod.deleting or key in releasing:
            continue
        if pod.group is None:
            if served(pod):
                units.append(unit_of(None, queue, pod.created, [pod]))
        else:
            groups.setdefault(pod.group, []).append(pod)
    for group_key in sorted(groups):
        other = snapshot.podgroups.get(group_key)
        bound = sorted(groups[group_key], key=lambda pod: pod.key)
        if other is None or not all(served(pod) for pod in bound):
            continue
        units += _gang_units(other, bound)
    return units


def _gang_units(group: PodGroupRecord, bound: Sequence[PodRecord]) -> list[VictimUnit]:
    """A running gang's units: each member beyond its minimum on its own, then the gang whole,
    each knowing what the gang's books count as elastic."""
    elastic = elastic_resources(
        sum_vectors(pod.requests for pod in bound), group.min_resources, bound, group.min_member
    )
    surplus = surplus_members(
        bound,
        group.min_member,
        group.min_task_member,
        checks_tasks=group.min_member >= sum(group.min_task_member.values()),
    )
    units = [
        unit_of(group.key, group.queue, group.created, [pod], elastic=True, group_elastic=elastic)
        for pod in surplus
    ]
    units.append(unit_of(group.key, group.queue, group.created, bound, group_elastic=elastic))
    return units
