"""The order a session visits the PodGroups in (Volcano's traversal): queues in the session's
QueueOrder, each queue's jobs in its JobOrder; and what each visited PodGroup waits for
(`stage_of`). Every gang is visited: a head-of-line gang that cannot be placed never stops the
ones behind it, in its queue or another; the order decides who gets contested room first.

With a memo (`plugins.framework.memo`) the traversal skips what did not change: a queue whose
gangs did not change and whose decisions still read the same at this point of the session is
not visited at all, and within a visited queue each gang whose decision still stands is kept
(its effects on the session replayed, in order) instead of being decided again. Without one,
everything is decided afresh. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from core.records import PodGroupRecord
from plugins.framework.decisions import ADMITTED, ADOPT, ALLOCATE, DONE, ENQUEUE, Decision
from plugins.framework.reads import ReadLog
from plugins.model import gang as gangs
from plugins.model.gang import GangView
from plugins.model.job_input import job_input

if TYPE_CHECKING:
    from plugins.framework.memo import Memo
    from plugins.framework.session import Session

__all__ = ["Traversal", "stage_of"]

OPEN = "open"  # the phase that settles what needs no action (adopt, admitted, done)


def stage_of(ssn: Session, group: PodGroupRecord, view: GangView) -> str:
    """Which step of the session the group waits for (`plugins.framework.decisions`)."""
    gang = ssn.policy.has("gang")
    admitted = ssn.is_admitted(group.key)
    # Pending, or Inqueue but not placed whole: e.g. after a restart, a gang timeout or a
    # loss of members (members being deleted are scheduled but do not keep it whole).
    wants_admission = group.phase in ("Pending", "") or not gangs.whole(view)
    if not admitted and not wants_admission and not gangs.finished(view):
        return ADOPT
    if not gang and not admitted and not gangs.finished(view):
        return ENQUEUE
    if group.phase in ("Pending", "") and (view.created == 0 or ssn.job_valid(view) is not None):
        # Volcano's enqueue admits any PodGroup on its minResources alone (queue and
        # overcommit; JobValid does not gate enqueue), its pods there or not: a vcjob's, and
        # an operator's, are created only once it is Inqueue, and waiting for them here would
        # wait for ever. Its gang is placed whole when enough of them exist.
        return ENQUEUE
    if not admitted and not gangs.finished(view):
        return ALLOCATE
    return ADMITTED if admitted else DONE


class Traversal:
    """The session's queues and jobs in order, with each gang's stage (see the module
    docstring)."""

    def __init__(self, ssn: Session, memo: Memo | None) -> None:
        self.ssn = ssn
        self.memo = memo
        groups_by_queue = ssn.queues.groups_by_queue
        self.queues = [q for q in ssn.queue_order(groups_by_queue) if groups_by_queue.get(q)]
        self._order: dict[str, list[str]] = {}
        self._stages: dict[str, str] = {}
        self._views: dict[str, GangView] = {}

    def jobs_of(self, queue: str) -> list[str]:
        """The queue's PodGroups in the session's job order."""
        found = self._order.get(queue)
        if found is None:
            ssn = self.ssn
            if self.memo is not None:
                found = self.memo.job_order(ssn, queue)
            else:
                found = job_order(ssn, queue)
            self._order[queue] = found
        return found

    def view(self, key: str) -> GangView | None:
        found = self._views.get(key)
        if found is None:
            found = gangs.gang_view(self.ssn.snapshot, key, allocated=self.ssn.allocated_pods())
            if found is not None:
                self._views[key] = found
        return found

    def stage(self, key: str) -> str | None:
        """What the gang waits for (kept by the memo while its own inputs stand)."""
        known = self._stages.get(key)
        if known is not None:
            return known
        if self.memo is not None:
            known = self.memo.stage(self.ssn, key)
        if known is None:
            group = self.ssn.group(key)
            view = self.view(key)
            if group is None or view is None:
                return None
            known = stage_of(self.ssn, group, view)
        self._stages[key] = known
        return known

    def run(
        self,
        phase: str,
        stages: tuple[str, ...],
        decide: Callable[[PodGroupRecord, GangView], Decision],
    ) -> None:
        """Decide the gangs at `stages`, in order, with `decide` (the phase's action), each
        decision taken into the session. With the memo, only those whose kept decision does
        not stand: the others' effects are replayed in their place."""
        ssn, memo = self.ssn, self.memo
        for queue in self.queues:
            # A queue whose starving gang an earlier phase began to elect again is walked
            # (its kept decisions replayed): skipping it would leave the election to half of
            # its gangs.
            if (
                memo is not None
                and not ssn.starvation.visited(queue)
                and memo.queue_stands(ssn, queue, phase)
            ):
                continue
            ssn.starvation.visit(queue)
            for key in self.jobs_of(queue):
                if memo is not None and key not in self._stages:
                    settled = memo.settled(ssn, key, phase)
                    if settled is not None:  # kept, and taking it again would change nothing
                        self._stages[key] = settled
                        continue
                if self.stage(key) not in stages:
                    continue
                group = ssn.group(key)
                if group is None:
                    continue
                if memo is not None:
                    kept = memo.kept(ssn, key, phase)
                    if kept is not None:
                        ssn.take(kept, group, replayed=True)
                        continue
                view = self.view(key)
                if view is None:
                    continue
                if memo is None:
                    ssn.take(decide(group, view), group)
                    continue
                log = ssn.log = ReadLog()
                try:
                    decision = decide(group, view)
                finally:
                    ssn.log = None
                # Decided again as before (something it read moved, not its answer): the
                # extender has it already.
                news = memo.record(ssn, decision, phase, self._stages.get(key), log)
                ssn.take(decision, group, replayed=not news)
            if memo is not None:
                memo.visited(queue, phase)


def job_order(ssn: Session, queue: str) -> list[str]:
    """The queue's PodGroups in job order (the session's JobOrder keys), computed afresh."""
    podgroups = ssn.snapshot.podgroups
    groups = [podgroups[k] for k in ssn.queues.groups_by_queue.get(queue, ()) if k in podgroups]
    ranked = sorted((ssn.job_order_key(job_input(ssn.snapshot, g)), g.key) for g in groups)
    return [key for _, key in ranked]
