"""extender.share_waiters: the gangs of a queue that wait for its share, and what they ask
together (lifted from the queue's `inqueue` in a backfill phase)."""

from __future__ import annotations

from core.resources import ResourceVector
from extender.share_waiters import ShareWaiters


def cpu(cores: int) -> ResourceVector:
    return ResourceVector({"cpu": cores * 1000})


def test_the_need_is_what_every_waiting_gang_asks() -> None:
    waiters = ShareWaiters()
    assert waiters.need("q") is None
    waiters.note("q", "ns/big", cpu(30), held=False)
    waiters.note("q", "ns/mid", cpu(10), held=False)
    waiters.note("other", "ns/x", cpu(4), held=False)
    assert waiters.need("q") == cpu(40)
    # Asked again (its demand changed as members came): counted once, as it asks now.
    waiters.note("q", "ns/mid", cpu(8), held=False)
    assert waiters.need("q") == cpu(38)
    assert waiters.waiting("q") == {"ns/big", "ns/mid"}


def test_a_held_gang_stays_and_any_other_decision_drops_it() -> None:
    waiters = ShareWaiters()
    waiters.note("q", "ns/big", cpu(30), held=False)
    waiters.note("q", "ns/mid", cpu(10), held=False)
    waiters.note("q", "ns/mid", None, held=True)  # a hold phase: not decided
    assert waiters.waiting("q") == {"ns/big", "ns/mid"}
    waiters.note("q", "ns/mid", None, held=False)  # admitted, or refused for another reason
    assert waiters.waiting("q") == {"ns/big"} and waiters.need("q") == cpu(30)
    waiters.forget("ns/big")
    assert waiters.need("q") is None and waiters.waiting("q") == set()


def test_a_queue_that_stops_starving_forgets_its_waiters() -> None:
    waiters = ShareWaiters()
    waiters.note("q", "ns/big", cpu(30), held=False)
    waiters.note("r", "ns/other", cpu(2), held=False)
    waiters.clear("q")
    assert waiters.need("q") is None
    assert waiters.need("r") == cpu(2)


def test_a_gang_noted_in_another_queue_leaves_its_old_one() -> None:
    waiters = ShareWaiters()
    waiters.note("q", "ns/big", cpu(30), held=False)
    waiters.note("q", "ns/mid", cpu(10), held=False)
    assert waiters.need("q") == cpu(40)
    waiters.note("r", "ns/mid", cpu(10), held=False)  # its PodGroup moved to queue r
    assert waiters.need("q") == cpu(30) and waiters.need("r") == cpu(10)
    waiters.clear("r")
    waiters.note("r", "ns/mid", None, held=False)  # nothing left to drop
    assert waiters.waiting("r") == set() and waiters.need("q") == cpu(30)
