"""Finds the gangs stranded half placed (`plugins.model.stranded`): it keeps the gangs with a
member being deleted on a node, and looks at only those, once a pass, until that member is
gone. The evictor evicts what it finds; an eviction refused (a disruption budget) is asked again
after a backoff, not left for good."""

from __future__ import annotations

import time
from collections.abc import Callable

from core.cache import ClusterCache
from core.kube.backoff import Backoff
from core.records import PodGroupRecord, PodRecord
from plugins.model.stranded import Stranded, stranded_gang

# A refused eviction of a stranded gang's survivors is asked again after this, doubling per
# refusal up to the cap (a budget frees as its other pods become ready again: minutes).
REFUSED_RETRY = 10.0
REFUSED_RETRY_MAX = 300.0


class StrandedWatch:
    def __init__(
        self, cache: ClusterCache, after: float, clock: Callable[[], float] = time.time
    ) -> None:
        """`after`: how long past its grace period a member may stay terminating (0: never
        act); `clock`: POSIX seconds, the deletion timestamps' scale."""
        self.cache = cache
        self.after = after
        self.clock = clock
        self.watched: set[str] = set()
        # gang -> the stuck members it was acted on for: once per stuck set (an eviction a
        # disruption budget refuses is not asked again every pass, but after `refused`'s delay).
        self.acted: dict[str, tuple[str, ...]] = {}
        self.retry_at: dict[str, float] = {}  # gang -> when its refused eviction is asked again
        self.refusals: dict[str, Backoff] = {}  # gang -> the backoff of its refused evictions

    def pod_changed(self, pod: PodRecord | None) -> None:
        if self.after <= 0 or pod is None or not pod.deleting or pod.node is None:
            return
        if pod.group is not None:
            self.watched.add(pod.group)

    def due(self) -> list[tuple[PodGroupRecord, Stranded]]:
        """The watched gangs stranded now; a gang no member of which is being deleted on a
        node any more is forgotten."""
        if not self.watched:
            return []
        now = self.clock()
        found: list[tuple[PodGroupRecord, Stranded]] = []
        pods = self.cache.pods
        for key in sorted(self.watched):
            members = [p for k in self.cache.pods_by_group.get(key, ()) if (p := pods.get(k))]
            group = self.cache.podgroups.get(key)
            if group is None or not any(p.deleting and p.node is not None for p in members):
                self.watched.discard(key)
                self.acted.pop(key, None)
                self.retry_at.pop(key, None)
                self.refusals.pop(key, None)
                continue
            stranded = stranded_gang(group, members, self.cache.nodes, now, self.after)
            if stranded is None:
                continue
            retry = self.retry_at.get(key)
            if self.acted.get(key) != stranded.stuck or (retry is not None and now >= retry):
                self.acted[key] = stranded.stuck
                self.retry_at.pop(key, None)
                found.append((group, stranded))
        return found

    def refused(self, group_key: str) -> float | None:
        """An eviction of the gang's survivors was refused: the seconds after which `due`
        names the gang again (None when a retry is already set, by another survivor's
        refusal of the same round)."""
        if group_key in self.retry_at or group_key not in self.watched:
            return None
        backoff = self.refusals.get(group_key)
        if backoff is None:
            backoff = Backoff(REFUSED_RETRY, REFUSED_RETRY_MAX, jitter=0.0)
            self.refusals[group_key] = backoff
        delay = backoff.next_delay()
        self.retry_at[group_key] = self.clock() + delay
        return delay
