"""extender.unreached.ReachWatch: which admitted gangs' members never reached filter, and the
backoff that follows (doubling, reset once a member comes)."""

from __future__ import annotations

from extender.unreached import ReachWatch


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
