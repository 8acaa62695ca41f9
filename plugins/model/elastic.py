"""The elastic part of a job: the members beyond its minimum (a Volcano Job with more replicas
than `minAvailable`, a PodGroup with more pods than `minMember`).

Volcano's rules, as its code has them (pkg/scheduler/api/job_info.go, plugins/proportion,
plugins/capacity, plugins/gang):

- **enqueue** counts only what a gang needs to start: the queue's `elastic` (Σ over its jobs of
  `GetElasticResources` = ExceededPart(allocated, minResources), per dimension (allocated -
  minResources)⁺) is subtracted from its allocated (`elastic_resources`). Volcano counts the
  whole allocated of a job without minResources as elastic; vulcan counts its members beyond
  `minMember` (the largest members are its minimum), so a PodGroup without minResources cannot
  let enqueue promise its room twice.
- **allocate** places each member, the gang's minimum included, only while the queue's
  Allocatable holds (allocated + request <= deserved for proportion, <= realCapability for
  capacity): the minimum is judged as a whole (all or nothing), then every further member on its
  own (`trim_elastic`), so a queue's capability is never exceeded by a job's surplus.
- **reclaim / preempt** take elastic members first and one at a time, never leaving the job
  below its minimum (Volcano's gang plugin: a victim only while the job keeps more than
  minAvailable ready): `surplus_members` says which members those are.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from core.records import PodRecord
from core.resources import ResourceVector

__all__ = [
    "elastic_added",
    "elastic_count",
    "elastic_resources",
    "holds_minimum",
    "surplus_members",
    "trim_elastic",
]

_ZERO = ResourceVector()


def _by_size(pod: PodRecord) -> tuple[tuple[int, ...], str]:
    # Largest first (cpu, memory, then the rest by name): the minimum is made of the largest
    # members, so what is left as elastic is never overstated.
    req = pod.requests
    rest = tuple(a for n, a in sorted(req.items()) if n not in ("cpu", "memory", "pods"))
    return ((-req.get("cpu"), -req.get("memory"), *(-x for x in rest)), pod.key)


def elastic_count(held: int, min_member: int) -> int:
    """The one elastic rule: of the `held` members a gang holds room for (bound, reserved or
    placed), those beyond `min_member` are elastic; the rest are its minimum."""
    return max(0, held - max(min_member, 0))


def holds_minimum(held: int, min_member: int) -> bool:
    """The gang holds its minimum: one more member would be elastic (placed on its own within
    the queue's share, the first to go to reclaim or preempt)."""
    return held >= max(min_member, 0)


def surplus_members(
    placed: Sequence[PodRecord],
    min_member: int,
    min_task_member: Mapping[str, int] | None = None,
    *,
    checks_tasks: bool = True,
) -> list[PodRecord]:
    """The members of `placed` (a job's members holding room) that may go without the job
    falling below `min_member`, nor any task role below its `min_task_member` (when the job's
    per-role checks apply, `checks_tasks`): the youngest-named, smallest ones first out, as
    many as `len(placed) - min_member`. [] when the job holds no more than its minimum."""
    extra = elastic_count(len(placed), min_member)
    if not extra:
        return []
    per_task: dict[str, int] = {}
    for pod in placed:
        per_task[pod.task or ""] = per_task.get(pod.task or "", 0) + 1
    minimums = dict(min_task_member or {}) if checks_tasks else {}
    out: list[PodRecord] = []
    # The last members (by size, then name) are the first to go.
    for pod in sorted(placed, key=_by_size, reverse=True):
        if len(out) == extra:
            break
        task = pod.task or ""
        if per_task[task] - 1 < minimums.get(task, 0):
            continue
        per_task[task] -= 1
        out.append(pod)
    return out


def elastic_resources(
    allocated: ResourceVector,
    min_resources: ResourceVector | None,
    placed: Sequence[PodRecord] = (),
    min_member: int = 0,
) -> ResourceVector:
    """A job's elastic resources: with minResources, Volcano's ExceededPart(allocated,
    minResources) (per dimension, what allocated holds beyond it); without, the requests of its
    members beyond `min_member` (`placed` are the members holding room)."""
    if min_resources is not None:
        return allocated.saturating_sub(min_resources)
    extra = elastic_count(len(placed), min_member)
    if not extra:
        return _ZERO
    smallest = sorted(placed, key=_by_size)[-extra:]
    total = _ZERO
    for pod in smallest:
        total = total + pod.requests
    return total


def elastic_added(
    placed: Sequence[PodRecord],
    new: Sequence[PodRecord],
    min_resources: ResourceVector | None,
    min_member: int,
) -> ResourceVector:
    """What placing `new` members of a gang whose `placed` members hold room adds to its
    elastic resources (its members beyond what it needs to start)."""
    held = _ZERO
    for pod in placed:
        held = held + pod.requests
    before = elastic_resources(held, min_resources, placed, min_member)
    for pod in new:
        held = held + pod.requests
    after = elastic_resources(held, min_resources, [*placed, *new], min_member)
    return after.saturating_sub(before)


def trim_elastic(
    slots: Mapping[str, str],
    members: Sequence[PodRecord],
    need: int,
    need_per_task: Mapping[str, int],
    accept: Callable[[PodRecord], bool],
) -> dict[str, str]:
    """The slots of a whole-gang placement that may be kept: the gang's required members (the
    first `need` in `members` order, each short role's `need_per_task` first), then each further
    member only if `accept(pod)` (its queue may still take it; `accept` books what it accepts).
    `slots` must meet the requirements (an ok plan)."""
    by_key = {pod.key: pod for pod in members}
    ordered = [by_key[key] for key in (pod.key for pod in members) if key in slots]
    required: list[str] = []
    short = {task: n for task, n in need_per_task.items() if n > 0}
    for pod in ordered:
        task = pod.task or ""
        if short.get(task, 0) > 0:
            short[task] -= 1
            required.append(pod.key)
    taken = set(required)
    for pod in ordered:
        if len(required) >= need:
            break
        if pod.key not in taken:
            required.append(pod.key)
            taken.add(pod.key)
    kept = {key: slots[key] for key in required}
    for pod in ordered:
        if pod.key not in taken and accept(pod):
            kept[pod.key] = slots[pod.key]
    return kept
