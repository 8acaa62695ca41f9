"""One scheduling pass, as Volcano's runOnce (pkg/scheduler/scheduler.go): open a session on the
pass's input (`plugins.framework.session.Session`), settle what needs no action, run the conf's
actions in the order listed, close, and hand back the decisions (`PassResult`). Pure: the
extender applies the result.

    open      each visited PodGroup's stage (`plugins.framework.traversal.stage_of`): placed
              whole already and not admitted (adopted, e.g. after a restart), admitted,
              finished, waiting for enqueue, or waiting for allocate; the first three are
              decided here
    actions   `plugins.actions`: enqueue, allocate (with reclaim and preempt planned for a gang
              that does not fit), backfill (elastic members)
    close     the decisions, the queues, the queues' starvation, the promised victims

So the order matters as in Volcano: with `enqueue, allocate` a job enqueued this pass holds its
queue's room before any gang is allocated; with `allocate, enqueue` the gangs whose pods are
there take the room first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.records import PodGroupRecord
from plugins.actions.allocate import Allocate
from plugins.actions.backfill import Backfill
from plugins.actions.enqueue import Enqueue
from plugins.actions.preempt import Preempt
from plugins.actions.reclaim import Reclaim
from plugins.framework.decisions import (
    ADMITTED,
    ADOPT,
    ALLOCATE,
    DONE,
    ENQUEUE,
    Adopted,
    Decision,
    Seen,
    Waiting,
)
from plugins.framework.pass_input import PassInput
from plugins.framework.policy import Policy
from plugins.framework.session import PassResult, Session
from plugins.framework.traversal import OPEN, Traversal
from plugins.model import gang as gangs
from plugins.model.elastic import holds_minimum
from plugins.model.gang import GangView
from plugins.model.queue_inputs import queue_pass
from plugins.model.victims import VictimUnit, victim_units_of

if TYPE_CHECKING:
    from plugins.framework.memo import Memo

__all__ = ["ACTIONS", "open_session", "run_pass"]

# The actions by the names a conf gives them.
ACTIONS = {
    action.name: action for action in (Enqueue(), Allocate(), Preempt(), Reclaim(), Backfill())
}
NONE = "none"  # the phase of gangs no action of the conf decides


def open_session(given: PassInput, policy: Policy, memo: Memo | None = None) -> Session:
    """Volcano's OpenSession: the queues' inputs and the share model of the conf's queue plugin
    (from the memo's books when there is one), the victims (built when first asked)."""
    if memo is not None:
        queues = memo.queue_pass(given, policy)
        victims = memo.victims(given)
    else:
        ledger = given.facts.ledger
        reserved = ledger.by_group() if ledger is not None else {}
        queues = queue_pass(given.snapshot, reserved, policy.open_queues)

        def victims(queue: str) -> list[VictimUnit]:
            return build_victims(given, queue)

    ssn = Session(given, policy, queues, victims)
    ssn.traversal = Traversal(ssn, memo)  # it reads the queues' share model
    return ssn


def build_victims(given: PassInput, queue: str) -> list[VictimUnit]:
    """Every unit of `queue` reclaim and preempt could take (never pods being freed, nor
    another scheduler's)."""
    return victim_units_of(given.snapshot, queue, given.facts.releasing, given.settings.served)


def run_pass(given: PassInput, policy: Policy, memo: Memo | None = None) -> PassResult:
    """One pass (the module docstring)."""
    ssn = open_session(given, policy, memo)
    if memo is not None:
        memo.start(ssn)
    ssn.traversal.run(OPEN, (ADOPT, ADMITTED, DONE), lambda g, v: _settle(ssn, g, v))
    for name in policy.actions:
        ACTIONS[name].execute(ssn)
    left = _unhandled(policy)
    if left:

        def waits(group: PodGroupRecord, view: GangView) -> Decision:
            stage = ssn.traversal.stage(group.key) or ALLOCATE
            missing = "allocate" if stage == ALLOCATE else "enqueue or allocate"
            reason = f"gang {group.key}: waiting: the scheduler conf has no {missing} action"
            return Waiting(group.key, group.queue, stage, None, reason=reason)

        ssn.traversal.run(NONE, left, waits)
    result = ssn.close()
    if memo is not None:
        memo.finish(ssn)
    return result


def _settle(ssn: Session, group: PodGroupRecord, view: GangView) -> Decision:
    stage = ssn.traversal.stage(group.key) or DONE
    if stage == ADOPT:
        return Adopted(group.key, group.queue, ADOPT)
    elastic: tuple[str, ...] = ()
    if (
        stage == ADMITTED
        and ssn.policy.has("gang")
        and holds_minimum(view.ready_num, view.min_member)
    ):
        # Beyond its minimum, its members without a slot are elastic: backfill places them
        # (short of it, a member made again under its name goes to filter, for the quorum).
        elastic = tuple(p.key for p in view.members if view.status[p.key] == gangs.PENDING)
    return Seen(group.key, group.queue, stage, elastic=elastic)


def _unhandled(policy: Policy) -> tuple[str, ...]:
    """The stages the conf's actions leave undecided."""
    actions = policy.actions
    left = []
    if "allocate" not in actions:
        left.append(ALLOCATE)
        if "enqueue" not in actions:
            left.append(ENQUEUE)
    return tuple(left)
