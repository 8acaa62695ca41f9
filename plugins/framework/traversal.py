"""The order a scheduling cycle visits the PodGroups in (Volcano's enqueue and allocate
traversal): queues in the session's QueueOrder, each queue's jobs in its JobOrder, sorted only
when the cycle looks at that queue, and each job's order key kept until its group changes (the
cache's group versions). Also the job as the session's plugins see it (`job_input`), the numbers
of a queue a waiting group's decision reads (`queue_numbers`) and the overcommit rule's `used`
(`cluster_used`). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from core.api import keys
from core.records import PodGroupRecord
from core.resources import ResourceVector
from plugins.framework.extension_points import PassState
from plugins.framework.policy import Policy
from plugins.model import gang as gangs
from plugins.model.job_order import JobInput
from plugins.model.queue_inputs import QueuePass, members_request

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot


def job_input(snapshot: Snapshot, group: PodGroupRecord) -> JobInput:
    """The job (PodGroup) as the session's plugins see it."""
    members = snapshot.pods_by_group.get(group.key, ())
    priority = max(
        (snapshot.pods[k].priority for k in members if k in snapshot.pods),
        default=group_priority(snapshot, group),
    )
    return JobInput(
        key=group.key,
        queue=group.queue,
        priority=priority,
        ready=group.phase in ("Running", "Completed"),
        allocated=members_request(snapshot, group, placed=True),
        creation=group.created,
        uid=group.uid,
        sla_waiting_seconds=gangs.annotation_duration(
            group, keys.SLA_WAITING_TIME, keys.SLA_WAITING_TIME_LEGACY
        ),
        min_resources=group.min_resources,
    )


def group_priority(snapshot: Snapshot, group: PodGroupRecord) -> int:
    """The PodGroup's own priority, as Volcano's scheduler cache reads it: the value of the
    PriorityClass its `priorityClassName` names, the globalDefault class's when it names none
    (or one that does not exist), else 0. A job with pods takes its members' priority (the API
    server resolved the same class into each pod's spec.priority)."""
    classes = snapshot.priority_classes
    value = classes.get(group.priority_class) if group.priority_class else None
    if value is None:
        value = classes.get("", 0)
    return value


def cluster_used(
    snapshot: Snapshot, reserved_by_node: Mapping[str, ResourceVector]
) -> dict[str, int]:
    """What the overcommit rule counts as taken: admitted groups' minResources (Inqueue and
    beyond, Volcano's `inqueue` + allocated), approximated by the requests of bound pods plus
    the gang ledger's reservations."""
    used = snapshot.total_requested.as_dict()
    for reserved in reserved_by_node.values():
        for name, amount in reserved.items():
            used[name] = used.get(name, 0) + amount
    return used


def queue_numbers(queue_pass: QueuePass | PassState | None, name: str) -> tuple[Any, ...] | None:
    """What a waiting group's queue checks read of its queue, comparable across passes."""
    if queue_pass is None or queue_pass.model is None:
        return None
    share = queue_pass.model.shares.get(name)  # type: ignore[attr-defined]
    source = queue_pass.inputs.get(name)
    if share is None or source is None:
        return None
    return (
        share.deserved,
        share.allocated,
        share.inqueue,
        share.elastic,
        share.real_capability,
        share.capability,
        source.open,
    )


class AdmissionOrder:
    def __init__(self, versions: Mapping[str, int], session: Policy) -> None:
        """`versions`: each group's version (the cache's `group_versions`, read live)."""
        self.versions = versions
        self.session = session
        # group -> (its cache version, the cluster total, its job-order key)
        self._keys: dict[str, tuple[int | None, ResourceVector, tuple[Any, ...]]] = {}

    def forget(self, key: str) -> None:
        self._keys.pop(key, None)

    def queues(
        self, snapshot: Snapshot, queue_pass: QueuePass, state: PassState
    ) -> Iterator[tuple[str, list[PodGroupRecord]]]:
        """Queues in the session's queue order, each with its jobs in job order. Every group
        is visited — a head-of-line gang that cannot be admitted never stops the ones behind
        it, in its queue or in another (Volcano's `traverse`); the order decides who gets
        contested room first."""
        total = snapshot.total_allocatable
        podgroups = snapshot.podgroups
        for queue in self.session.queue_order(state, queue_pass.groups_by_queue):
            members = queue_pass.groups_by_queue.get(queue)
            if not members:
                continue
            yield (
                queue,
                _LazyOrder(members, podgroups, lambda g: self._key(snapshot, g, total, state)),
            )

    def _key(
        self, snapshot: Snapshot, group: PodGroupRecord, total: ResourceVector, state: PassState
    ) -> tuple[Any, ...]:
        """The group's job-order key, recomputed only when the group (or the cluster total its
        DRF share divides by) changed."""
        version = self.versions.get(group.key)
        cached = self._keys.get(group.key)
        if cached is not None and cached[0] == version and cached[1] == total:
            return cached[2]
        order = self.session.job_order_key(job_input(snapshot, group), state)
        self._keys[group.key] = (version, total, order)
        return order


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


class _LazyOrder(list):  # type: ignore[type-arg]
    """A queue's groups, sorted into job order the first time they are iterated (a pass that
    skips the queue never pays for the sort)."""

    def __init__(
        self,
        members: Iterable[str],
        podgroups: Mapping[str, PodGroupRecord],
        key: Callable[[PodGroupRecord], Any],
    ) -> None:
        super().__init__()
        self._members: Iterable[str] | None = members
        self._podgroups = podgroups
        self._key = key

    def __iter__(self) -> Iterator[PodGroupRecord]:
        if self._members is not None:
            podgroups = self._podgroups
            groups = [podgroups[k] for k in self._members if k in podgroups]
            ranked = sorted(((self._key(g), g) for g in groups), key=_first)
            self.extend(g for _, g in ranked)
            self._members = None
        return super().__iter__()
