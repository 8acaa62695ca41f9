"""What one scheduling pass reads: the cluster cache's snapshot and the extender's facts, all
read-only (the pass never awaits, so nothing changes under it, and it changes nothing: its
decisions are applied by the extender after the session closes)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from core.records import PodRecord
from core.resources import ResourceVector
from core.served import ServedPods

if TYPE_CHECKING:  # annotations only: core.cache pulls in the informers and asyncio
    from core.cache import Snapshot

__all__ = ["ExtenderFacts", "LedgerView", "PassInput", "QueueWait", "Settings"]


class LedgerView(Protocol):
    """The gang ledger as a pass reads it: the room admitted gangs hold, not bound yet."""

    @property
    def by_node(self) -> Mapping[str, ResourceVector]: ...

    def by_group(self) -> Mapping[str, ResourceVector]: ...

    def slot_of(self, pod_key: str) -> str | None: ...

    def held_by(self, group: str) -> ResourceVector | None: ...

    def pods(self) -> Collection[str]: ...


@dataclass(frozen=True, slots=True)
class QueueWait:
    """A queue's starvation as the last pass left it (`plugins.actions.starvation`): since when
    it has had a starving gang, what its gangs waiting for its share ask, and which gang it
    drains for."""

    since: float
    waiters: Mapping[str, ResourceVector] = field(default_factory=dict)
    target: str | None = None  # its starving gang


@dataclass(frozen=True, slots=True)
class ExtenderFacts:
    """The extender's state a pass reads: what is admitted and where its room is, the room
    being freed by evictions, the gangs backing off after a timeout (why, and until when), the
    jobs enqueued on the promise of evicting units (those units are taken), the queues'
    starvation, the elastic members waiting for a slot, and the admitted gangs whose status
    follows more than their own inputs (members waiting for room being freed or to be let
    through a gate)."""

    admitted: Collection[str] = frozenset()
    ledger: LedgerView | None = None
    releasing: Mapping[str, tuple[str, ResourceVector]] = field(default_factory=dict)
    backoff: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    promised: Mapping[str, Collection[str]] = field(default_factory=dict)  # job -> pods
    promised_version: int = 0  # moves whenever `promised` does
    starving: Mapping[str, QueueWait] = field(default_factory=dict)
    elastic_waiting: Mapping[str, Collection[str]] = field(default_factory=dict)
    unsettled: Collection[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Settings:
    """How the extender is installed, as policy reads it: which pods kube-scheduler sends it
    (`served`: the only ones reclaim and preempt may take), the bind entry's marker (a gang
    member without it would be bound past the barrier), the queue of a pod outside any group,
    and how a gang is laid out (`prefer`)."""

    served: ServedPods = field(default_factory=ServedPods.every)
    bind_marker: str | None = None
    queue_of: Callable[[PodRecord], str | None] = lambda pod: None
    prefer: str = "binpack"


@dataclass(frozen=True, slots=True)
class PassInput:
    snapshot: Snapshot
    facts: ExtenderFacts
    settings: Settings
    now: float  # wall clock, seconds
