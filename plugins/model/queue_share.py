"""Shared types of the queue-share plugins: `proportion` (weights) and `capacity` (deserved).

Both plugins turn a set of queues and the cluster's total into one `QueueShare` per queue
(deserved, realCapability, share ...) and answer the same questions about it, Volcano's hooks:

    enqueueable  JobEnqueueable: may a PodGroup with these minResources go Pending -> Inqueue?
    allocatable  Allocatable: may the queue take one more pod of this request?
    preemptive   Preemptive: may the queue reclaim from other queues for this request?
    overused     Overused: is the queue at or past its deserved amount everywhere?
    victim_judge Reclaimable: which victims may be taken from which queue (stateful walk)
    queue_order  QueueOrder

Conventions shared by both plugins:

* Inputs are `QueueInput`s the caller builds from its records; nothing here reads a cluster.
* The `pods` dimension is left out of every queue-level vector and comparison. Volcano keeps the
  pod count outside its Resource arithmetic (`MaxTaskNum`, "only used by predicates"), while our
  request vectors always carry `pods: 1`; counting it would make every queue's share depend on
  how many pods it runs.
* ∞: `capability` keeps Volcano's meaning that an absent dimension is unbounded (and, as in
  Volcano, cpu/memory capabilities <= 0 are treated as absent). `real_capability` never needs an
  ∞: Volcano derives it from the cluster total, so every dimension is finite and a dimension
  absent from it is worth 0 (a resource the cluster does not have).
* Amounts are ints (cpu millicores, bytes, counts). Fractions only arise in the proportion
  plugin's water-filling, which runs on floats like Volcano's and floors the result (see
  plugins/model/proportion_shares.py).
* "Requested dimensions" are the dimensions of a request with an amount > 0 (Volcano's
  LessEqualWithDimension), so a job asking for no GPU is never rejected for GPUs.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from core.records import QueueRecord
from core.resources import ResourceVector, format_quantity

__all__ = [
    "OPEN",
    "ZERO",
    "QueueInput",
    "QueueShare",
    "ShareModel",
    "VictimJudge",
    "allocated_from_inqueue",
    "effective_capability",
    "fmt",
    "freed_dims",
    "guarantee_kept",
    "min_by_dimension",
    "report_sorted",
    "requested_dims",
    "share_of",
    "strip_pods",
    "sum_vectors",
]

ZERO = ResourceVector()
OPEN = "Open"
PODS = "pods"
_UNBOUNDED_IF_NOT_POSITIVE = frozenset({"cpu", "memory"})
# Report order of dimensions in reasons, as kube-scheduler lists shortfalls.
_REPORT_ORDER = {PODS: 0, "cpu": 1, "memory": 2, "ephemeral-storage": 3}


@dataclass(slots=True)
class QueueInput:
    """One queue as the scheduling pass sees it (spec.* fields plus per-pass usage).

    `allocated`, `request`, `inqueue` and `elastic` are the queue's OWN jobs' amounts; the
    hierarchical capacity model adds children's amounts to their ancestors itself.
    """

    name: str
    weight: int = 1
    capability: ResourceVector | None = None  # spec.capability
    deserved: ResourceVector | None = None  # spec.deserved (capacity plugin)
    guarantee: ResourceVector | None = None  # spec.guarantee.resource
    parent: str | None = None
    priority: int = 0
    reclaimable: bool = True
    open: bool = True  # status.state == "Open"
    allocated: ResourceVector = ZERO  # Σ requests of bound/running pods of the queue
    request: ResourceVector = ZERO  # allocated + Σ pending pod requests
    inqueue: ResourceVector = ZERO  # admitted-but-not-yet-allocated
    elastic: ResourceVector = ZERO  # Σ per job (allocated - minResources)⁺
    has_jobs: bool = True  # proportion only divides among queues with jobs
    creation: str = ""  # creationTimestamp, for queue order ties
    state: str = ""  # status.state, only for messages ("queue x is Closed"); `open` decides


def queue_input(
    name: str,
    record: QueueRecord | None,
    *,
    allocated: ResourceVector,
    request: ResourceVector,
    inqueue: ResourceVector,
    has_groups: bool,
    elastic: ResourceVector = ZERO,
) -> QueueInput:
    """One queue as a pass sees it: its spec from `record` (None: Volcano's default queue,
    which its scheduler always has, before it is created) and the pass's amounts. `request`
    is raised to at least `allocated`; a queue has jobs when it has PodGroups or asks for
    anything."""
    state = record.scheduling_state if record is not None else "Open"
    return QueueInput(
        name=name,
        weight=record.weight if record is not None else 1,
        capability=record.capability if record is not None else None,
        deserved=record.deserved if record is not None else None,
        guarantee=record.guarantee if record is not None else None,
        parent=(record.parent or None) if record is not None else None,
        priority=record.priority if record is not None else 0,
        reclaimable=record.reclaimable if record is not None else True,
        open=state == "Open",
        allocated=allocated,
        request=request.elementwise_max(allocated),
        inqueue=inqueue,
        elastic=elastic,
        has_jobs=has_groups or not request.is_zero(),
        creation=record.created if record is not None else "",
        state=state,
    )


@dataclass(slots=True)
class QueueShare:
    """What a share plugin computed for one queue (all vectors without `pods`).

    deserved         the queue's fair amount (proportion: water-filled; capacity: spec.deserved
                     clamped to real_capability, floored at guarantee)
    real_capability  (total - Σ guarantees of all queues)⁺ + own guarantee, ∧ capability
                     (hierarchical capacity: from the parent's instead of total); finite, an
                     absent dimension = 0
    capability       spec.capability as enforced; an ABSENT dimension is UNBOUNDED
    share            max over deserved's dimensions of allocated/deserved (0/0 = 0, x/0 = 1);
                     fixed at 1 for a best-effort queue (capacity plugin, no spec.deserved)
    checks_overuse   False for the capacity plugin, which registers no Overused hook (a queue may
                     borrow up to its realCapability; allocatable() limits it)
    """

    name: str
    deserved: ResourceVector = ZERO
    real_capability: ResourceVector = ZERO
    capability: ResourceVector = ZERO
    guarantee: ResourceVector = ZERO
    allocated: ResourceVector = ZERO
    request: ResourceVector = ZERO
    inqueue: ResourceVector = ZERO
    elastic: ResourceVector = ZERO
    share: float = 0.0
    best_effort: bool = False
    checks_overuse: bool = True

    def copy(self) -> QueueShare:
        """A shallow copy (a session books into its own; the vectors are immutable)."""
        other = object.__new__(QueueShare)
        for name in _SHARE_SLOTS:
            object.__setattr__(other, name, getattr(self, name))
        return other

    def overused(self) -> bool:
        """Volcano's Overused: deserved <= allocated in every dimension (absent = 0)."""
        return self.checks_overuse and self.deserved.less_equal(self.allocated, "zero")

    def update_share(self) -> None:
        self.share = 1.0 if self.best_effort else share_of(self.allocated, self.deserved)


_SHARE_SLOTS = QueueShare.__slots__


class VictimJudge(Protocol):
    """A reclaim walk's running view of the victims' queues (Volcano's Reclaimable filter)."""

    def take(self, queue: str, freed: ResourceVector) -> bool:
        """True if a victim of `queue` freeing `freed` may be taken; if so it is subtracted from
        the running copy of the queue's allocated, so the next victim sees the queue smaller."""
        ...


class ShareModel(Protocol):
    """The hooks a share plugin offers the scheduling pass (implemented by `QueueShares`)."""

    shares: dict[str, QueueShare]

    def chain(self, queue: str) -> tuple[str, ...]:
        """The queue and the queues whose limits also bind it, nearest first."""
        ...

    def enqueueable(self, queue: str, min_resources: ResourceVector | None) -> str | None: ...

    def beyond_limit(self, queue: str, min_resources: ResourceVector) -> str | None: ...

    def room_refusal(self, queue: str, request: ResourceVector) -> str | None: ...

    def release_inqueue(self, queue: str, amount: ResourceVector) -> None: ...

    def on_enqueued(self, queue: str, min_resources: ResourceVector | None) -> None: ...

    def allocatable(self, queue: str, request: ResourceVector) -> str | None: ...

    def on_allocated(self, queue: str, request: ResourceVector) -> None: ...

    def on_elastic(self, queue: str, request: ResourceVector) -> None: ...

    def on_released(self, queue: str, request: ResourceVector) -> None: ...

    def preemptive(self, queue: str, request: ResourceVector) -> bool: ...

    def overused(self, queue: str) -> bool: ...

    def victim_judge(self, beneficiary: str) -> VictimJudge: ...

    def queue_order(self) -> list[str]: ...

    def clone(self) -> ShareModel: ...


# ------------------------------------------------------------------------------ vector helpers


def strip_pods(vector: ResourceVector | None) -> ResourceVector:
    """The vector without the `pods` dimension (None -> empty)."""
    if vector is None:
        return ZERO
    if PODS not in vector:
        return vector
    return ResourceVector._of({n: a for n, a in vector.items() if n != PODS})


def effective_capability(capability: ResourceVector | None) -> ResourceVector:
    """spec.capability as enforced: no `pods`, and cpu/memory <= 0 mean unbounded (dropped)."""
    stripped = strip_pods(capability)
    amounts = stripped.view()
    if all(a > 0 or n not in _UNBOUNDED_IF_NOT_POSITIVE for n, a in amounts.items()):
        return stripped
    return ResourceVector._of(
        {n: a for n, a in amounts.items() if not (n in _UNBOUNDED_IF_NOT_POSITIVE and a <= 0)}
    )


def min_by_dimension(vector: ResourceVector, limit: ResourceVector) -> ResourceVector:
    """Per-dimension min over `vector`'s dimensions; a dimension absent from `limit` is unbounded
    (Volcano's MinDimensionResource(limit, Infinity))."""
    if not limit.view():
        return vector
    return ResourceVector._of(
        {n: min(a, limit.get(n)) if n in limit else a for n, a in vector.items()}
    )


def sum_vectors(vectors: Iterable[ResourceVector]) -> ResourceVector:
    return ResourceVector.total(vectors)


def allocated_from_inqueue(
    model: ShareModel, queue: str, inqueue: ResourceVector | None, held: ResourceVector
) -> None:
    """A job whose admitted minimum its queue's `inqueue` counted (`inqueue`) was allocated
    `held`: what it holds of that leaves `inqueue`, so its room is counted once (allocated)."""
    if inqueue is not None:
        model.release_inqueue(queue, inqueue.saturating_sub(inqueue.saturating_sub(held)))


def requested_dims(request: ResourceVector) -> list[str]:
    """Dimensions the request asks for (> 0), `pods` excluded, in report order."""
    return report_sorted(n for n, a in request.items() if a > 0 and n != PODS)


def freed_dims(freed: ResourceVector) -> list[str]:
    """Dimensions a victim gives back (> 0), `pods` excluded."""
    return requested_dims(freed)


def guarantee_kept(
    allocated: ResourceVector, freed: ResourceVector, guarantee: ResourceVector
) -> bool:
    """allocated - freed >= guarantee on every dimension the victim frees.

    Only the freed dimensions are checked: a queue that is below its guarantee in a resource it
    does not use (no GPU jobs yet) may still give back cpu it holds above its cpu guarantee.
    """
    return all(
        allocated.get(d) - freed.get(d) >= guarantee.get(d)
        for d in freed_dims(freed)
        if guarantee.get(d) > 0
    )


def share_of(allocated: ResourceVector, deserved: ResourceVector) -> float:
    """max over deserved's dimensions of allocated/deserved; 0/0 = 0 and x/0 = 1 (Volcano)."""
    share = 0.0
    for name, amount in deserved.items():
        if name == PODS:
            continue
        used = allocated.get(name)
        if amount > 0:
            share = max(share, used / amount)
        elif used > 0:
            share = max(share, 1.0)
    return share


def report_sorted(names: Iterable[str]) -> list[str]:
    return sorted(names, key=lambda n: (_REPORT_ORDER.get(n, len(_REPORT_ORDER)), n))


def fmt(name: str, amount: int) -> str:
    return format_quantity(name, amount)
