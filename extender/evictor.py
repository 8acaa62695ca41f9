"""Applies the reclaim and preempt actions' decisions (`plugins.actions.evictions`): evicts the
chosen units' pods through the gang writer, says why on the victims and the gang, and keeps the room
being freed (Volcano's Releasing: pods terminating, or whose eviction was asked) so that the
allocate action can pipeline a gang onto it and never picks those pods again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from core.cache import ClusterCache, Snapshot
from core.decisions import gang_decision, job_of
from core.kube.events import NORMAL, WARNING
from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from extender.gang_writer import GangWriter
from extender.ledger import GangLedger
from extender.stranded import StrandedWatch
from plugins.model.victims import VictimUnit

_ZERO = ResourceVector()
# The event reason on a stranded gang and on the survivors evicted (`plugins.model.stranded`).
STRANDED = "GangStranded"


class Evictor:
    def __init__(
        self,
        cache: ClusterCache,
        ledger: GangLedger,
        writer: GangWriter,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        poke: Callable[[], None],
        emptied: Callable[[str, str], None] = lambda key, why: None,
        *,
        stranded_after: float = 0.0,
    ) -> None:
        """`emptied(group, why)`: a gang no controller owns was evicted whole;
        `stranded_after`: `extender.stranded.StrandedWatch`'s (0: stranded gangs are left)."""
        self.cache = cache
        self.ledger = ledger
        self.writer = writer
        self._spawn = spawn
        self._poke = poke
        self._emptied = emptied
        # pod -> (node, requests) of the room being freed.
        self.releasing: dict[str, tuple[str, ResourceVector]] = {}
        # pod -> why vulcan evicted it, until it is gone (its gang's GangBroken says it).
        self.notes: dict[str, str] = {}
        self.evictions = 0  # evict_units calls so far: what may be evicted changed with each
        # Gang -> why it was evicted whole, until it is admitted again. A member whose bind was
        # on its way when the pass chose the gang lands after its unit was evicted and would run
        # alone (soak seed 20261126: an elastic member of a gang of minMember 2, for minutes).
        self.evicted_whole: dict[str, str] = {}
        self._leftovers: set[str] = set()
        self.stranded = StrandedWatch(cache, stranded_after)

    def pod_changed(self, pod_key: str, pod: PodRecord | None) -> None:
        """Track the room a terminating pod holds until it is gone."""
        if pod is None:
            self.notes.pop(pod_key, None)
        self.stranded.pod_changed(pod)
        if pod is None or pod.node is None or pod.terminal:
            self.releasing.pop(pod_key, None)
        elif pod.deleting:
            self.releasing[pod_key] = (pod.node, pod.requests)
        elif pod.group in self.evicted_whole and pod_key not in self.notes:
            self._leftovers.add(pod_key)  # bound after its gang was evicted whole
            self._poke()

    def evict_leftovers(self) -> None:
        """Evict the members found bound after their gang was evicted whole (before a pass
        reads the cache: counted live, they would make the gang look half there)."""
        leftovers, self._leftovers = self._leftovers, set()
        for pod_key in sorted(leftovers):
            pod = self.cache.pods.get(pod_key)
            note = self.evicted_whole.get(pod.group or "") if pod is not None else None
            if pod is None or note is None or pod.node is None or pod.deleting or pod.terminal:
                continue
            self._start(pod, note)

    def evict_stranded(self) -> None:
        """Evict the survivors of the gangs stranded half placed (before a pass reads the
        cache, as `evict_leftovers`)."""
        for group, stranded in self.stranded.due():
            self.writer.group_event(group, WARNING, STRANDED, stranded.why)
            gang_decision("gang stranded", group, pods=len(stranded.survivors), reason=stranded.why)
            self.evicted_whole[group.key] = stranded.why
            for pod_key in stranded.survivors:
                if (pod := self.cache.pods.get(pod_key)) is not None:
                    self._start(pod, stranded.why, STRANDED)

    def forget_whole_eviction(self, group: str) -> None:
        """The gang is admitted again (its members bind for the new placement) or gone."""
        self.evicted_whole.pop(group, None)

    def why_evicted(self, pod_key: str) -> str | None:
        return self.notes.get(pod_key)

    def holding(self, node: str) -> list[str]:
        """The pods whose room on `node` is being freed."""
        return [k for k, (n, _) in self.releasing.items() if n == node]

    def future_reserved(self) -> dict[str, ResourceVector] | None:
        """The ledger's reservations per node minus the room being freed there: what a
        placement over the cache's node_requested must subtract to see FutureIdle; None when
        nothing is being freed."""
        if not self.releasing:
            return None
        reserved = dict(self.ledger.by_node)
        for pod_key, (node, request) in list(self.releasing.items()):
            pod = self.cache.pods.get(pod_key)
            if pod is None or pod.node != node or not pod.occupies_node:
                del self.releasing[pod_key]  # gone before the cache told the listener
                continue
            reserved[node] = reserved.get(node, _ZERO) - request
        return reserved

    def evict_units(
        self,
        snapshot: Snapshot,
        group: PodGroupRecord,
        priority: int,
        action: str,
        chosen: list[VictimUnit],
    ) -> None:
        self.evictions += 1
        names = ", ".join(
            f"{u.pods[0]} (elastic member of {u.group})" if u.elastic else (u.group or u.pods[0])
            for u in chosen
        )
        for unit in chosen:
            whole = "one elastic member" if unit.elastic else "whole"
            if action == "reclaim":
                note = (
                    f"reclaimed ({whole}) by queue {group.queue} for gang {group.key}: queue "
                    f"{unit.queue} holds more than it deserves; {len(unit.pods)} pod(s) of "
                    f"{unit.group or unit.pods[0]}"
                )
            else:
                note = (
                    f"preempted ({whole}) by gang {group.key} of priority {priority}: "
                    f"{len(unit.pods)} pod(s) of {unit.group or unit.pods[0]}"
                )
            victim_group = snapshot.podgroups.get(unit.group) if unit.group else None
            if victim_group is not None:
                self.writer.group_event(
                    victim_group, WARNING, "Reclaimed" if action == "reclaim" else "Preempted", note
                )
                gang_decision(
                    "gang reclaimed" if action == "reclaim" else "gang preempted",
                    victim_group,
                    by=job_of(group),
                    pods=len(unit.pods),
                    reason=note,
                )
                if not unit.elastic and victim_group.owner is None:
                    self._emptied(victim_group.key, note)
            if not unit.elastic and unit.group is not None:
                self.evicted_whole[unit.group] = note
            for pod_key in unit.pods:
                self._start(snapshot.pods[pod_key], note)
        # The victims as gangs (their jobs), a pod outside any gang by its own name.
        victims = sorted(
            {
                job_of(g)
                if (g := snapshot.podgroups.get(u.group or "")) is not None
                else (u.group or u.pods[0])
                for u in chosen
            }
        )
        gang_decision(
            "gang reclaims" if action == "reclaim" else "gang preempts",
            group,
            victims=victims,
            pods=sum(len(u.pods) for u in chosen),
            reason=(
                "victims' queues hold more than they deserve"
                if action == "reclaim"
                else f"victims have a lower priority than {priority}"
            ),
        )
        what = "over-share" if action == "reclaim" else "lower-priority"
        self.writer.group_event(
            group,
            NORMAL,
            "Reclaiming" if action == "reclaim" else "Preempting",
            f"evicting {len(chosen)} {what} unit(s) to place the gang: {names}",
        )

    def _start(self, victim: PodRecord, note: str, reason: str = "Preempted") -> None:
        """Evict `victim`: its room is being freed, and vulcan's note says why."""
        self.notes[victim.key] = note
        if victim.node is not None:
            self.releasing[victim.key] = (victim.node, victim.requests)
        # The cache shows the victim being deleted from now on, not when the API server's
        # event comes back (tenths of a second on a busy control plane): until then every
        # pass counted it as a live bound member, and a gang evicted whole was admitted again
        # on the strength of its own victims (issue-31 soak: gang-1191 "its 2 bound members
        # hold what it needs" 0.3 s after it was preempted whole). `core.cache_leaving` says
        # why it sticks.
        self.cache.assume_deleting(victim)
        self._spawn(self._evict(victim, note, reason))

    async def _poke_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._poke()

    async def _evict(self, pod: PodRecord, note: str, reason: str) -> None:
        outcome = await self.writer.evict(pod)
        if outcome == "refused":
            # Not evicted (e.g. a disruption budget): its room is not being freed after all.
            self.cache.forget_deleting(pod.key)
            self.releasing.pop(pod.key, None)
            self.notes.pop(pod.key, None)
            self._poke()
            if reason == STRANDED and pod.group is not None:
                # Still half there: asked again after a backoff, with a pass to ask it in.
                delay = self.stranded.refused(pod.group)
                if delay is not None:
                    self._spawn(self._poke_after(delay))
        elif outcome == "gone":
            if (known := self.cache.pods.get(pod.key)) is None or known.uid != pod.uid:
                self.releasing.pop(pod.key, None)  # gone already
        elif outcome == "evicted":
            self.writer.pod_event(pod, WARNING, reason, note)
