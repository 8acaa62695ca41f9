"""plugins.framework.books_check: the queues' accounting invariants on one booking (what it
breaks, what it leaves to a cluster that shrank), and a session that reports them."""

from __future__ import annotations

from core.resources import ResourceVector
from plugins.framework.books_check import (
    ALLOCATED_OVER_CAPABILITY,
    INQUEUE_OVER_CAPABILITY,
    VICTIM_PROMISED_TWICE,
    booking_breaches,
    books_before,
)
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_share import QueueInput, ShareModel
from plugins.model.victims import VictimUnit, books_released
from tests.session_harness import session
from tests.unit.test_run_pass import cluster, session_of

TOTAL = ResourceVector({"cpu": 40_000})


def cpu(n: int) -> ResourceVector:
    return ResourceVector({"cpu": n * 1000})


def model(allocated: int = 0, inqueue: int = 0, elastic: int = 0) -> ShareModel:
    """Queue q: capability 20 cpu of the 40 there are."""
    queue = QueueInput(
        "q",
        capability=cpu(20),
        allocated=cpu(allocated),
        request=cpu(40),
        inqueue=cpu(inqueue),
        elastic=cpu(elastic),
    )
    return proportion_shares(TOTAL, [queue])


def test_an_enqueue_within_real_capability_breaks_nothing() -> None:
    shares = model(allocated=10, inqueue=6)
    before = books_before(shares, "q")
    shares.on_enqueued("q", cpu(4))  # 10 + 6 + 4 = 20
    assert booking_breaches(shares, before, "ns/job") == []


def test_an_enqueue_past_real_capability_is_a_breach_with_its_numbers() -> None:
    shares = model(allocated=10, inqueue=6)
    before = books_before(shares, "q")
    shares.on_enqueued("q", cpu(5))
    [breach] = booking_breaches(shares, before, "ns/job")
    assert (breach.kind, breach.subject, breach.job) == (INQUEUE_OVER_CAPABILITY, "q", "ns/job")
    assert breach.detail == ("cpu: allocated 10 + inqueue 11 - elastic 0 > realCapability 20")


def test_elastic_members_are_room_an_enqueue_may_count_on() -> None:
    """Volcano's enqueue subtracts elastic: reclaim and preempt take those members first."""
    shares = model(allocated=14, inqueue=6, elastic=4)
    before = books_before(shares, "q")
    shares.on_enqueued("q", cpu(4))  # 14 + 10 - 4 = 20
    assert booking_breaches(shares, before, "ns/job") == []


def test_an_allocation_past_capability_is_a_breach() -> None:
    shares = model(allocated=18)
    before = books_before(shares, "q")
    shares.on_allocated("q", cpu(3))
    kinds = {b.kind for b in booking_breaches(shares, before, "ns/gang")}
    assert kinds == {ALLOCATED_OVER_CAPABILITY, INQUEUE_OVER_CAPABILITY}


def test_a_queue_already_over_is_not_the_bookings_doing() -> None:
    """The cluster shrank under the queue (a node went): a booking that does not grow what is
    over breaks nothing (an Inqueue gang placed on its own room); one that grows it does."""
    shares = model(allocated=22, inqueue=3)  # over its capability of 20 already
    before = books_before(shares, "q")
    shares.on_allocated("q", cpu(3))
    shares.release_inqueue("q", cpu(3))
    assert [b.kind for b in booking_breaches(shares, before, "ns/x")] == [
        ALLOCATED_OVER_CAPABILITY  # allocated grew: 25 > 20
    ]
    before = books_before(shares, "q")
    shares.release_inqueue("q", cpu(0))
    assert booking_breaches(shares, before, "ns/x") == []
    shares.on_enqueued("q", cpu(1))
    assert [b.kind for b in booking_breaches(shares, before, "ns/x")] == [INQUEUE_OVER_CAPABILITY]


def test_a_session_reports_a_victim_promised_to_a_second_job() -> None:
    ssn = session(session_of("enqueue, allocate"), cluster([], [], "8"))
    unit = VictimUnit(
        group="ns/low",
        queue="q",
        priority=0,
        pods=("ns/low-0",),
        freed=cpu(1),
        preemptable=True,
        critical=False,
        breaks_gang=True,
        creation="",
    )
    ssn.promise("ns/a", [unit])
    assert ssn.breaches == []
    ssn.promise("ns/b", [unit])
    [breach] = ssn.breaches
    assert (breach.kind, breach.subject, breach.job) == (VICTIM_PROMISED_TWICE, "ns/low-0", "ns/b")
    assert breach.detail == "promised to ns/b while promised to ns/a"


def test_room_a_backfill_phase_lends_is_the_bookings() -> None:
    """A starving queue's backfill phase judges a gang without the `inqueue` of the gangs that
    wait only for its share (they cannot use it at this share): placed on it, no breach; placed
    beyond it, one."""
    shares = model(allocated=10, inqueue=8)
    before = books_before(shares, "q")
    shares.on_allocated("q", cpu(6))  # 16 + 8 > 20, but 8 of it was lent
    assert booking_breaches(shares, before, "ns/small", lent=cpu(8)) == []
    assert [b.kind for b in booking_breaches(shares, before, "ns/small", lent=cpu(3))] == [
        INQUEUE_OVER_CAPABILITY
    ]


def _member(freed: int, *, elastic: bool, group_elastic: int, pods: int = 1) -> VictimUnit:
    return VictimUnit(
        group="ns/running",
        queue="q",
        priority=0,
        pods=tuple(f"ns/running-{i}" for i in range(pods)),
        freed=cpu(freed),
        preemptable=True,
        critical=False,
        breaks_gang=not elastic,
        creation="",
        elastic=elastic,
        group_elastic=cpu(group_elastic),
    )


def test_a_member_elastic_by_count_that_the_books_count_as_minimum_frees_its_room() -> None:
    """Seed 41's breach: a member beyond minMember of a gang whose bound members hold less than
    its minResources (its books' elastic 0) frees its request from allocated + inqueue -
    elastic; an allocation using that room breaks nothing. Had the books counted it elastic,
    evicting it would free nothing the check counts."""
    shares = model(allocated=10, inqueue=10)
    before = books_before(shares, "q")
    shares.on_allocated("q", cpu(3))  # 13 + 10 > 20 unless the victim's 3 leave the books
    victim = _member(3, elastic=True, group_elastic=0)
    assert booking_breaches(shares, before, "ns/new", evicting=[victim]) == []
    counted_elastic = _member(3, elastic=True, group_elastic=5)
    shares = model(allocated=10, inqueue=10, elastic=5)
    before = books_before(shares, "q")
    shares.on_allocated("q", cpu(8))  # 18 + 10 - 5 = 23 > 20: the victim frees none of it
    assert [
        b.kind for b in booking_breaches(shares, before, "ns/new", evicting=[counted_elastic])
    ] == [INQUEUE_OVER_CAPABILITY]


def test_what_eviction_takes_out_of_the_books() -> None:
    """Members one by one free at most the gang's elastic from `elastic`; the whole gang (which
    subsumes its members) frees all of it; a pod of no gang frees none."""
    one, two = _member(3, elastic=True, group_elastic=4), _member(3, elastic=True, group_elastic=4)
    whole = _member(10, elastic=False, group_elastic=4, pods=3)
    lone = VictimUnit(
        group=None,
        queue="p",
        priority=0,
        pods=("ns/lone",),
        freed=cpu(2),
        preemptable=True,
        critical=False,
        breaks_gang=False,
        creation="",
    )
    assert books_released([one, two]) == [("q", cpu(6), cpu(4))]
    assert books_released([one, whole]) == [("q", cpu(10), cpu(4))]
    assert books_released([lone]) == [("p", cpu(2), cpu(0))]
