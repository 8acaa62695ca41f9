"""Volcano's `capacity` plugin: per-queue deserved amounts, flat or hierarchical (the alternative
to `proportion`).

Flat:
    realCapability = (total - Σ guarantee of ALL queues)⁺ + own guarantee, ∧ capability
    deserved       = spec.deserved ∧ realCapability, then ∨ guarantee
    share          = max_dim allocated / deserved; a queue without spec.deserved is best-effort:
                     share fixed at 1, ordered after queues with a deserved amount on equal share

Hierarchical (`spec.parent`, default `root`):
    root           capability ∞ unless given; realCapability = total ∧ capability;
                   deserved and guarantee = Σ of its children
    child          capability dimensions it does not set are inherited from its parent;
                   realCapability = (parent.realCapability - Σ guarantee of the parent's
                   children)⁺ + own guarantee, ∧ own capability
    usage          allocated / request / inqueue / elastic of a parent = own + Σ descendants
    jobs           only in leaf queues: a parent queue rejects enqueue and allocation
    checks         enqueue and allocate check the queue and every ancestor up to root

Hooks:
    JobEnqueueable : minResources + allocated + inqueue - elastic <= realCapability (each level)
    Allocatable    : Open, leaf, allocated + request <= realCapability (each level)
    Preemptive     : Allocatable, and some requested dimension of allocated + request is still
                     <= deserved (a queue at or past its deserved everywhere reclaims nothing)
    Reclaimable    : victim's queue keeps >= guarantee in what the victim frees, and either its
                     deserved shares no dimension with the victim or it holds more than deserved
                     in a dimension the victim frees. Hierarchical: the same test at every
                     ancestor of the victim's queue below the lowest ancestor it shares with the
                     reclaiming queue (moving resources inside a subtree leaves that subtree's
                     total unchanged, so only the levels that lose count).
    Overused       : none. The capacity plugin lets a queue borrow idle resources up to its
                     realCapability (Volcano's capacity plugin has no Overused hook);
                     allocatable() is the limit, and `QueueShare.checks_overuse` is False.

A queue whose parent does not exist (or whose parents form a cycle) hangs under root.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.resources import ResourceVector
from plugins.model.job_order import queue_order_key
from plugins.model.queue_share import (
    QueueInput,
    QueueShare,
    effective_capability,
    freed_dims,
    guarantee_kept,
    min_by_dimension,
    requested_dims,
    strip_pods,
    sum_vectors,
)
from plugins.model.share_model import QueueShares

__all__ = ["ROOT", "CapacityShares", "capacity_shares"]

ROOT = "root"


def _deserved(
    spec: ResourceVector | None, real_capability: ResourceVector, guarantee: ResourceVector
) -> ResourceVector:
    # Clamp with absent = 0: realCapability has every resource the cluster has, so a deserved
    # amount of a resource the cluster lacks is worth nothing.
    clamped = ResourceVector(
        {n: min(a, real_capability.get(n)) for n, a in strip_pods(spec).items()}
    )
    return clamped.elementwise_max(guarantee)


def _usage(queue: QueueInput) -> dict[str, ResourceVector]:
    return {
        "allocated": strip_pods(queue.allocated),
        "request": strip_pods(queue.request),
        "inqueue": strip_pods(queue.inqueue),
        "elastic": strip_pods(queue.elastic),
    }


def _share(queue: QueueInput, **vectors: ResourceVector) -> QueueShare:
    return QueueShare(
        name=queue.name,
        best_effort=strip_pods(queue.deserved).is_zero(),
        checks_overuse=False,
        **vectors,
        **_usage(queue),
    )


def capacity_shares(
    total: ResourceVector, queues: Sequence[QueueInput], *, hierarchical: bool = False
) -> CapacityShares:
    """Deserved amounts and shares of `queues` over the cluster's `total` allocatable."""
    total = strip_pods(total)
    if hierarchical:
        return _hierarchical(total, queues)
    total_guarantee = sum_vectors(strip_pods(q.guarantee) for q in queues)
    unguaranteed = total.saturating_sub(total_guarantee)
    shares: dict[str, QueueShare] = {}
    for queue in queues:
        guarantee = strip_pods(queue.guarantee)
        capability = effective_capability(queue.capability)
        real_capability = min_by_dimension(unguaranteed + guarantee, capability)
        shares[queue.name] = _share(
            queue,
            deserved=_deserved(queue.deserved, real_capability, guarantee),
            real_capability=real_capability,
            capability=capability,
            guarantee=guarantee,
        )
    return CapacityShares(queues, shares, parents={})


def _parents(queues: dict[str, QueueInput]) -> dict[str, str]:
    """name -> parent for every queue but root; unknown parents and cycles go to root."""
    parents: dict[str, str] = {}
    for name, queue in queues.items():
        if name != ROOT:
            parent = queue.parent
            parents[name] = parent if parent is not None and parent in queues else ROOT
    for name in list(parents):
        seen = {name}
        node = parents[name]
        while node != ROOT:
            if node in seen:
                parents[name] = ROOT  # a cycle: cut it here
                break
            seen.add(node)
            node = parents[node]
    return parents


def _hierarchical(total: ResourceVector, queues: Sequence[QueueInput]) -> CapacityShares:
    specs = {q.name: q for q in queues}
    if ROOT not in specs:
        specs[ROOT] = QueueInput(name=ROOT, reclaimable=False)
    parents = _parents(specs)
    children: dict[str, list[str]] = {name: [] for name in specs}
    for name, parent in parents.items():
        children[parent].append(name)

    shares: dict[str, QueueShare] = {}
    root_capability = effective_capability(specs[ROOT].capability)
    shares[ROOT] = _share(
        specs[ROOT],
        real_capability=min_by_dimension(total, root_capability),
        capability=root_capability,
    )
    pending = [ROOT]  # top-down: a child needs its parent's realCapability and capability
    order: list[str] = []
    while pending:
        parent = pending.pop()
        order.append(parent)
        up = shares[parent]
        kids = sorted(children[parent])
        siblings_guarantee = sum_vectors(strip_pods(specs[k].guarantee) for k in kids)
        for kid in kids:
            spec = specs[kid]
            guarantee = strip_pods(spec.guarantee)
            own = effective_capability(spec.capability)
            capability = ResourceVector({**up.capability.as_dict(), **own.as_dict()})
            base = up.real_capability.saturating_sub(siblings_guarantee) + guarantee
            real_capability = min_by_dimension(base, capability)
            shares[kid] = _share(
                spec,
                deserved=_deserved(spec.deserved, real_capability, guarantee),
                real_capability=real_capability,
                capability=capability,
                guarantee=guarantee,
            )
            pending.append(kid)

    for name in reversed(order):  # bottom-up: parents sum their children's usage
        share = shares[name]
        for kid in children[name]:
            child = shares[kid]
            share.allocated += child.allocated
            share.request += child.request
            share.inqueue += child.inqueue
            share.elastic += child.elastic
    root = shares[ROOT]
    root.deserved = sum_vectors(shares[k].deserved for k in children[ROOT])
    root.guarantee = sum_vectors(shares[k].guarantee for k in children[ROOT])
    root.best_effort = False
    return CapacityShares(list(specs.values()), shares, parents=parents, children=children)


class CapacityShares(QueueShares):
    """The capacity plugin's hooks over the shares computed by `capacity_shares`."""

    _limit_what = "capability"
    _limit_name = "may hold (realCapability)"

    def __init__(
        self,
        queues: Sequence[QueueInput],
        shares: dict[str, QueueShare],
        *,
        parents: dict[str, str],
        children: dict[str, list[str]] | None = None,
    ) -> None:
        super().__init__(queues, shares)
        self.parents = parents  # empty when flat
        self.children = children or {}

    @property
    def hierarchical(self) -> bool:
        return bool(self.children)

    def chain(self, queue: str) -> tuple[str, ...]:
        chain = [queue]
        while chain[-1] in self.parents:
            chain.append(self.parents[chain[-1]])
        return tuple(chain)

    def is_leaf(self, queue: str) -> bool:
        return not self.children.get(queue)

    def _reject(self, queue: str) -> str | None:
        reason = super()._reject(queue)
        if reason is None and not self.is_leaf(queue):
            return f"queue {queue} is not a leaf queue: jobs must be in leaf queues"
        return reason

    def _limit(self, share: QueueShare) -> ResourceVector:
        return share.real_capability

    def preemptive(self, queue: str, request: ResourceVector) -> bool:
        if self.allocatable(queue, request) is not None:
            return False
        share = self.shares[queue]
        future = share.allocated + strip_pods(request)
        return any(
            n in share.deserved and future.get(n) <= share.deserved.get(n)
            for n in requested_dims(strip_pods(request))
        )

    def victim_judge(self, beneficiary: str) -> _CapacityJudge:
        return _CapacityJudge(self, beneficiary)

    def queue_order(self) -> list[str]:
        return sorted(self.shares, key=lambda n: queue_order_key(self.shares[n], self.queues[n]))


class _CapacityJudge:
    """Reclaimable walk for capacity (see the module docstring); keeps a running allocated per
    queue, subtracting each taken victim from its queue and every ancestor."""

    def __init__(self, model: CapacityShares, beneficiary: str) -> None:
        self._model = model
        self._allocated = {n: s.allocated for n, s in model.shares.items()}
        self._beneficiary_chain = (
            set(model.chain(beneficiary)) if beneficiary in model.shares else set()
        )

    def take(self, queue: str, freed: ResourceVector) -> bool:
        model = self._model
        if queue not in model.shares:
            return False
        freed = strip_pods(freed)
        dims = freed_dims(freed)
        if not dims:
            return False
        chain = model.chain(queue)
        judged = [n for n in chain if n not in self._beneficiary_chain]
        for name in judged:
            share = model.shares[name]
            allocated = self._allocated[name]
            if not guarantee_kept(allocated, freed, share.guarantee):
                return False
            # A dimension absent from deserved counts as 0, so "deserved shares no dimension
            # with the victim" is the case where everything the victim frees is over.
            if not any(allocated.get(d) > share.deserved.get(d) for d in dims):
                return False
        for name in chain:
            self._allocated[name] = self._allocated[name].saturating_sub(freed)
        return True
