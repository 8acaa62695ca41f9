"""The queues' inputs for one scheduling pass, built from the cluster and the gang ledger's
reservations, the same for the extender's pass and for
`vulcan explain` (`queue_inputs`, `queue_pass`). Pure: no I/O.

`QueueBooks.build(snapshot, reserved, open_queues)` turns the cluster into
`plugins.model.queue_share.QueueInput`s and hands them to the session's queue plugin, which builds
its share model (`plugins.framework.policy.Session.open_queues`: `capacity` when the conf enables
it without `proportion`, else `proportion`, Volcano's default). What each queue holds:

- `allocated`: requests of its bound, unfinished pods (the cache's `queue_allocated`) plus the
  ledger's live reservations for its gangs — a reserved slot is capacity the gang holds, and
  counting it keeps one pass from admitting past a queue's share.
- `request`: allocated + what its pending pods request + for each waiting PodGroup the part of
  its `minResources` no pod asks for yet (a Volcano Job's pods only exist after admission, and a
  queue whose only work is such a group must still be given a share).
- `inqueue`: for admitted (Inqueue) groups with `minResources`, what they have not placed yet,
  less what their members gated by the user ask (Volcano's DeductSchGatedResources: gated work
  does not hold the queue's room until its gates are removed). Not counted, while its pods
  ask for it, for a group whose minResources alone exceed what allocate lets its queue hold now
  (its deserved share, for proportion): such a gang cannot be placed whatever its queue's other
  work does, and holding the queue's room for it refused every other gang of the queue for as
  long as the other queues' demand kept its share down (issue 31's soak; Volcano's own open
  issues 4617 and 5006). The session's allocate action dequeues it (back to Pending) in the
  same pass, so the queues' books and the PodGroups' phases agree (`QueuePass.released`); the
  enqueue votes then refuse it until its queue's share can hold its minimum.
- `elastic`: for each group, what its placed members (bound, or holding a reservation) hold
  beyond what it needs to start (`plugins.model.elastic.elastic_resources`): enqueue subtracts it,
  as Volcano's proportion and capacity do, since reclaim and preempt take it back first.

A queue that does not exist (yet) is not invented, except `default`: Volcano's scheduler creates
it at start, so a cluster without it behaves as if it existed (weight 1, reclaimable).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence

from core.api import keys
from core.cache import Snapshot
from core.records import QueueRecord
from core.resources import ResourceVector
from plugins.model.group_contribution import (
    Contribution,
    add_into,
    contribution,
    gated_request,
    members_request,
    take_from,
)
from plugins.model.queue_share import (
    QueueInput,
    ShareModel,
    queue_input,
)

__all__ = [
    "OpenQueues",
    "QueueBooks",
    "QueuePass",
    "gated_request",
    "members_request",
    "queue_inputs",
    "queue_pass",
]

_ZERO = ResourceVector()

# (cluster allocatable, the queues' inputs) -> the share model (the queue plugin's open).
OpenQueues = Callable[[ResourceVector, Sequence[QueueInput]], ShareModel]


def queue_inputs(
    snapshot: Snapshot, reserved: Mapping[str, ResourceVector]
) -> dict[str, QueueInput]:
    """Every queue's inputs, from the cluster and the gang ledger's reservations per group
    (`reserved`; empty where the ledger is not known, as for `vulcan explain` without the
    extender)."""
    return QueueBooks().inputs(snapshot, reserved)[0]


def queue_pass(
    snapshot: Snapshot, reserved: Mapping[str, ResourceVector], open_queues: OpenQueues
) -> QueuePass:
    """The queues as one pass sees them, computed afresh (no memory of earlier passes)."""
    return QueueBooks().build(snapshot, reserved, open_queues)


@dataclasses.dataclass(slots=True)
class QueuePass:
    """The queues as one scheduling pass sees them."""

    model: ShareModel
    inputs: dict[str, QueueInput]
    groups_by_queue: Mapping[str, set[str]]  # queue -> keys of its PodGroups
    phases: Mapping[str, Mapping[str, int]]  # queue -> PodGroup phase -> count
    tentative: set[str] = dataclasses.field(default_factory=set)
    """Pods filter let through since the pass (counted once in the model's allocated)."""
    contended: frozenset[str] = frozenset()
    """Queues that may refuse a pod now: not Open, or holding their deserved share or more."""
    counted_inqueue: Callable[[str], ResourceVector | None] = lambda _key: None
    """What the model's `inqueue` counts for a PodGroup (None: nothing)."""
    released: frozenset[str] = frozenset()
    """Inqueue groups whose minResources alone exceed their queue's share now: not counted in
    its `inqueue` (the module docstring), to be dequeued."""

    def queue_known(self, name: str) -> bool:
        return name in self.inputs


class QueueBooks:
    """What each PodGroup adds to its queue, kept across passes (see the module docstring),
    and the pass's `QueuePass` built from it with the session's queue plugin."""

    def __init__(self) -> None:
        # What each PodGroup adds to its queue (membership, phase count, the unasked part of
        # a waiting group's minResources, the unplaced part of an admitted one), and the
        # per-queue sums of those, kept across passes: a pass refreshes only the groups the
        # cache says were touched (and those holding reservations), so its cost follows what
        # changed, not how many groups wait.
        self._contrib: dict[str, Contribution] = {}
        self._members: dict[str, set[str]] = {}
        self._phases: dict[str, dict[str, int]] = {}
        self._unasked: dict[str, dict[str, int]] = {}
        self._inqueue: dict[str, dict[str, int]] = {}
        self._elastic: dict[str, dict[str, int]] = {}
        self._held_before: set[str] = set()
        # Inqueue groups whose minResources count in `inqueue` and are asked by their pods
        # (the ones a pass may find beyond their queue's share, see the module docstring).
        self._asking: set[str] = set()
        self._released: frozenset[str] = frozenset()  # of those, the last model's released
        self._primed = False
        # Each queue's last input and what it was built from (its record, its bound and pending
        # amounts, its reservations): an unchanged queue none of whose groups changed keeps it.
        self._built: dict[str, tuple[tuple[object, ...], QueueInput]] = {}
        self._touched_queues: set[str] = set()
        # The last share model and what it was built from: every queue's input the same
        # object, and no group whose room a release looks at changed, give the same model.
        self._changed_groups: set[str] = set()
        self._last: _LastBuild | None = None

    def build(
        self,
        snapshot: Snapshot,
        reserved_by_group: Mapping[str, ResourceVector],
        open_queues: OpenQueues,
        touched: Iterable[str] | None = None,
    ) -> QueuePass:
        """The queues for one pass: their inputs, and the share model the session's queue
        plugin builds from them (`open_queues`, Volcano's OnSessionOpen of proportion or
        capacity). `touched`: the groups changed since the previous call (the cache's
        `take_dirty_groups()`); None recomputes everything."""
        inputs, groups_by_queue = self.inputs(snapshot, reserved_by_group, touched)
        values = list(inputs.values())
        total = snapshot.total_allocatable
        changed, self._changed_groups = self._changed_groups, set()
        last = self._last
        if last is not None and last.same(total, open_queues, values, self._asking, changed):
            model, contended = last.model, last.contended
        else:
            model = open_queues(total, values)
            self._released = self._release_beyond_share(snapshot, model)
            contended = frozenset(
                name
                for name, source in inputs.items()
                if not source.open or _at_share(model, name, source)
            )
            self._last = _LastBuild(
                total, open_queues, values, frozenset(self._asking), model, contended
            )
        return QueuePass(
            model,
            inputs,
            groups_by_queue,
            self._phases,
            contended=contended,
            counted_inqueue=self.counted_inqueue,
            released=self._released,
        )

    def inputs(
        self,
        snapshot: Snapshot,
        reserved_by_group: Mapping[str, ResourceVector],
        touched: Iterable[str] | None = None,
    ) -> tuple[dict[str, QueueInput], dict[str, set[str]]]:
        """Each queue's inputs, and each queue's PodGroups."""
        records: dict[str, QueueRecord | None] = dict(snapshot.queues)
        if keys.DEFAULT_QUEUE not in records:
            records[keys.DEFAULT_QUEUE] = None
        if touched is None or not self._primed:
            self._reset()
            redo: Iterable[str] = snapshot.podgroups.keys()
            self._primed = touched is not None
        else:
            redo = set(touched) | self._held_before | reserved_by_group.keys()
        for key in redo:
            self._refresh(snapshot, key, reserved_by_group.get(key))
        self._held_before = set(reserved_by_group)
        reserved: dict[str, ResourceVector] = {}
        for key, held in reserved_by_group.items():
            group = snapshot.podgroups.get(key)
            if group is not None:
                reserved[group.queue] = reserved.get(group.queue, _ZERO) + held
        groups_by_queue = {q: keys_ for q, keys_ in self._members.items() if keys_}
        touched_queues, self._touched_queues = self._touched_queues, set()
        built = self._built
        inputs: dict[str, QueueInput] = {}
        for name, record in records.items():
            bound = snapshot.queue_allocated.get(name, _ZERO)
            pending = snapshot.queue_pending.get(name, _ZERO)
            held = reserved.get(name, _ZERO)
            known = built.get(name)
            if known is not None and name not in touched_queues:
                was_record, was_bound, was_pending, was_held = known[0]
                if (
                    was_record is record
                    and was_bound == bound
                    and was_pending == pending
                    and was_held == held
                ):
                    inputs[name] = known[1]
                    continue
            unasked = self._unasked.get(name)
            inqueue = self._inqueue.get(name)
            elastic = self._elastic.get(name)
            found = queue_input(
                name,
                record,
                allocated=bound + held,
                request=bound + pending + (ResourceVector._of(dict(unasked)) if unasked else _ZERO),
                inqueue=ResourceVector._of(dict(inqueue)) if inqueue else _ZERO,
                elastic=ResourceVector._of(dict(elastic)) if elastic else _ZERO,
                has_groups=bool(groups_by_queue.get(name)),
            )
            if known is not None and known[1] == found:
                found = known[1]  # the same numbers: the same input, for the model's reuse
            inputs[name] = found
            built[name] = ((record, bound, pending, held), found)
        for name in built.keys() - inputs.keys():
            del built[name]
        return inputs, groups_by_queue

    def _reset(self) -> None:
        self._contrib = {}
        self._members = {}
        self._phases = {}
        self._unasked = {}
        self._inqueue = {}
        self._elastic = {}
        self._held_before = set()
        self._asking = set()
        self._released = frozenset()
        self._built = {}
        self._touched_queues = set()
        self._changed_groups = set()
        self._last = None

    def counted_inqueue(self, key: str) -> ResourceVector | None:
        """What the last built model's `inqueue` counts for PodGroup `key` (None: nothing)."""
        found = self._contrib.get(key)
        if found is None or key in self._released:
            return None
        return found.inqueue

    def _release_beyond_share(self, snapshot: Snapshot, model: ShareModel) -> frozenset[str]:
        """An Inqueue group that cannot be allocated at its queue's share however empty the
        queue were does not hold the queue's room (module docstring): its `inqueue` goes.
        Returns the groups released."""
        released = set()
        for key in self._asking:
            contribution = self._contrib[key]
            group = snapshot.podgroups.get(key)
            if contribution.inqueue is None or group is None or group.min_resources is None:
                continue
            if model.beyond_limit(contribution.queue, group.min_resources):
                model.release_inqueue(contribution.queue, contribution.inqueue)
                released.add(key)
        return frozenset(released)

    def _refresh(self, snapshot: Snapshot, key: str, held: ResourceVector | None) -> None:
        group = snapshot.podgroups.get(key)
        new = contribution(snapshot, group, held) if group is not None else None
        old = self._contrib.get(key)
        if new is not None and new == old:
            return  # refreshed (it holds a reservation, or was touched) but adds the same
        self._contrib.pop(key, None)
        self._asking.discard(key)
        self._changed_groups.add(key)
        if old is not None:
            self._touched_queues.add(old.queue)
            members = self._members.get(old.queue)
            if members is not None:
                members.discard(key)
            counts = self._phases.get(old.queue)
            if counts is not None:
                counts[old.phase] -= 1
                if not counts[old.phase]:
                    del counts[old.phase]
            if old.unasked is not None:
                take_from(self._unasked, old.queue, old.unasked)
            if old.inqueue is not None:
                take_from(self._inqueue, old.queue, old.inqueue)
            if old.elastic is not None:
                take_from(self._elastic, old.queue, old.elastic)
        if new is None:
            return
        self._contrib[key] = new
        self._touched_queues.add(new.queue)
        self._members.setdefault(new.queue, set()).add(key)
        counts = self._phases.setdefault(new.queue, {})
        counts[new.phase] = counts.get(new.phase, 0) + 1
        if new.unasked is not None:
            add_into(self._unasked, new.queue, new.unasked)
        if new.inqueue is not None:
            add_into(self._inqueue, new.queue, new.inqueue)
            if new.asked:
                self._asking.add(key)
        if new.elastic is not None:
            add_into(self._elastic, new.queue, new.elastic)


@dataclasses.dataclass(slots=True, frozen=True)
class _LastBuild:
    total: ResourceVector
    open_queues: OpenQueues
    inputs: list[QueueInput]
    asking: frozenset[str]
    model: ShareModel
    contended: frozenset[str]

    def same(
        self,
        total: ResourceVector,
        open_queues: OpenQueues,
        inputs: list[QueueInput],
        asking: set[str],
        changed: set[str],
    ) -> bool:
        """The model built from these would be this one: the same total, plugin and input
        objects, and the groups a release looks at (`_release_beyond_share`) unchanged."""
        return (
            total == self.total
            and open_queues == self.open_queues
            and len(inputs) == len(self.inputs)
            and all(map(operator.is_, inputs, self.inputs))
            and asking == self.asking
            and changed.isdisjoint(asking)
        )


def _at_share(model: ShareModel, name: str, source: QueueInput) -> bool:
    """Some dimension the queue asks for is allocated up to its deserved amount already."""
    share = model.shares.get(name)
    if share is None:
        return False
    return any(
        amount > 0 and source.allocated.get(dim) >= share.deserved.get(dim)
        for dim, amount in source.request.items()
        if dim != "pods" and amount > source.allocated.get(dim)
    )
