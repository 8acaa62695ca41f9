"""extender.unreached.ReachWatch: which admitted gangs' members never reached filter, and the
backoff that follows (doubling, reset once a member comes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from core.cache import ClusterCache
from core.records import PodGroupRecord, PodRecord
from core.refusal_words import vulcan_refused
from core.resources import ResourceVector
from extender.ledger import GangLedger, Reservation
from extender.slots import SlotWatch
from extender.unreached import MEMBERS_NOT_MADE, MEMBERS_NOT_REACHED, ReachWatch, turned_away
from plugins.framework.decisions import ALLOCATE, Waiting


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_gang_none_of_whose_members_came_is_due_after_the_timeout() -> None:
    clock = Clock()
    watch = ReachWatch(30.0, backoff=10.0, clock=clock)
    watch.admitted("ns/a")
    watch.admitted("ns/b")
    clock.now += 29.9
    assert watch.due() == []
    watch.reached("ns/b")  # one member of b came: kube-scheduler does ask about it
    clock.now += 0.1
    assert watch.due() == ["ns/a"]


def test_each_expiry_in_a_row_doubles_the_backoff_and_a_member_that_comes_resets_it() -> None:
    clock = Clock()
    watch = ReachWatch(5.0, backoff=10.0, max_backoff=25.0, clock=clock)
    waits = []
    for _ in range(3):
        watch.admitted("ns/a")
        clock.now += 5.0
        assert watch.due() == ["ns/a"]
        why = watch.expire("ns/a")
        assert why.startswith("gang ns/a: none of its members reached vulcan's filter within 5s")
        assert "may be admitted again after" in why
        waits.append(watch.backoffs()["ns/a"][1])
        assert watch.due() == []
    # 10 s, then 20 s, then at most 25 s (wall clock, from each expiry).
    assert round(waits[1] - waits[0]) == 10 and round(waits[2] - waits[1]) == 5
    watch.admitted("ns/a")
    watch.reached("ns/a")  # a member came: the count starts over
    watch.admitted("ns/a")
    clock.now += 5.0
    watch.expire("ns/a")
    assert round(watch.backoffs()["ns/a"][1] - waits[0]) == 0  # 10 s again


def test_a_restarted_or_forgotten_gang_is_not_due() -> None:
    clock = Clock()
    watch = ReachWatch(5.0, clock=clock)
    watch.admitted("ns/a")
    watch.admitted("ns/b")
    clock.now += 4.0
    watch.restart("ns/a")  # pipelined: its members are let go once the room frees
    watch.forget("ns/b")
    clock.now += 4.0
    assert watch.due() == []
    clock.now += 1.0
    assert watch.due() == ["ns/a"]


def test_no_timeout_no_expiry() -> None:
    clock = Clock()
    watch = ReachWatch(0.0, clock=clock)
    watch.admitted("ns/a")
    clock.now += 1e6
    assert watch.due() == []


def _refused_for_pods(key: str) -> Waiting:
    return Waiting(
        key, "q", ALLOCATE, "allocate", reason=f"gang {key}: 0/2 members created", unmade=True
    )


def test_an_enqueued_gang_whose_pods_never_come_is_due_and_backs_off_doubling() -> None:
    clock = Clock()
    watch = ReachWatch(30.0, backoff=10.0, max_backoff=300.0, clock=clock)
    inqueue = _group("a", "Inqueue")
    watch.observe(_refused_for_pods("ns/a"), inqueue)
    clock.now += 29.9
    watch.observe(_refused_for_pods("ns/a"), inqueue)  # timed from the first refusal
    assert watch.expiries({"ns/a": inqueue}, (), *_parts()) == []
    clock.now += 0.1
    [expiry] = watch.expiries({"ns/a": inqueue}, (), *_parts())
    assert expiry.key == "ns/a" and expiry.reason == MEMBERS_NOT_MADE
    assert "its pods were not all made within 30s of its enqueue" in expiry.why
    assert "the room it held in queue q is released" in expiry.why
    first = watch.backoffs()["ns/a"][1]
    # Enqueued again after its backoff and still without pods: twice as long.
    watch.observe(_refused_for_pods("ns/a"), inqueue)
    clock.now += 30.0
    watch.expiries({"ns/a": inqueue}, (), *_parts())
    assert watch.backoffs()["ns/a"][1] - first == pytest.approx(10.0, abs=1.0)


def test_pods_made_or_a_gang_no_longer_enqueued_stop_the_clock() -> None:
    clock = Clock()
    watch = ReachWatch(30.0, clock=clock)
    inqueue = _group("a", "Inqueue")
    watch.observe(_refused_for_pods("ns/a"), inqueue)
    made = [_member("p0"), _member("p1")]
    no_room = Waiting("ns/a", "q", ALLOCATE, "allocate", reason="no room")
    watch.observe(no_room, inqueue, lambda key: made)
    watch.observe(_refused_for_pods("ns/b"), _group("b", "Pending"))
    clock.now += 60.0
    groups = {"ns/a": inqueue, "ns/b": _group("b", "Pending")}
    assert watch.expiries(groups, (), *_parts()) == []


def _parts() -> tuple[GangLedger, SlotWatch, Callable[[str], list[PodRecord]]]:
    ledger = GangLedger()
    return ledger, SlotWatch(ClusterCache(), ledger), lambda key: []


def _group(name: str, phase: str) -> PodGroupRecord:
    return PodGroupRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"queue": "q", "minMember": 2},
            "status": {"phase": phase},
        }
    )


def _member(name: str, **condition: Any) -> PodRecord:
    status = {"conditions": [{"type": "PodScheduled", "status": "False", **condition}]}
    return PodRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"containers": []},
            "status": status if condition else {},
        }
    )


CLAIM = '0/2 nodes are available: persistentvolumeclaim "data" not found.'
OURS = "0/2 nodes are available: 2 gang ns/a: waiting for admission: queue q is full."
GATED = "Scheduling is blocked due to non-empty scheduling gates"


def test_only_a_refusal_in_kube_schedulers_own_words_is_turned_away() -> None:
    claim = _member("p0", reason="Unschedulable", message=CLAIM)
    assert turned_away("ns/a", [claim])
    # Not tried since (no refusal, still gated) or last refused by vulcan: it is queued.
    never = _member("p1")
    gated = _member("p2", reason="SchedulingGated", message=GATED)
    ours = _member("p3", reason="Unschedulable", message=OURS)
    assert not turned_away("ns/a", [never, gated, ours])
    assert turned_away("ns/a", [never, gated, ours, claim])
    assert never.refusal == gated.refusal == "" and ours.unschedulable and gated.unschedulable


def test_an_admitted_gang_whose_members_were_not_tried_yet_is_timed_again() -> None:
    clock = Clock()
    watch = ReachWatch(30.0, backoff=10.0, clock=clock)
    ledger, slots, _ = _parts()
    ledger.reserve(Reservation("ns/p0", "n0", ResourceVector({"cpu": 1}), "ns/a"))
    members = {"ns/a": [_member("p0", reason="Unschedulable", message=OURS)]}
    watch.admitted("ns/a")
    clock.now += 30.0
    groups = {"ns/a": _group("a", "Inqueue")}
    assert watch.expiries(groups, ("ns/a",), ledger, slots, members.__getitem__) == []
    # kube-scheduler tried it again and turned it away before asking vulcan: 30 s later it
    # expires (timed again from the pass that found it untried).
    members["ns/a"] = [_member("p0", reason="Unschedulable", message=CLAIM)]
    clock.now += 29.9
    assert watch.expiries(groups, ("ns/a",), ledger, slots, members.__getitem__) == []
    clock.now += 0.1
    [expiry] = watch.expiries(groups, ("ns/a",), ledger, slots, members.__getitem__)
    assert expiry.key == "ns/a" and expiry.reason == MEMBERS_NOT_REACHED


@pytest.mark.parametrize(
    ("message", "vulcans"),
    [
        ("gang ns/g: waiting for admission: queue q is full", True),
        ("gang ns/g is no longer whole: lost ns/g-1", True),
        ("podgroup ns/g not found", True),
        ("0/4 nodes are available: 4 Insufficient cpu.", False),
        ("gang ns/g2: waiting for admission", False),  # another gang's words
        ("pod has unbound immediate PersistentVolumeClaims", False),
    ],
)
def test_whose_words_a_refusal_is(message: str, vulcans: bool) -> None:
    assert vulcan_refused(message, "ns/g") is vulcans


def test_a_hold_does_not_restart_the_clock_of_an_enqueued_gang_without_its_pods() -> None:
    clock = Clock()
    watch = ReachWatch(30.0, clock=clock)
    inqueue = _group("a", "Inqueue")
    watch.observe(_refused_for_pods("ns/a"), inqueue, lambda key: [_member("p0")])
    clock.now += 20.0
    # Its queue drains for a starving gang: refused by the hold, its pods still not there.
    held = Waiting("ns/a", "q", ALLOCATE, "allocate", reason="hold", held=True)
    watch.observe(held, inqueue, lambda key: [_member("p0")])
    clock.now += 10.0
    [expiry] = watch.expiries({"ns/a": inqueue}, (), *_parts())
    assert expiry.reason == MEMBERS_NOT_MADE
    # Its two pods made: a refusal for another reason stops the clock.
    watch.observe(_refused_for_pods("ns/b"), _group("b", "Inqueue"))
    held_b = Waiting("ns/b", "q", ALLOCATE, "allocate", reason="hold", held=True)
    watch.observe(held_b, _group("b", "Inqueue"), lambda key: [_member("p0"), _member("p1")])
    clock.now += 60.0
    assert watch.expiries({"ns/b": _group("b", "Inqueue")}, (), *_parts()) == []


def test_pods_being_made_restart_the_clocks_of_the_gang_and_of_those_found_short_after_it() -> None:
    """A hundred Jobs submitted at once: their controller makes their pods a few Jobs at a
    time. A gang whose pods are being made is not late, nor is one enqueued after it (its turn
    has not come); one enqueued before it, whose pods do not come, is."""
    clock = Clock()
    watch = ReachWatch(30.0, clock=clock)
    groups = {f"ns/{name}": _group(name, "Inqueue") for name in ("early", "busy", "next")}
    made: dict[str, list[PodRecord]] = {key: [] for key in groups}
    for key, group in groups.items():
        watch.observe(_refused_for_pods(key), group, made.__getitem__)
        clock.now += 1.0
    for step in range(3):  # "busy" gets a pod every 20 s
        clock.now += 20.0
        made["ns/busy"] = made["ns/busy"] + [_member(f"p{step}")]
        for key, group in groups.items():
            watch.observe(_refused_for_pods(key), group, made.__getitem__)
        expired = [e.key for e in watch.expiries(groups, (), *_parts())]
        assert expired == (["ns/early"] if step == 1 else [])
        if expired:
            groups.pop("ns/early")  # sent back to Pending
    clock.now += 30.0
    expired = [e.key for e in watch.expiries(groups, (), *_parts())]
    assert expired == ["ns/busy", "ns/next"]  # nothing made for 30 s


def test_a_group_whose_pods_never_come_backs_off_longer_each_time_it_is_enqueued_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    wall = [1_000.0]
    monkeypatch.setattr("extender.unreached.time.time", lambda: wall[0])
    watch = ReachWatch(30.0, backoff=10.0, max_backoff=300.0, clock=clock)
    inqueue, pending = _group("a", "Inqueue"), _group("a", "Pending")
    waits = []
    for _ in range(3):
        watch.observe(_refused_for_pods("ns/a"), inqueue)
        clock.now += 30.0
        assert len(watch.expiries({"ns/a": inqueue}, (), *_parts())) == 1
        waits.append(watch.backoffs()["ns/a"][1] - wall[0])
        # Sent back to Pending, it waits out its backoff, refused at enqueue meanwhile and
        # once more after it (the queue is full), then is enqueued again.
        dequeued = Waiting(
            "ns/a", "q", ALLOCATE, "allocate", reason="back", dequeue=True, unmade=True
        )
        watch.observe(dequeued, inqueue)
        full = Waiting("ns/a", "q", "enqueue", "enqueue", reason="queue q is full")
        watch.observe(full, pending)
        wall[0] += waits[-1]
        assert "ns/a" not in watch.backoffs()
        watch.observe(full, pending)
    assert waits == pytest.approx([10.0, 20.0, 40.0])


def test_a_gang_evicted_whole_backs_off_until_one_of_its_pods_exists() -> None:
    watch = ReachWatch(30.0)
    watch.emptied("ns/a", "preempted (whole) by gang ns/b")
    groups = {"ns/a": _group("a", "Pending")}
    pods: list[PodRecord] = []
    watch.refilled(groups, lambda key: pods)
    [(why, until)] = watch.backoffs().values()
    assert until == float("inf") and "preempted (whole) by gang ns/b" in why
    pods.append(_member("p0"))
    watch.refilled(groups, lambda key: pods)
    assert watch.backoffs() == {}
    watch.emptied("ns/a", "again")
    watch.refilled({}, lambda key: [])  # its PodGroup deleted
    assert watch.backoffs() == {}
