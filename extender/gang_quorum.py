"""Returns a gang to all-or-nothing the moment it stops being whole (issue 31).

A gang that reached quorum is "committed" in the bind barrier: its later members (beyond
minMember, or retries) bind at once. That is right while the gang runs whole, and wrong as soon
as its live members fall below its minimum: a gang evicted whole by reclaim or preemption, a
member deleted by hand, a node failure (its pods evicted), or the job controller restarting a
task or the job (pods deleted, made again under the same names, the PodGroup kept) would
otherwise have its new pods bound one at a time wherever room shows up, and stay half placed.

`QuorumWatch.pod_changed` runs in the cache's pod listener, so before any other event is
handled (a member made again reaches filter and bind only after the cache saw the old one go):
when a member that counted for its committed gang stops counting (deleted, being deleted,
Failed, replaced), the gang's live members are counted again — bound and live in the cache
(`plugins.model.gang.counts_for_quorum`), or being bound by the barrier and not yet seen bound — and
if they no longer make its quorum (`plugins.model.gang.quorum_shortfall`, Volcano's rule for task
minimums) the barrier uncommits it. Its "Broken" event makes the scheduler forget the gang's
admission and reservations (`extender.gang_events.BarrierEvents`), so its next placement is planned
whole again, and says what happened on the PodGroup and its pods (`GangBroken`).

A member that Succeeded counts for the quorum while it exists (Volcano's ReadyTaskNum), so a
chained job's later tasks bind one at a time once the first finished. When it leaves (a failed
node's taint eviction deletes finished pods too) the gang is checked again if a member still
waits, and a member that arrives later has the check run for it (the job controller makes the
finished pods again): otherwise one waiting member would bind alone. A finished job cleaned up
(nothing waits, nothing arrives) is not a loss and no event is due.
"""

from __future__ import annotations

from collections.abc import Callable

from core.cache import ClusterCache
from core.records import PodRecord
from extender.barrier import BindBarrier
from plugins.model import gang as gangs

BROKEN_TAIL = "its next placement is all-or-nothing again"


class QuorumWatch:
    def __init__(
        self,
        cache: ClusterCache,
        barrier: BindBarrier,
        why_evicted: Callable[[str], str | None] = lambda _pod: None,
    ) -> None:
        """`why_evicted(pod key)`: vulcan's own note when it evicted that pod (reclaim or
        preempt), for the message."""
        self.cache = cache
        self.barrier = barrier
        self.why_evicted = why_evicted

    def pod_changed(self, key: str, pod: PodRecord | None, old: PodRecord | None) -> None:
        if old is None:
            if pod is not None and pod.group is not None and self.barrier.committed(pod.group):
                # A member made again after its finished one left unnoticed (below) joins a
                # gang that may hold too few members to take it one at a time.
                self.check(pod.group, f"new member {key} arrived")
            return
        if old.group is None or not gangs.counts_for_quorum(old):
            return
        same = pod is not None and pod.uid == old.uid and pod.group == old.group
        if same and pod is not None and gangs.counts_for_quorum(pod):
            return  # still counts (e.g. Pending -> Running)
        if not self.barrier.committed(old.group):
            return
        if old.phase == gangs.SUCCEEDED and not self._waiting(old.group):
            return  # a finished job cleaned up: nothing left to place
        finished = "finished member " if old.phase == gangs.SUCCEEDED else ""
        self.check(old.group, f"{finished}{key} {self._how(old, pod)}")

    def check(self, group_key: str, lost: str) -> bool:
        """Uncommit the group if its live members no longer make its quorum; True if so."""
        group = self.cache.podgroups.get(group_key)
        if group is None:
            return False  # deleted: the pass forgets it
        have, per_task = self.live_members(group_key)
        short, tasks = gangs.quorum_shortfall(
            group.min_member, group.min_task_member, have, per_task
        )
        if not short and not tasks:
            return False
        text = f"gang {group_key} is no longer whole: {lost}; {have}/{group.min_member} members "
        text += "remain bound"
        if tasks:
            text += " (" + ", ".join(f"task {t} {g}/{m}" for t, (g, m) in tasks.items()) + ")"
        return self.barrier.uncommit(group_key, f"{text}: {BROKEN_TAIL}")

    def live_members(self, group_key: str) -> tuple[int, dict[str, int]]:
        """Members that keep the gang whole now (and per task): bound and live in the cache,
        or being bound by the barrier (same UID, no node in the cache yet). Members the
        barrier bound that the cache now shows bound, or that are gone, are settled."""
        placing = self.barrier.placing(group_key)
        settled = [k for k in placing if k not in self.cache.pods]
        have = 0
        per_task: dict[str, int] = {}
        for pod_key in self.cache.pods_by_group.get(group_key, ()):
            member = self.cache.pods.get(pod_key)
            if member is None:
                continue
            binding = placing.get(pod_key)
            if binding is not None and (binding != member.uid or member.node is not None):
                settled.append(pod_key)
                binding = None
            counted = gangs.counts_for_quorum(member) or (
                binding is not None and not member.deleting and not member.terminal
            )
            if counted:
                have += 1
                task = member.task or ""
                per_task[task] = per_task.get(task, 0) + 1
        if settled:
            self.barrier.settled(group_key, settled)
        return have, per_task

    def _waiting(self, group_key: str) -> bool:
        """Whether a member of the group waits to be placed (unbound, live)."""
        for pod_key in self.cache.pods_by_group.get(group_key, ()):
            member = self.cache.pods.get(pod_key)
            if member and member.node is None and not member.deleting and not member.terminal:
                return True
        return False

    def _how(self, old: PodRecord, pod: PodRecord | None) -> str:
        if pod is None:
            what = "was deleted"
        elif pod.uid != old.uid:
            what = "was replaced"
        elif pod.phase == gangs.FAILED:
            what = "failed"
        else:
            what = "is being deleted"
        node = self.cache.nodes.get(old.node or "")
        if node is None:
            what += f" (its node {old.node} is gone)"
        elif not node.ready:
            what += f" (its node {old.node} is not Ready)"
        evicted = self.why_evicted(old.key)
        if evicted:
            what += f" (evicted: {evicted})"
        return what
