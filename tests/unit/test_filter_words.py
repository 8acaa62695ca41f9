"""extender.admissions.Admissions.told: what filter tells a waiting gang's members keeps its
words while only the reason's numbers move (kube-scheduler writes the pod's condition and an
event whenever they change), for at most `refresh` seconds; a new kind of reason at once."""

from __future__ import annotations

import logging

import pytest

from extender.admissions import Admissions


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


FULL = "gang ns/a: waiting for admission: queue q cannot hold minResources: cpu need {}, inqueue {}"


def test_numbers_that_move_keep_the_words_until_the_refresh() -> None:
    clock = Clock()
    admissions = Admissions(refresh=30.0, clock=clock)
    assert admissions.told("ns/a") is None
    admissions.refuse("ns/a", FULL.format(4, 10))
    assert admissions.told("ns/a") == FULL.format(4, 10)
    clock.now += 29.0
    admissions.refuse("ns/a", FULL.format(4, 12))
    assert admissions.told("ns/a") == FULL.format(4, 10)  # the same words: no write
    assert admissions.reasons["ns/a"] == FULL.format(4, 12)  # (what explain reads)
    clock.now += 1.0
    assert admissions.told("ns/a") == FULL.format(4, 12)  # refreshed
    admissions.refuse("ns/a", "gang ns/a: 1/2 members created")
    assert admissions.told("ns/a") == "gang ns/a: 1/2 members created"  # another reason: now


def test_a_gangs_own_counts_are_words_told_at_once() -> None:
    """A member created (1/3 -> 2/3) is news to the gang's members and its PodGroup condition,
    not a queue's number moving."""
    admissions = Admissions(refresh=30.0, clock=Clock())
    admissions.refuse("ns/a", "gang ns/a: 1/3 members created")
    assert admissions.told("ns/a") == "gang ns/a: 1/3 members created"
    admissions.refuse("ns/a", "gang ns/a: 2/3 members created")
    assert admissions.told("ns/a") == "gang ns/a: 2/3 members created"


def test_admission_and_deletion_forget_what_was_told() -> None:
    clock = Clock()
    admissions = Admissions(refresh=30.0, clock=clock)
    admissions.refuse("ns/a", FULL.format(4, 10))
    admissions.told("ns/a")
    admissions.admit("ns/a")
    assert admissions.told("ns/a") is None
    admissions.forget("ns/a")
    admissions.refuse("ns/a", FULL.format(4, 11))
    assert admissions.told("ns/a") == FULL.format(4, 11)
    admissions.deleted("ns/a")
    admissions.refuse("ns/a", FULL.format(4, 12))
    assert admissions.told("ns/a") == FULL.format(4, 12)


def test_an_admission_dropped_is_logged_with_why(caplog: pytest.LogCaptureFixture) -> None:
    admissions = Admissions()
    admissions.forget("ns/a", "never admitted")  # nothing to drop: no line
    admissions.admit("ns/a")
    with caplog.at_level(logging.INFO, logger="vulcan.decisions"):
        admissions.forget("ns/a", "its held binds timed out")
        admissions.forget("ns/a", "again")  # dropped already
    [record] = [r for r in caplog.records if r.getMessage() == "gang admission dropped"]
    assert record.__dict__["podgroup"] == "ns/a"
    assert record.__dict__["reason"] == "its held binds timed out"
