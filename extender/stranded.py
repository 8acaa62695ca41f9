"""Finds the gangs stranded half placed (`plugins.model.stranded`): it keeps the gangs with a
member being deleted on a node, and looks at only those, once a pass, until that member is
gone. The evictor evicts what it finds."""

from __future__ import annotations

import time
from collections.abc import Callable

from core.cache import ClusterCache
from core.records import PodGroupRecord, PodRecord
from plugins.model.stranded import Stranded, stranded_gang


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
        # disruption budget refuses is not asked again every pass).
        self.acted: dict[str, tuple[str, ...]] = {}

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
                continue
            stranded = stranded_gang(group, members, self.cache.nodes, now, self.after)
            if stranded is not None and self.acted.get(key) != stranded.stuck:
                self.acted[key] = stranded.stuck
                found.append((group, stranded))
        return found
