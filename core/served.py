"""Which pods kube-scheduler sends to vulcan: the pods vulcan schedules.

A kube-scheduler calls its extenders for the pods of its own profiles (their `schedulerName`),
and an extender entry with `managedResources` only for the pods that request one of them. Only
such pods are vulcan's to take: reclaim and preempt never evict another scheduler's pods, as
Volcano's actions take victims only from the jobs of its own scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.records import PodRecord


@dataclass(frozen=True, slots=True)
class ServedPods:
    """`names`: the schedulerNames of the kube-scheduler profiles that call the extender;
    `marker`: the filter entry's managedResources marker, when it has one (the
    cluster-scheduler install): then only the pods that carry it reach vulcan. `names` None:
    every pod (a harness that plays kube-scheduler for all of them)."""

    names: frozenset[str] | None
    marker: str | None = None

    @classmethod
    def of(cls, names: Iterable[str], marker: str | None = None) -> ServedPods:
        return cls(frozenset(names), marker or None)

    @classmethod
    def every(cls) -> ServedPods:
        return cls(None)

    def __call__(self, pod: PodRecord) -> bool:
        if self.marker is not None:
            return self.marker in pod.markers
        return self.names is None or pod.scheduler_name in self.names

    def describe(self) -> str:
        """Whom vulcan serves, in words (for reasons and logs)."""
        if self.marker is not None:
            return f"pods that carry {self.marker}"
        if self.names is None:
            return "every pod"
        return "pods of schedulerName " + ", ".join(sorted(self.names))
