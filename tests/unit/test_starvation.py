"""plugins.actions.starvation: which gang a queue drains for (issue 31's soak, seed 2026): the one
whose only obstacle is its queue's share, while its minimum fits that share."""

from __future__ import annotations

from core.records import PodGroupRecord
from core.resources import ResourceVector
from plugins.actions.starvation import (
    HOLD_SECONDS,
    Starvation,
    held_for,
    holds,
    waits_for_share,
)
from plugins.framework.config import default_config
from plugins.framework.extension_points import PassState
from plugins.framework.pass_input import QueueWait
from plugins.framework.registry import build_policy
from plugins.framework.session import Session
from plugins.framework.starvation_book import inqueue_lifted
from plugins.model import gang as gangs
from plugins.model.gang import GangView
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_share import QueueInput
from tests.session_harness import session
from tests.unit.test_actions import cluster, group
from tests.unit.test_gang_placement import pod

SESSION = build_policy(default_config())
CPU = "cpu"


def _state(allocated: int, request: int, *, open_: bool = True, total: int = 16) -> PassState:
    """Queue q of a `total`-cpu cluster holding `allocated` cpu and asking `request`; queue
    other asks for the rest so q deserves `request` at most (its weight wins nothing more)."""
    queues = {
        "q": QueueInput(
            "q",
            allocated=ResourceVector({CPU: allocated * 1000}),
            request=ResourceVector({CPU: request * 1000}),
            open=open_,
        ),
    }
    model = proportion_shares(ResourceVector({CPU: total * 1000}), list(queues.values()))
    return PassState(model=model, inputs=queues, total={CPU: total * 1000})


def _big(min_cpu: int, members: int = 5) -> tuple[PodGroupRecord, GangView]:
    g = group("big", members, queue="q", minResources={CPU: str(min_cpu)})
    snap = cluster(
        ["n1", "n2", "n3", "n4"],
        [g],
        [pod(f"big-{i}", cpu="2", group="big") for i in range(members)],
    )
    view = gangs.gang_view(snap, g.key)
    assert view is not None
    return g, view


def _ssn(state: PassState) -> Session:
    ssn = session(SESSION, cluster([], [], []))
    ssn.state = state
    return ssn


def test_a_gang_refused_by_its_queue_share_that_fits_the_share_starves() -> None:
    g, view = _big(10)
    # q deserves 12 (its request): 4 held + 10 > 12, and 10 <= 12.
    state = _state(4, 12)
    assert state.model is not None and state.model.shares["q"].deserved.cpu == 12_000
    assert waits_for_share(_ssn(state), g, view)


def test_no_starving_gang_when_the_share_takes_it_or_could_never() -> None:
    g, view = _big(10)
    assert not waits_for_share(_ssn(_state(2, 12)), g, view)  # 2 + 10 <= 12: it goes now
    g8, view8 = _big(10)
    # q deserves 8: its minimum alone exceeds the share, holding the queue helps no one.
    assert not waits_for_share(_ssn(_state(4, 8)), g8, view8)
    assert not waits_for_share(_ssn(_state(4, 12, open_=False)), g, view)  # closed queue


def test_a_gang_not_valid_yet_does_not_hold_its_queue() -> None:
    g = group("big", 5, queue="q", minResources={CPU: "10"})
    snap = cluster(["n1"], [g], [pod(f"big-{i}", cpu="2", group="big") for i in range(3)])
    view = gangs.gang_view(snap, g.key)
    assert view is not None
    assert not waits_for_share(_ssn(_state(4, 12)), g, view)  # 3/5 members made


def test_the_reason_names_the_gang_waited_for() -> None:
    assert "for gang ns/big" in held_for("ns/big", "q")


def test_hold_phases_alternate_with_backfill_phases_from_when_it_began_to_starve() -> None:
    """The queue's other gangs wait at most one hold phase at a time (issue 31's stall bound);
    the starving gang gets a drained queue once in every two phases."""
    since = 1000.0
    assert holds(since, since)
    assert holds(since, since + HOLD_SECONDS - 0.5)
    assert not holds(since, since + HOLD_SECONDS)
    assert not holds(since, since + 2 * HOLD_SECONDS - 0.5)
    assert holds(since, since + 2 * HOLD_SECONDS)
    assert holds(since, since - 5.0)  # a clock step back: still the first hold


def test_inqueue_is_lifted_for_the_block_and_restored_exactly() -> None:
    queues = [
        QueueInput("q", inqueue=ResourceVector({CPU: 6000}), request=ResourceVector({CPU: 1}))
    ]
    model = proportion_shares(ResourceVector({CPU: 16_000}), queues)
    with inqueue_lifted(model, "q", ResourceVector({CPU: 10_000})):
        assert model.shares["q"].inqueue.cpu == 0  # floored, as release_inqueue does
    assert model.shares["q"].inqueue.cpu == 6000
    with inqueue_lifted(model, "q", None):
        assert model.shares["q"].inqueue.cpu == 6000


def test_elastic_members_wait_for_a_starving_gang_in_hold_phases_only() -> None:
    """A job's next task, counted as elastic once its first task finished, must still run: it
    waits one hold phase at most (issue 31's soak: job-109's t1 pods, held for good)."""
    book = Starvation({"q": QueueWait(100.0, {}, "ns/big")})
    assert book.holding("q", 100.0 + HOLD_SECONDS / 2) == "ns/big"
    assert book.holding("q", 100.0 + HOLD_SECONDS * 1.5) is None
    assert book.holding("other", 100.0) is None


def cpu(cores: int) -> ResourceVector:
    return ResourceVector({CPU: cores * 1000})


def test_the_need_is_what_every_gang_waiting_for_the_share_asks() -> None:
    """In a backfill phase the queue's other gangs are judged without what every gang waiting
    for its share asks (its `inqueue`): not the starving gang's alone (soak seed 37)."""
    book = Starvation({}, lambda key: "q" if key != "ns/x" else "other")
    book.visit("q")
    book.note("q", "ns/big", cpu(30), held=False)
    book.starve("q", "ns/big", 5.0)
    book.note("q", "ns/mid", cpu(10), held=False)
    book.starve("q", "ns/mid", 6.0)  # a later one waits beside the first
    assert book.of("q") == ("ns/big", 5.0, cpu(40))
    book.note("q", "ns/mid", cpu(8), held=False)  # asked again: counted once, as it asks now
    assert book.of("q") == ("ns/big", 5.0, cpu(38))


def test_a_held_gang_stays_noted_and_any_other_decision_drops_it() -> None:
    book = Starvation({})
    book.visit("q")
    book.note("q", "ns/big", cpu(30), held=False)
    book.starve("q", "ns/big", 1.0)
    book.note("q", "ns/mid", cpu(10), held=False)
    book.note("q", "ns/mid", None, held=True)  # a hold phase: not decided
    assert book.of("q") == ("ns/big", 1.0, cpu(40))
    book.note("q", "ns/mid", None, held=False)  # admitted, or refused for another reason
    assert book.of("q") == ("ns/big", 1.0, cpu(30))


def test_what_a_session_leaves_the_next() -> None:
    """A queue with a starving gang keeps since when it starves and its waiters; a visited
    queue without one forgets both; an unvisited one stays as it was left. A gang gone or
    moved to another queue waits there no more."""
    left = {
        "q": QueueWait(1.0, {"ns/big": cpu(30), "ns/moved": cpu(2), "ns/gone": cpu(1)}, "ns/big"),
        "r": QueueWait(2.0, {"ns/r": cpu(4)}, "ns/r"),
        "s": QueueWait(3.0, {"ns/s": cpu(4)}, "ns/s"),
    }
    queues = {"ns/big": "q", "ns/moved": "r", "ns/r": "r", "ns/s": "s"}
    book = Starvation(left, queues.get)
    book.visit("q")
    book.note("q", "ns/big", cpu(30), held=False)
    book.starve("q", "ns/big", 50.0)  # starving since the first pass that elected one
    book.visit("r")  # nothing in r waits for its share this time
    closed = book.close()
    assert closed["q"] == QueueWait(1.0, {"ns/big": cpu(30)}, "ns/big")
    assert "r" not in closed
    assert closed["s"] == left["s"]
