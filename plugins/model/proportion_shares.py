"""Volcano's `proportion` plugin: weight-based fair share of the cluster.

Per pass, for the queues that have jobs:

    realCapability = (total - Σ guarantee of ALL queues)⁺ + own guarantee, ∧ capability
    deserved       = water-filling of `total` by weight, each queue capped by realCapability and
                     by its request, floored at its guarantee (below)
    share          = max_dim allocated / deserved
    Overused      <=> deserved <= allocated in every dimension
    Allocatable   <=> Open and allocated + request <= deserved (requested dimensions)
    Preemptive    <=> the same check, for a pod that would be placed by reclaiming
    Reclaimable   : a victim is taken while its queue's running allocated is not <= deserved
    JobEnqueueable : minResources + allocated + inqueue - elastic <= realCapability

Water-filling (Volcano's loop): every unmet queue adds `remaining × weight / Σ unmet weights`
to its deserved, then deserved = max(min(deserved, realCapability, request), guarantee); a queue
is met once request <= deserved or its deserved stopped changing; `remaining` loses what the
queues gained (and gets back what they lost, e.g. a cap) and the loop ends when nothing remains
or nothing changed. Each round uses the `remaining` of the round's start, so the result does not
depend on the order of the queues.

Numbers: the loop runs on floats like Volcano's float64, comparing with Volcano's tolerance
(0.1 unit, relaxed to 1e-9 relative for byte amounts so large that 0.1 is below float
precision). The result is floored to ints (a value within that tolerance of an integer is
snapped to it first), so Σ deserved never exceeds the total: 10 cpu over three equal queues is
3333m each, and the 1m left over is deserved by no one.

Queues without jobs take no part in the division (deserved 0), but their guarantee is still
held back from everyone else's realCapability. `spec.parent` is ignored (proportion is flat).
Weights below 1 count as 1 (the admission webhook turns 0 into 1).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.resources import ResourceVector
from plugins.model.job_order import queue_order_key
from plugins.model.queue_parts import QueueParts, computed_parts
from plugins.model.queue_share import (
    QueueInput,
    QueueShare,
    effective_capability,
    guarantee_kept,
    min_by_dimension,
    requested_dims,
    strip_pods,
    sum_vectors,
)
from plugins.model.share_model import QueueShares

__all__ = ["ProportionShares", "proportion_shares"]

_ABS_TOLERANCE = 0.1  # Volcano's minResource
_REL_TOLERANCE = 1e-9


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(_ABS_TOLERANCE, _REL_TOLERANCE * max(abs(a), abs(b)))


def _le(a: float, b: float) -> bool:
    return a <= b or _close(a, b)


def _to_int(x: float) -> int:
    if x.is_integer():
        return int(x)
    nearest = round(x)
    return int(nearest) if _close(x, nearest) else math.floor(x)


@dataclass(slots=True, frozen=True)
class _Claim:
    name: str
    weight: int
    real_capability: ResourceVector
    request: ResourceVector
    guarantee: ResourceVector
    # Hashed once: the water-fill's cache key hashes every claim on every pass.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = (self.name, self.weight, self.real_capability, self.request, self.guarantee)
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash


@dataclass(slots=True, frozen=True)
class _Part:
    """What proportion makes of one queue alone, given the cluster's unguaranteed amount."""

    real_capability: ResourceVector
    capability: ResourceVector
    guarantee: ResourceVector
    allocated: ResourceVector
    request: ResourceVector
    inqueue: ResourceVector
    elastic: ResourceVector
    claim: _Claim | None  # None: the queue has no jobs and takes no part in the division


def _part(queue: QueueInput, unguaranteed: ResourceVector) -> _Part:
    guarantee = strip_pods(queue.guarantee)
    capability = effective_capability(queue.capability)
    own = unguaranteed + guarantee if guarantee.view() else unguaranteed
    real_capability = min_by_dimension(own, capability)
    request = strip_pods(queue.request)
    claim = (
        _Claim(queue.name, max(1, queue.weight), real_capability, request, guarantee)
        if queue.has_jobs
        else None
    )
    return _Part(
        real_capability,
        capability,
        guarantee,
        strip_pods(queue.allocated),
        request,
        strip_pods(queue.inqueue),
        strip_pods(queue.elastic),
        claim,
    )


def water_fill(total: ResourceVector, claims: Sequence[_Claim]) -> dict[str, dict[str, float]]:
    """Volcano's deserved loop; returns float deserved per queue name (see module docstring)."""
    remaining = {n: float(a) for n, a in total.items()}
    deserved: dict[str, dict[str, float]] = {c.name: {} for c in claims}
    # Each claim's amounts as floats once, not once a round; the met ones leave the list.
    unmet = [
        (
            c.name,
            c.weight,
            {n: float(a) for n, a in c.real_capability.items()},
            {n: float(a) for n, a in c.request.items()},
            [(n, float(a)) for n, a in c.guarantee.items()],
        )
        for c in claims
    ]
    # Every round either meets a queue or moves `remaining`; the cap only guards float noise.
    for _ in range(4 * len(claims) + 8):
        total_weight = sum(claim[1] for claim in unmet)
        if total_weight == 0:
            break
        before = dict(remaining)
        increased: dict[str, float] = {}
        decreased: dict[str, float] = {}
        still: list[Any] = []
        for claim in unmet:
            name, weight, capability, request, guarantee = claim
            old = deserved[name]
            new: dict[str, float] = {}
            # `new` gets every name of `old` (and of `before`), so it alone lists both.
            for dim in old.keys() | before.keys() if old else before:
                value = old.get(dim, 0.0) + before.get(dim, 0.0) * weight / total_weight
                if dim in capability:  # absent = unbounded (Infinity default)
                    value = min(value, capability[dim])
                new[dim] = min(value, request.get(dim, 0.0))  # absent = 0 (Zero)
            for dim, floor in guarantee:
                new[dim] = max(new.get(dim, 0.0), floor)
            satisfied = all(_le(a, new.get(dim, 0.0)) for dim, a in request.items())
            if not (satisfied or all(_close(v, old.get(dim, 0.0)) for dim, v in new.items())):
                still.append(claim)
            for dim, value in new.items():
                diff = value - old.get(dim, 0.0)
                if diff > 0:
                    increased[dim] = increased.get(dim, 0.0) + diff
                elif diff < 0:
                    decreased[dim] = decreased.get(dim, 0.0) - diff
            deserved[name] = new
        unmet = still
        for dim in before.keys() | increased.keys() | decreased.keys():
            left = before.get(dim, 0.0) - increased.get(dim, 0.0) + decreased.get(dim, 0.0)
            remaining[dim] = max(0.0, left)
        empty = all(v < _ABS_TOLERANCE for v in remaining.values())
        stopped = all(_close(remaining[n], before.get(n, 0.0)) for n in remaining)
        if empty or stopped:
            break
    return deserved


def proportion_shares(
    total: ResourceVector, queues: Sequence[QueueInput], parts: QueueParts = computed_parts
) -> ProportionShares:
    """Deserved amounts and shares of `queues` over the cluster's `total` allocatable. Each
    queue's own part comes through `parts` (the memo may hand back an unchanged queue's)."""
    total = strip_pods(total)
    total_guarantee = sum_vectors(strip_pods(q.guarantee) for q in queues)
    unguaranteed = total.saturating_sub(total_guarantee)
    shares: dict[str, QueueShare] = {}
    claims: list[_Claim] = []
    for queue, part in zip(queues, parts(_part, queues, unguaranteed), strict=True):
        shares[queue.name] = QueueShare(
            name=queue.name,
            real_capability=part.real_capability,
            capability=part.capability,
            guarantee=part.guarantee,
            allocated=part.allocated,
            request=part.request,
            inqueue=part.inqueue,
            elastic=part.elastic,
        )
        if part.claim is not None:
            claims.append(part.claim)
    for name, deserved in deserved_amounts(total, tuple(claims)).items():
        shares[name].deserved = deserved
    return ProportionShares(queues, shares)


@functools.lru_cache(maxsize=4)
def deserved_amounts(
    total: ResourceVector, claims: tuple[_Claim, ...]
) -> dict[str, ResourceVector]:
    """The water-filled deserved amounts, floored to ints. A pure function of the claims,
    which most passes leave as they were (a bind moves a queue's allocated, not what it
    asks): its last answers are kept, read-only."""
    return {
        name: ResourceVector._of({n: _to_int(v) for n, v in amounts.items()})
        for name, amounts in water_fill(total, claims).items()
    }


class ProportionShares(QueueShares):
    """The proportion plugin's hooks over the shares computed by `proportion_shares`."""

    def preemptive(self, queue: str, request: ResourceVector) -> bool:
        """May `queue` reclaim for `request`: Open and allocated + request <= deserved on the
        requested dimensions (Volcano's queueAllocatable). Open is required too: a closed
        queue's pod could not be allocated on the room reclaimed for it."""
        return self.allocatable(queue, request) is None

    def victim_judge(self, beneficiary: str) -> _ProportionJudge:
        return _ProportionJudge(self)

    def queue_order(self) -> list[str]:
        return sorted(self.shares, key=lambda n: queue_order_key(self.shares[n], self.queues[n]))


class _ProportionJudge:
    """Reclaimable walk: take a victim while its queue's running allocated is not <= deserved
    (checked before subtracting, as Volcano does, so a queue 1 cpu over may lose an 8-cpu pod),
    and never let it drop below its guarantee in a dimension the victim frees (the guarantee is
    reserved for the queue; Volcano's proportion leaves this to deserved >= guarantee, which a
    single large victim can overshoot)."""

    def __init__(self, model: ProportionShares) -> None:
        self._shares = model.shares
        self._allocated = {n: s.allocated for n, s in model.shares.items()}

    def take(self, queue: str, freed: ResourceVector) -> bool:
        share = self._shares.get(queue)
        if share is None:
            return False
        allocated = self._allocated[queue]
        freed = strip_pods(freed)
        if allocated.less_equal(share.deserved, "zero"):
            return False  # not over its deserved share: nothing to reclaim from it
        if not requested_dims(freed) or not guarantee_kept(allocated, freed, share.guarantee):
            return False
        self._allocated[queue] = allocated.saturating_sub(freed)
        return True
