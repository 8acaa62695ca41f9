"""The soak's `needless-eviction` invariant (bench.soak_evictions): a gang that evicted others
and is not bound whole within the limit after its victims are gone is reported; one bound in
time, deleted, or whose victims are still there is not."""

from __future__ import annotations

from bench.soak_checker import Checker, Limits
from bench.soak_evictions import NEEDLESS_EVICTION, evicted_for
from bench.soak_model import Group
from tests.unit.test_soak_checker import bind, cluster, gang, kinds

PREEMPTED = "preempted (whole) by gang ns/big of priority 1000: 2 pod(s) of ns/low"


def _low_and_big() -> Checker:
    """`low` (2 members) bound on node-0; `big` (2 members) waiting."""
    checker = cluster(Limits(stall_after=1000.0, eviction_paid_within=30.0))
    gang(checker, "low", 2, 2)
    for index in range(2):
        bind(checker, "low", index, "node-0", 0.0)
    gang(checker, "big", 2, 2)
    return checker


def _evicted(now: float) -> Checker:
    """`low` evicted at `now` for `big`."""
    checker = _low_and_big()
    for index in range(2):
        checker.eviction(f"ns/low-{index}", PREEMPTED, now)
    return checker


def test_the_gang_an_event_names() -> None:
    assert evicted_for(PREEMPTED) == "ns/big"
    reclaimed = "reclaimed (one elastic member) by queue q1 for gang ns/j-1: queue q2 holds more"
    assert evicted_for(reclaimed) == "ns/j-1"
    assert evicted_for("deleted by the node lifecycle controller") is None


def test_a_gang_not_bound_after_its_victims_went_is_reported() -> None:
    checker = _evicted(1.0)
    checker.pod("ns/low-0", None, 2.0)
    checker.tick(40.0)
    assert kinds(checker) == []  # one victim is still there: nothing freed yet
    checker.pod("ns/low-1", None, 41.0)
    checker.tick(70.0)
    assert kinds(checker) == []
    checker.tick(71.5)
    assert kinds(checker) == [NEEDLESS_EVICTION]
    violation = checker.violations[0]
    assert violation.subject == "ns/big" and violation.since == 41.0
    assert "evicted ns/low-0, ns/low-1 for it" in violation.detail
    checker.tick(200.0)
    assert kinds(checker) == [NEEDLESS_EVICTION]  # reported once


def test_a_gang_bound_whole_in_time_paid_for_its_evictions() -> None:
    checker = _evicted(1.0)
    for index in range(2):
        checker.pod(f"ns/low-{index}", None, 2.0)
    bind(checker, "big", 0, "node-0", 10.0)
    bind(checker, "big", 1, "node-0", 10.5)
    checker.tick(100.0)
    assert NEEDLESS_EVICTION not in kinds(checker)


def test_a_victim_gone_before_its_event_starts_the_clock_then() -> None:
    checker = cluster(Limits(stall_after=1000.0, eviction_paid_within=30.0))
    gang(checker, "big", 2, 2)
    checker.eviction("ns/low-0", PREEMPTED, 5.0)  # no such pod any more
    checker.tick(34.0)
    assert kinds(checker) == []
    checker.tick(36.0)
    assert kinds(checker) == [NEEDLESS_EVICTION]


def test_a_gang_deleted_owes_nothing() -> None:
    checker = _evicted(1.0)
    for index in range(2):
        checker.pod(f"ns/low-{index}", None, 2.0)
    checker.group("ns/big", None, 3.0)
    checker.tick(100.0)
    assert kinds(checker) == []


def test_a_gang_bound_after_the_eviction_paid_even_if_the_event_came_late() -> None:
    """The event comes at t=40 dated t=1 (events may be late); the gang bound at t=10 and was
    evicted in its turn at t=20: it used the room, so the eviction paid."""
    checker = _low_and_big()
    for index in range(2):
        checker.pod(f"ns/low-{index}", None, 2.0)
    bind(checker, "big", 0, "node-0", 10.0)
    bind(checker, "big", 1, "node-0", 10.0)
    for index in range(2):
        checker.pod(f"ns/big-{index}", None, 20.0)
    for index in range(2):
        checker.eviction(f"ns/low-{index}", PREEMPTED, 1.0)
    checker.tick(100.0)
    assert NEEDLESS_EVICTION not in kinds(checker)


def test_a_gang_that_completed_owes_nothing() -> None:
    """A real soak: the gang was bound while its victim terminated, ran and completed; the
    victim's event came 24 s late, dated a moment after the gang's binds were seen."""
    checker = _low_and_big()
    bind(checker, "big", 0, "node-1", 10.0)
    bind(checker, "big", 1, "node-1", 10.0)
    for index in range(2):
        checker.pod(f"ns/big-{index}", None, 20.0)  # done and cleaned up
    checker.group("ns/big", Group("ns/big", min_member=2, phase="Completed"), 20.0)
    for index in range(2):
        checker.eviction(f"ns/low-{index}", PREEMPTED, 10.1)
        checker.pod(f"ns/low-{index}", None, 10.3)
    checker.tick(100.0)
    assert NEEDLESS_EVICTION not in kinds(checker)


def test_an_eviction_dated_after_the_bind_it_made_room_for_is_ordered_by_the_pod_watch() -> None:
    """The evictor writes its event once the eviction returned, so under load the event may
    be dated after the gang it made room for bound (the real soak: victims terminating at
    t=1, `big` bound at t=2, the event dated t=3, then `big` evicted in its turn). The pod
    watch saw the victims terminating first: the eviction paid."""
    checker = _low_and_big()
    for index in range(2):
        terminating = checker.pods[f"ns/low-{index}"]
        terminating.deleting = True
        checker.pod(terminating.key, terminating, 1.0)
    for index in range(2):
        bind(checker, "big", index, "node-1", 2.0)
    for index in range(2):
        checker.pod(f"ns/low-{index}", None, 2.5)
        checker.eviction(f"ns/low-{index}", PREEMPTED, 3.0)
    for index in range(2):
        checker.pod(f"ns/big-{index}", None, 4.0)
    checker.tick(100.0)
    assert NEEDLESS_EVICTION not in kinds(checker)


def test_a_gang_bound_just_before_its_evictions_were_seen_used_the_room() -> None:
    # A real control plane: the gang's Bindings (queue room, nodes with room) land before the
    # Eviction calls its decision made return; later it loses a member and its victims are
    # slow to go. Bound within the slack before the eviction was seen, it used the room; bound
    # well before, it did not.
    def run(bound_at: float) -> list[str]:
        checker = _low_and_big()
        bind(checker, "big", 0, "node-1", bound_at)
        bind(checker, "big", 1, "node-1", bound_at)
        for index in range(2):
            checker.eviction(f"ns/low-{index}", PREEMPTED, 10.0)
        checker.pod("ns/big-1", None, 15.0)  # a member lost: its job makes it again later
        for index in range(2):
            checker.pod(f"ns/low-{index}", None, 40.0)
        checker.tick(80.0)
        return [k for k in kinds(checker) if k == NEEDLESS_EVICTION]

    assert run(bound_at=9.8) == []
    assert run(bound_at=5.0) == [NEEDLESS_EVICTION]
