"""Admitted gang members whose reserved slot is not usable yet, and when it becomes usable.

A gang admitted by reclaim or preemption is placed on room its victims still hold while they
terminate: Volcano's *pipelined* tasks. kube-scheduler tries such a member, finds no room (its
in-tree filter, or this extender's filter) and parks it as unschedulable; nothing it watches is
sure to bring the pod back when the room is freed, so without help the member waits for the
unschedulable pool's five-minute flush (issue 16). The same holds for any admitted member this
filter refuses: its slot taken by a pod kube-scheduler bound before this cache saw it, a slot
re-planned on a node kube-scheduler did not offer.

`SlotWatch` keeps those members (`park`), tells which of them can be placed now that the cache
changed (`due`: their slot fits, or any node does for a member without one) so the extender
moves them back to kube-scheduler's active queue with a pod update, and lets filter wait a
moment for this cache to catch up with kube-scheduler's (`wait_until_free`). It also names what
a member waits for (`blockers`): the terminating pods on its node, for the FailedScheduling
message.

No I/O: the extender writes the pod updates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from core.cache import ClusterCache
from core.resources import ResourceVector
from extender.ledger import GangLedger

_NAMED_BLOCKERS = 3  # terminating pods named in a reason; the rest are counted


class SlotWatch:
    def __init__(self, cache: ClusterCache, ledger: GangLedger) -> None:
        self.cache = cache
        self.ledger = ledger
        self._parked: dict[str, str] = {}  # pod key -> its group
        # Members admitted onto room that victims evicted for them still hold: group ->
        # member -> (node, the victims on that node). Volcano's Pipelined tasks.
        self._pipelined: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {}
        self._waiters: set[asyncio.Event] = set()
        cache.change_listeners.append(self._changed)

    def __len__(self) -> int:
        return len(self._parked)

    def __contains__(self, pod_key: str) -> bool:
        return pod_key in self._parked

    # ------------------------------------------------------------------ fit

    def fits(self, pod_key: str, node: str, request: ResourceVector) -> bool:
        """Whether `request` fits on `node` in this cache, minus every other reservation."""
        if node not in self.cache.nodes:
            return False
        free = self.cache.node_free(node) - self.ledger.reserved_on(node, excluding=pod_key)
        return request.fits_in(free)

    def usable(self, pod_key: str, *, any_node: Callable[[ResourceVector], bool]) -> bool:
        """Whether the member can be placed now: its slot fits, or (without a slot) some node
        has room (`any_node`, which callers memoise per request within a pass)."""
        reservation = self.ledger.reservation_of(pod_key)
        if reservation is not None:
            return self.fits(pod_key, reservation.node, reservation.request)
        pod = self.cache.pods.get(pod_key)
        return pod is not None and any_node(pod.requests)

    def any_node_fits(self, request: ResourceVector) -> bool:
        reserved = self.ledger.by_node
        for name in self.cache.nodes:
            free = self.cache.node_free(name)
            held = reserved.get(name)
            if request.fits_in(free - held if held is not None else free):
                return True
        return False

    # ------------------------------------------------------------------ parked members

    def park(self, pod_key: str, group: str) -> None:
        """kube-scheduler was told this admitted member cannot go anywhere now."""
        self._parked[pod_key] = group

    def unpark(self, pod_key: str) -> None:
        self._parked.pop(pod_key, None)

    def forget_group(self, group: str) -> None:
        for pod_key in [k for k, g in self._parked.items() if g == group]:
            del self._parked[pod_key]
        self._pipelined.pop(group, None)

    # ------------------------------------------------------------------ pipelined members

    def pipeline(self, group: str, pod_key: str, node: str, victims: list[str]) -> None:
        """`pod_key` was admitted onto room on `node` that `victims` hold until they are gone."""
        self._pipelined.setdefault(group, {})[pod_key] = (node, tuple(victims))

    def waiting_members(self, group: str) -> dict[str, tuple[str, list[str]]]:
        """The group's pipelined members still waiting: member -> (node, pods still holding
        its room). Members whose room is free, or that are bound or gone, are dropped."""
        members = self._pipelined.get(group)
        if not members:
            return {}
        waiting = {}
        for pod_key in list(members):
            blocked = self.blockers(pod_key, group=group)
            if blocked is None:
                del members[pod_key]
            else:
                waiting[pod_key] = blocked
        if not members:
            del self._pipelined[group]
        return waiting

    def due(self, admitted: set[str]) -> list[str]:
        """Parked members that can be placed now, taken off the list (the caller moves them
        back to kube-scheduler's active queue). Members bound, finished or of a group no longer
        admitted are dropped (admission releases those again when it happens); a member the
        cache has not seen yet stays until it has."""
        if not self._parked:
            return []
        fits_somewhere: dict[ResourceVector, bool] = {}

        def any_node(request: ResourceVector) -> bool:
            known = fits_somewhere.get(request)
            if known is None:
                known = fits_somewhere[request] = self.any_node_fits(request)
            return known

        ready: list[str] = []
        for pod_key, group in list(self._parked.items()):
            pod = self.cache.pods.get(pod_key)
            if group not in admitted or (pod is not None and (pod.node or pod.terminal)):
                del self._parked[pod_key]
            elif pod is None:
                continue  # refused before this cache saw it: wait for it to arrive
            elif self.usable(pod_key, any_node=any_node):
                del self._parked[pod_key]
                ready.append(pod_key)
        return ready

    # ------------------------------------------------------------------ what a member waits for

    def terminating_on(self, node: str) -> list[str]:
        """Pods on `node` that are terminating and still hold their room (sorted keys)."""
        found = []
        for pod_key in self.cache.pods_by_node.get(node, ()):
            pod = self.cache.pods.get(pod_key)
            if pod is not None and pod.deleting and pod.occupies_node:
                found.append(pod_key)
        return sorted(found)

    def blockers(self, pod_key: str, *, group: str | None = None) -> tuple[str, list[str]] | None:
        """(node, pods) when the member's slot is held only until those pods on its node are
        gone: the victims evicted for it (recorded by `pipeline`), else any terminating pods
        there; the slot would fit without them. None when the slot fits now, or would not fit
        even then, or the member holds no slot."""
        reservation = self.ledger.reservation_of(pod_key)
        if reservation is None:
            return None
        node = reservation.node
        if self.fits(pod_key, node, reservation.request):
            return None
        recorded = self._pipelined.get(group or "", {}).get(pod_key)
        holding = []
        if recorded is not None and recorded[0] == node:
            for key in recorded[1]:
                pod = self.cache.pods.get(key)
                if pod is not None and pod.node == node and pod.occupies_node:
                    holding.append(key)
        if not holding:
            holding = self.terminating_on(node)
        if not holding:
            return None
        freed = ResourceVector()
        for key in holding:
            freed = freed + self.cache.pods[key].requests
        free = self.cache.node_free(node) + freed
        if not reservation.request.fits_in(free - self.ledger.reserved_on(node, excluding=pod_key)):
            return None
        return node, sorted(holding)

    @staticmethod
    def waiting_reason(group: str, node: str, terminating: list[str]) -> str:
        """`gang default/small-3: waiting for default/big-47 to terminate on hollow-node-3`."""
        named = ", ".join(terminating[:_NAMED_BLOCKERS])
        more = len(terminating) - _NAMED_BLOCKERS
        if more > 0:
            named += f" and {more} more"
        return f"gang {group}: waiting for {named} to terminate on {node}"

    # ------------------------------------------------------------------ filter's short wait

    async def wait_until_free(self, pod_key: str, timeout: float) -> bool:
        """Wait at most `timeout` seconds for the member's slot to fit in this cache (each
        cache change re-checks it); True when it does."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            reservation = self.ledger.reservation_of(pod_key)
            if reservation is None:
                return False
            if self.fits(pod_key, reservation.node, reservation.request):
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            changed = asyncio.Event()
            self._waiters.add(changed)
            try:
                await asyncio.wait_for(changed.wait(), left)
            except TimeoutError:
                pass
            finally:
                self._waiters.discard(changed)

    def _changed(self) -> None:
        for waiter in self._waiters:
            waiter.set()
