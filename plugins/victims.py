"""Victim selection for reclaim (between queues) and preempt (within a queue), gang-aware
(spec/volcano.md §2.2, §3.7, §3.8, §3.13).

The unit of eviction is a `VictimUnit`: every running member of one PodGroup, or one pod that
belongs to no gang. Volcano's gang filter evicts members only while the job keeps minAvailable;
vulcan goes further and never evicts part of a running gang (a gang with a member gone stalls
while still holding the rest), so the gang filter is satisfied by construction.

Filters, applied to every unit:

* conformance: never a unit with a pod of priority class `system-cluster-critical` /
  `system-node-critical` or in namespace `kube-system` (`critical`, see `is_critical`);
* preemptable: `volcano.sh/preemptable` on the pod (annotation wins over label, default true,
  see `preemptable_flag`); a unit is preemptable only if all its pods are;
* reclaim: the unit is in ANOTHER queue, that queue is `reclaimable`, and the share model's
  Reclaimable rule accepts it (proportion: the queue still holds more than it deserves;
  capacity: more than deserved in a dimension the unit frees; both: never below guarantee),
  judged against a running copy of each queue's allocated that loses every accepted unit;
* preempt: the unit is in the SAME queue, of a lower priority than the preemptor, and not the
  preemptor's own job.

Victim order: lowest priority first, then units whose loss breaks no gang (a plain pod, or
surplus members of an elastic job), then the youngest (latest creationTimestamp), then group
and pod keys for determinism. The walk takes units in that order, skipping units that free
nothing still missing, until the need is covered, then reprieves (from the most valuable down)
every taken unit the others cover without. Reprieving is safe for the queue rules: dropping an
earlier victim only leaves its queue holding more, which can only make later victims of that
queue more acceptable.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from core.api.booleans import PREEMPTABLE, preemptable_flag
from core.resources import ResourceVector
from plugins.job_order import parse_time
from plugins.queue_share import QueueInput, ShareModel

__all__ = [
    "CRITICAL_NAMESPACE",
    "CRITICAL_PRIORITY_CLASSES",
    "PREEMPTABLE_KEY",
    "VictimUnit",
    "is_critical",
    "preempt_victims",
    "preemptable_by",
    "preemptable_flag",
    "reclaim_victims",
    "reclaimable_by",
    "select_victims",
    "victim_order_key",
    "walk_victims",
]

PREEMPTABLE_KEY = PREEMPTABLE
R = TypeVar("R")
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
CRITICAL_NAMESPACE = "kube-system"

# Go's strconv.ParseBool spellings.


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


def _covers(units: Iterable[VictimUnit], need: Mapping[str, int]) -> bool:
    freed: dict[str, int] = {}
    for unit in units:
        for name in need:
            freed[name] = freed.get(name, 0) + unit.freed.get(name)
    return all(freed.get(name, 0) >= amount for name, amount in need.items())


def walk_victims(
    units: Sequence[VictimUnit],
    eligible: Callable[[VictimUnit], bool],
    enough: Callable[[list[VictimUnit]], R],
    *,
    accept: Callable[[VictimUnit], bool] | None = None,
    helps: Callable[[VictimUnit], bool] | None = None,
) -> tuple[list[VictimUnit], R] | None:
    """The one victim walk, for reclaim and preempt, of single pods and of whole gangs (see the
    module docstring). Units are taken in victim order while `enough(taken)` is falsy: those
    that `helps` (default: all), pass the stateless `eligible` filter and then `accept` (which
    may keep state, e.g. a share model's VictimJudge). Then every taken unit the others do
    without is given back, the most valuable first. Returns the units in victim order with
    `enough`'s last truthy answer (e.g. a gang's placement), or None when all acceptable units
    together are not enough."""
    taken: list[VictimUnit] = []
    result = enough(taken)
    if result:
        return [], result
    for unit in sorted(units, key=victim_order_key):
        if helps is not None and not helps(unit):
            continue  # frees nothing still missing: evicting it would be pure loss
        if not eligible(unit) or (accept is not None and not accept(unit)):
            continue
        taken.append(unit)
        result = enough(taken)
        if result:
            break
    if not result:
        return None
    for unit in reversed(list(taken)):  # reprieve the most valuable victims first
        rest = [other for other in taken if other is not unit]
        kept = enough(rest)
        if kept:
            taken, result = rest, kept
    return taken, result


def select_victims(
    need: ResourceVector,
    units: Sequence[VictimUnit],
    eligible: Callable[[VictimUnit], bool],
    accept: Callable[[VictimUnit], bool] | None = None,
) -> list[VictimUnit] | None:
    """`walk_victims` until the units free `need` (every dimension, `pods` included: a free pod
    slot is a node resource). [] when nothing is needed, None when they cannot."""
    wanted = {name: amount for name, amount in need.items() if amount > 0}
    if not wanted:
        return []

    def helps(unit: VictimUnit) -> bool:
        return any(unit.freed.get(name) > 0 for name in wanted)

    walked = walk_victims(
        units, eligible, lambda taken: _covers(taken, wanted), accept=accept, helps=helps
    )
    return None if walked is None else walked[0]


def reclaimable_by(queue: str, queues: Mapping[str, QueueInput]) -> Callable[[VictimUnit], bool]:
    """Reclaim's filter for a job of `queue`: units of another, reclaimable queue that are
    preemptable and not critical."""

    def eligible(unit: VictimUnit) -> bool:
        source = queues.get(unit.queue)
        return (
            unit.queue != queue
            and source is not None
            and source.reclaimable
            and unit.preemptable
            and not unit.critical
        )

    return eligible


def preemptable_by(
    queue: str, priority: int, group: str | None = None
) -> Callable[[VictimUnit], bool]:
    """Preempt's filter for a job of `queue` and `priority`: units of the same queue with a
    lower priority, not the job's own, preemptable and not critical."""

    def eligible(unit: VictimUnit) -> bool:
        return (
            unit.queue == queue
            and unit.priority < priority
            and (group is None or unit.group != group)
            and unit.preemptable
            and not unit.critical
        )

    return eligible


def reclaim_victims(
    beneficiary_queue: str,
    need: ResourceVector,
    units: Sequence[VictimUnit],
    model: ShareModel,
    queues: Mapping[str, QueueInput],
) -> list[VictimUnit] | None:
    """Units of other queues to evict so that a pod (or gang) of `beneficiary_queue` fits.

    `need` is what is still missing AFTER the free capacity at the target (the caller subtracts
    the free room first; e.g. a node with 2 free GPUs and a pod asking for 4 has need gpu 2).
    The caller also checks `model.preemptive(beneficiary_queue, request)` first: a queue at its
    deserved amount reclaims nothing. Returns None when even every acceptable unit together
    cannot cover `need`; units of queues missing from `queues` are never taken.
    """
    judge = model.victim_judge(beneficiary_queue)
    eligible = reclaimable_by(beneficiary_queue, queues)
    return select_victims(need, units, eligible, lambda u: judge.take(u.queue, u.freed))


def preempt_victims(
    beneficiary_queue: str,
    beneficiary_priority: int,
    need: ResourceVector,
    units: Sequence[VictimUnit],
    *,
    beneficiary_group: str | None = None,
) -> list[VictimUnit] | None:
    """Units of the SAME queue with a lower priority to evict for a starving job (§3.7 phase 1).

    `need` is what is still missing after free capacity (as for `reclaim_victims`). Units of
    `beneficiary_group` (the preemptor's own job) are never taken; neither are units of equal or
    higher priority, non-preemptable or critical ones. None when they cannot cover `need`.
    """

    eligible = preemptable_by(beneficiary_queue, beneficiary_priority, beneficiary_group)
    return select_victims(need, units, eligible)
