"""kube-scheduler's extender verbs for gang members (`GangVerbs` holds the `GangScheduler` whose
state they answer from): **filter**
(a member of a group not admitted is rejected on every node as unresolvable, with the reason; an
admitted member is steered to its reserved node, re-planned onto a candidate with room, or given
the slot of another member of its gang on a candidate in exchange for its own),
**bind** (held by the bind barrier until the gang has quorum, then committed together), and
**preempt** (no preemption for a member of a gang that is only waiting, no victim that is a
member of a running gang). The scheduling loop (`extender.gangs`) decides admission; these
answer kube-scheduler from what it decided."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from core.api import keys, markers
from core.records import PodGroupRecord, PodRecord, pod_group_key
from core.resources import ResourceVector, pod_requests
from extender import numa_verbs
from extender.binder import BindError
from extender.domain_filter import domain_nodes
from extender.gang_hold import GangRequirement
from extender.ledger import Reservation
from extender.protocol import BindingArgs, PodInfo
from extender.slot_trade import trade_slot
from plugins.actions.starvation import held_for
from plugins.model import gang as gangs
from plugins.model.elastic import holds_minimum
from plugins.model.filter_status import FilterStatus

if TYPE_CHECKING:
    from extender.gangs import GangScheduler


def group_of(pod: PodInfo) -> str | None:
    """The PodGroup key a pod in a request names (the cache's rule, `pod_group_key`)."""
    return pod_group_key(pod.namespace, pod.metadata, pod.spec)


GANG = "gang"  # the plugin whose answer filter gives for a member


def _timeout_of(group: PodGroupRecord) -> float | None:
    """The gang's own `vulcan.sh/gang-timeout`, if it has one."""
    return gangs.annotation_duration(group, keys.GANG_TIMEOUT)


class GangVerbs:
    """filter, bind and preempt for gang members, answered from the scheduler's state."""

    def __init__(self, gangs: GangScheduler) -> None:
        self.gangs = gangs

    def filter(self, pod: PodInfo, candidates: list[str]) -> FilterStatus | None:
        """The gang plugin's answer for a member (steered to one node, or refused on every
        candidate with the reason); None for any other pod."""
        key = group_of(pod)
        if key is None:
            return None
        group = self.gangs.cache.podgroups.get(key)
        if group is None:
            self.gangs.release.refused.setdefault(key, set()).add(pod.key)
            return FilterStatus.unresolvable(f"podgroup {key} not found", GANG)
        self.gangs.same_generation(group)
        unmarked = self.unmarked_member(pod, group)
        if unmarked is not None:
            return FilterStatus.unresolvable(unmarked, GANG)
        if key not in self.gangs.admitted:
            self.gangs.release.refused.setdefault(key, set()).add(pod.key)
            if key not in self.gangs.reasons:
                self.gangs.poke()  # not judged yet (the pass will have seen every later change)
            reason = self.gangs.admissions.told(key) or f"gang {key}: waiting for admission"
            return FilterStatus.unresolvable(reason, GANG)
        self.gangs.reach.reached(key)
        if not self.gangs.gang_enabled:
            return None  # enqueued; without the gang plugin each member is placed on its own
        reservation = self.gangs.ledger.reservation_of(pod.key)
        if (
            reservation is not None
            and reservation.node in set(candidates)
            and self.gangs.slots.fits(pod.key, reservation.node, reservation.request)
        ):
            self.gangs.slots.unpark(pod.key)
            self.gangs.ledger.steer(pod.key)
            return FilterStatus.passes(reservation.node, GANG)
        # No slot (a member beyond minMember) or the slot is unusable: re-plan onto a candidate
        # with room no other member holds (the slot moves; the room it leaves is free again).
        record = self.gangs.cache.pods.get(pod.key)
        # kube-scheduler's informer may bring a pod (e.g. made again under its name by its job
        # controller) before this cache has seen it: judged as asking nothing, it slipped into
        # room reserved for another gang (issue 31). Its request is then the pod's own.
        if record is not None and record.uid == pod.uid:
            request = record.requests
        else:
            request = pod_requests(pod.spec, ignored_group=keys.MARKER_RESOURCE_GROUP)
        elastic = reservation is None and self._is_elastic(group)
        if elastic:
            refused = self._elastic_refused(group, request)
            if refused is not None:
                self.gangs.elastic.wait(key, (pod.key,))
                return FilterStatus.unresolvable(refused, self.gangs.policy.queue_model)
        # Where nodes report NUMA cells, a Guaranteed member only where its cpus align.
        numa = self._numa_refusals(pod, candidates) if self.gangs.cache.numa else None
        # Only where the gang (and its subgroup) stays within one HyperNode it allows.
        domain, bounds = domain_nodes(
            self.gangs.policy, self.gangs.cache, self.gangs.ledger, group, pod.key
        )
        for name in candidates:
            if (numa and name in numa) or (domain is not None and name not in domain):
                continue
            if self.gangs.slots.fits(pod.key, name, request):
                # The group's held sum is a decision input: a new slot (a member beyond
                # minMember) changes it and so re-decides the group; a moved slot does not.
                self.gangs.ledger.reserve(Reservation(pod.key, name, request, key, steered=True))
                self.gangs.slots.unpark(pod.key)
                if elastic:
                    # Counted against its queue until the next pass sees its reservation.
                    self.gangs.queue_gate.book(self.gangs.policy, group.queue, request)
                return FilterStatus.passes(name, GANG)
        known = record if record is not None and record.uid == pod.uid else None
        traded = self._trade(group, known, reservation, request, candidates, domain)
        if traded is not None:
            self.gangs.slots.unpark(pod.key)
            return FilterStatus.passes(traded, GANG)
        if elastic:
            # No room: the pass may reclaim or preempt elastic work for it.
            self.gangs.elastic.wait(key, (pod.key,))
            self.gangs.poke()
        # Refused: kube-scheduler parks the member. The reservation stays, and the pass moves
        # the member back to kube-scheduler's active queue as soon as its slot is free.
        self.gangs.slots.park(pod.key, key)
        blocked = self.gangs.slots.blockers(pod.key)
        if blocked is not None:
            reason = self.gangs.slots.waiting_reason(key, *blocked)
        elif reservation is not None:
            reason = (
                f"gang {key}: no candidate node has room for this member "
                f"(its reserved slot on {reservation.node} is not free yet)"
            )
        else:
            reason = f"gang {key}: no candidate node has room for this member"
        if domain is not None and blocked is None:
            reason += f" within the HyperNode of its other members ({bounds})"
        return FilterStatus.unresolvable(reason, GANG)

    def _trade(
        self,
        group: PodGroupRecord,
        record: PodRecord | None,
        reservation: Reservation | None,
        request: ResourceVector,
        candidates: list[str],
        domain: frozenset[str] | None,
    ) -> str | None:
        """A slot of another member on an offered node, traded for this member's own
        (`slot_trade`): only with a member whose placement constraints are this one's, which
        may then go wherever this one could; not where NUMA cells, subgroups or constraints
        that depend on the pods around (pod affinity, spread, host ports) make slots unlike."""
        if reservation is None or record is None:
            return None
        constraints = record.constraints
        if constraints is not None and constraints.dynamic:
            return None
        if self.gangs.cache.numa or group.spec.get("subGroupPolicy"):
            return None
        pods = self.gangs.cache.pods

        def alike(other_key: str) -> bool:
            other = pods.get(other_key)
            return other is not None and other.constraints == constraints

        allowed = (lambda _name: True) if domain is None else domain.__contains__
        return trade_slot(
            self.gangs.ledger, self.gangs.slots, reservation, request, candidates, allowed, alike
        )

    def _numa_refusals(self, pod: PodInfo, candidates: list[str]) -> dict[str, str] | None:
        numa = self.gangs.policy.numa if self.gangs.policy.numa_filters else None
        return numa_verbs.refusals(numa, self.gangs.cache, self.gangs.ledger, pod, candidates)

    def unmarked_member(self, pod: PodInfo, group: PodGroupRecord) -> str | None:
        """Why a member of a gang that needs the bind barrier may not be placed
        (`core.api.markers.unmarked_member`, with `GangScheduler.bind_marker`), read from the
        pod kube-scheduler sends (the cache may not have seen it yet)."""
        marker = self.gangs.options.bind_marker
        if marker is None or not self.gangs.gang_enabled:
            return None
        return markers.unmarked_member(
            group.key, group.min_member, pod.key, markers.carries(pod.spec, marker), marker
        )

    def _is_elastic(self, group: PodGroupRecord) -> bool:
        """A member the gang does not need for its minimum: the gang holds it already (bound
        or reserved members). A replacement the gang needs to reach its minimum is not
        elastic: the gang's own admission took its room."""
        bound, _ = self._bound_members(group.key)
        return holds_minimum(bound + len(self.gangs.ledger.of_group(group.key)), group.min_member)

    def _elastic_refused(self, group: PodGroupRecord, request: ResourceVector) -> str | None:
        """Why the queue refuses one more elastic member of an admitted gang, if it does: the
        queue's Allocatable, member by member (Volcano allocates every task within its queue's
        deserved share and capability)."""
        refused = self.gangs.queue_gate.allocatable(self.gangs.policy, group.queue, request)
        target = self.gangs.starving.holding(group.queue, time.time())
        if refused is None and target is not None:
            refused = held_for(target, group.queue)
        if refused is not None:
            beyond = f"elastic member beyond minMember {group.min_member}"
            return f"gang {group.key}: {beyond}: {refused}"
        return None

    def waits_for_room(
        self, pod: PodInfo, candidates: list[str], decision: FilterStatus | None
    ) -> bool:
        """Whether `decision` refuses a member whose reserved node kube-scheduler offers while
        this cache still sees that room held by terminating pods: kube-scheduler's informer
        saw them go first (or is about to be proven wrong). Refusing would park the member for
        kube-scheduler's backoff (up to 10 s) although the room is free, so the filter waits
        up to `pipelined_wait` for this cache to catch up (`filter_once_room_frees`)."""
        if decision is None or decision.ok or self.gangs.options.pipelined_wait <= 0:
            return False
        reservation = self.gangs.ledger.reservation_of(pod.key)
        return (
            reservation is not None
            and reservation.node in candidates
            and self.gangs.slots.blockers(pod.key) is not None
        )

    async def filter_once_room_frees(
        self, pod: PodInfo, candidates: list[str], decision: FilterStatus | None
    ) -> FilterStatus | None:
        """`filter` again once the member's reserved room is free, else `decision` after
        `pipelined_wait`."""
        if await self.gangs.slots.wait_until_free(pod.key, self.gangs.options.pipelined_wait):
            return self.filter(pod, candidates)
        return decision

    def waits_for_judgement(self, pod: PodInfo, decision: FilterStatus | None) -> bool:
        """Whether `decision` refuses a member with a placeholder: its gang is neither admitted
        nor refused with a reason yet, or this cache does not hold the member in it yet (just
        grouped by the podgroup controller).
        kube-scheduler parks a refused pod until an update of it, and nothing updates a member
        of a gang that goes on being refused: the placeholder would be what it says for up to
        five minutes. So the filter waits up to `pipelined_wait` for that pass
        (`filter_once_judged`)."""
        if decision is None or decision.ok or self.gangs.options.pipelined_wait <= 0:
            return False
        key = group_of(pod)
        return (
            key is not None
            and key in self.gangs.cache.podgroups  # (a PodGroup never made is no race)
            and key not in self.gangs.admitted
            and not self._judged(pod, key)
        )

    def _judged(self, pod: PodInfo, key: str) -> bool:
        return key in self.gangs.reasons and self._cached_in(pod, key)

    def _cached_in(self, pod: PodInfo, key: str) -> bool:
        """Whether this cache holds the member in gang `key` (a pass can judge it)."""
        seen = self.gangs.cache.pods.get(pod.key)
        return seen is not None and seen.group == key

    async def filter_once_judged(
        self, pod: PodInfo, candidates: list[str], decision: FilterStatus | None
    ) -> FilterStatus | None:
        """`filter` again after the first pass that ended with the member in its gang in this
        cache (the pass judges what it sees), else `decision` after `pipelined_wait`."""
        key = group_of(pod)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.gangs.options.pipelined_wait
        passes = self.gangs.passes
        seen_at: int | None = None
        while True:
            if seen_at is None and key is not None and self._cached_in(pod, key):
                seen_at = passes.count
            if key in self.gangs.admitted or (seen_at is not None and passes.count > seen_at):
                return self.filter(pod, candidates)
            left = deadline - loop.time()
            if left <= 0:
                return decision
            self.gangs.poke()
            await passes.next(left)

    def queues_contended(self) -> bool:
        """Whether some queue may refuse a pod now (closed, or holding its deserved share):
        until then plain pods skip the queue check entirely."""
        return self.gangs.queue_gate.contended()

    def queue_gate(self, pod: PodInfo, candidates: list[str]) -> FilterStatus | None:
        """Volcano's allocate check for a pod outside any gang: its
        queue must be Open and able to hold it within its deserved share. A refusal names
        the queue and the numbers, on every candidate (unresolvable: no preemption helps);
        None lets the pod through, counted against its queue until the next pass."""
        gate, policy = self.gangs.queue_gate, self.gangs.policy
        record = self.gangs.cache.pods.get(pod.key)
        if gate.queues is None or record is None or record.node is not None:
            return None
        if record.group is not None or gate.tentative(record.key):
            return None
        queue = self.gangs.cache.queue_of(record)
        if queue is None:
            return None
        refused = gate.allocatable(policy, queue, record.requests)
        if refused:
            refused = refused.replace("with this gang", "with this pod")  # not a gang member
            return FilterStatus.unresolvable(refused, policy.queue_model)
        gate.book(policy, queue, record.requests)
        gate.let_through(record.key)
        return None

    # ------------------------------------------------------------------ bind

    async def bind(self, args: BindingArgs) -> str | None:
        """Hold a member's bind until its gang has quorum; the bind result label. None if the
        pod is not a member (the caller binds it at once). Raises BindError."""
        pod_key = f"{args.pod_namespace}/{args.pod_name}"
        record = self.gangs.cache.pods.get(pod_key)
        if record is None or record.group is None:
            return None
        # Without the gang plugin members bind at once, except those of a gang already held at
        # the barrier when a reloaded conf dropped the plugin: it still binds whole.
        if not self.gangs.gang_enabled and not self.gangs.barrier.held(record.group):
            return None
        group = self.gangs.cache.podgroups.get(record.group)
        if group is None:
            raise BindError(f"podgroup {record.group} not found", "podgroup_not_found")
        self.gangs.same_generation(group)
        bound, per_task = self._bound_members(group.key)
        requirement = GangRequirement(
            key=group.key,
            min_member=group.min_member,
            min_task_member=group.min_task_member,
            timeout=_timeout_of(group),
            already_bound=bound,
            already_bound_per_task=per_task,
        )
        result = await self.gangs.barrier.hold(requirement, args, record.task)
        self.gangs.poke()
        return result

    def _bound_members(self, key: str) -> tuple[int, dict[str, int]]:
        """How many of the group's members are bound (and per task role), counted once per
        group version: the 1,000 binds of a 1,000-member gang arrive while nothing about its
        members changes, and counting for each of them was quadratic."""
        version = self.gangs.cache.group_versions.get(key)
        cached = self.gangs.bound_counts.get(key)
        if cached is not None and version is not None and cached[0] == version:
            return cached[1], dict(cached[2])
        bound = 0
        per_task: dict[str, int] = {}
        # A member whose eviction this extender asked for does not keep its gang whole. The
        # evictor shows it deleting in the cache at once, but an API update of the pod that
        # lands before the DELETE replaces that assumption with a live record: counted then,
        # a gang evicted whole let its next member bind alone on the strength of its victims
        # (issue 31 soak, seed 2026: gang-88 bound 1 of 3 a few ms after it was preempted).
        evicting = self.gangs.evictor.notes
        for pod_key in self.gangs.cache.pods_by_group.get(key, ()):
            member = self.gangs.cache.pods.get(pod_key)
            if member is not None and pod_key not in evicting and gangs.counts_for_quorum(member):
                bound += 1
                if member.task:
                    per_task[member.task] = per_task.get(member.task, 0) + 1
        self.gangs.bound_counts[key] = (version, bound, per_task)
        return bound, dict(per_task)

    # ------------------------------------------------------------------ preempt

    def preempt(
        self, pod: PodInfo, victims: dict[str, tuple[list[str], int]]
    ) -> dict[str, tuple[list[str], int]]:
        key = group_of(pod)
        if key is not None and key not in self.gangs.admitted:
            return {}  # a waiting gang never triggers preemption
        if not self.gangs.gang_enabled:
            return victims  # no gangs to keep whole
        kept: dict[str, tuple[list[str], int]] = {}
        by_uid = {p.uid: p for p in self.gangs.cache.pods.values()} if victims else {}
        for node, (uids, pdb) in victims.items():
            if any(
                (victim := by_uid.get(uid)) is not None and victim.group is not None for uid in uids
            ):
                continue  # evicting one member would break a running gang
            kept[node] = (uids, pdb)
        return kept
