"""The room and the victims of one session, as its decisions take them: what the gang ledger
holds per node plus what this session's admissions place, the room being freed by evictions
(Volcano's FutureIdle), and the units reclaim and preempt may still take (none twice: a unit
evicted, or promised to a job, is nobody else's)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from core.resources import ResourceVector
from plugins.framework.pass_input import ExtenderFacts
from plugins.model.victims import VictimUnit, effective_units

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = ["Room", "VictimPool"]

_ZERO = ResourceVector()


class Room:
    """Per node, what is reserved beyond the pods bound there: the ledger's reservations and
    this session's placements (`reserved`), and the same less the room being freed (`future`,
    None when nothing is). `changes` counts what this session took or freed."""

    def __init__(self, snapshot: Snapshot, facts: ExtenderFacts) -> None:
        self.snapshot = snapshot
        ledger = facts.ledger
        self._ledger_by_node: Mapping[str, ResourceVector] = ledger.by_node if ledger else {}
        self._slot_of = ledger.slot_of if ledger is not None else (lambda _pod: None)
        self._reserved: dict[str, ResourceVector] | None = None  # copied on first change
        self._slots: dict[str, str] = {}  # pod -> node placed this session
        self._releasing: dict[str, tuple[str, ResourceVector]] = dict(facts.releasing)
        self.changes = 0

    @property
    def reserved(self) -> Mapping[str, ResourceVector]:
        return self._reserved if self._reserved is not None else self._ledger_by_node

    def future(self) -> dict[str, ResourceVector] | None:
        """`reserved` less the room of pods being freed that still hold it; None when none
        is being freed."""
        if not self._releasing:
            return None
        reserved = dict(self.reserved)
        pods = self.snapshot.pods
        for pod_key, (node, request) in self._releasing.items():
            pod = pods.get(pod_key)
            if pod is None or pod.node != node or not pod.occupies_node:
                continue  # gone already: its room is free in the snapshot
            reserved[node] = reserved.get(node, _ZERO) - request
        return reserved

    def held(self, pod_key: str) -> str | None:
        """The node of a member's reservation (the ledger's, or placed this session)."""
        return self._slots.get(pod_key) or self._slot_of(pod_key)

    def releasing(self) -> Collection[str]:
        return self._releasing.keys()

    def take(self, slots: Mapping[str, str], requests: Mapping[str, ResourceVector]) -> None:
        reserved = self._own()
        for pod_key, node in slots.items():
            reserved[node] = reserved.get(node, _ZERO) + requests[pod_key]
            self._slots[pod_key] = node
        self.changes += 1

    def free(self, units: Iterable[VictimUnit]) -> None:
        """The units' pods are being evicted: their room is being freed."""
        pods = self.snapshot.pods
        for unit in units:
            for pod_key in unit.pods:
                pod = pods.get(pod_key)
                if pod is not None and pod.node is not None:
                    self._releasing[pod_key] = (pod.node, pod.requests)
        self.changes += 1

    def _own(self) -> dict[str, ResourceVector]:
        if self._reserved is None:
            self._reserved = dict(self._ledger_by_node)
        return self._reserved


class VictimPool:
    """The units reclaim and preempt may take, queue by queue (built when a queue's are first
    asked for: `units_of`), less those taken this session and those promised to another
    job."""

    def __init__(
        self,
        units_of: Callable[[str], list[VictimUnit]],
        queues: Callable[[], Iterable[str]],
        promised: Mapping[str, Collection[str]],
    ) -> None:
        self._units_of = units_of
        self._queues = queues
        self._by_queue: dict[str, list[VictimUnit]] = {}
        # pod -> the job it is promised to (`plugins.actions.promise`)
        self._promised_to = {pod: job for job, pods in promised.items() for pod in pods}
        self._taken: set[str] = set()
        self.changes = 0

    def of_queue(self, queue: str) -> list[VictimUnit]:
        found = self._by_queue.get(queue)
        if found is None:
            found = self._by_queue[queue] = self._units_of(queue)
        return found

    def for_job(self, key: str, queue: str | None) -> list[VictimUnit]:
        """What may be evicted for job `key` of `queue`'s units (None: every queue's): not its
        own, not taken, not another's promise."""
        names = [queue] if queue is not None else sorted(self._queues())
        promised, taken = self._promised_to, self._taken
        found = []
        for name in names:
            for unit in self.of_queue(name):
                if unit.group == key:
                    continue
                if (taken or promised) and any(
                    p in taken or promised.get(p, key) != key for p in unit.pods
                ):
                    continue
                found.append(unit)
        return found

    def promised_to(self, pod: str) -> str | None:
        """The job `pod` is promised to, if any."""
        return self._promised_to.get(pod)

    def take(self, units: Iterable[VictimUnit], job: str | None = None) -> None:
        """`units` go (evicted) or are promised to `job`: no other job may count on them."""
        for unit in effective_units(units):
            for pod in unit.pods:
                if job is None:
                    self._taken.add(pod)
                else:
                    self._promised_to[pod] = job
        self.changes += 1
