"""plugins.actions.starvation: which gang a queue drains for (issue 31's soak, seed 2026): the one
whose only obstacle is its queue's share, while its minimum fits that share."""

from __future__ import annotations

from core.resources import ResourceVector
from plugins.actions.starvation import (
    HOLD_SECONDS,
    held_for,
    holding,
    holds,
    inqueue_lifted,
    waits_for_share,
)
from plugins.framework.config import default_config
from plugins.framework.extension_points import PassState
from plugins.framework.registry import build_policy
from plugins.model import gang as gangs
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_share import QueueInput
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


def _big(min_cpu: int, members: int = 5):
    g = group("big", members, queue="q", minResources={CPU: str(min_cpu)})
    snap = cluster(
        ["n1", "n2", "n3", "n4"],
        [g],
        [pod(f"big-{i}", cpu="2", group="big") for i in range(members)],
    )
    view = gangs.gang_view(snap, g.key)
    assert view is not None
    return g, view


def test_a_gang_refused_by_its_queue_share_that_fits_the_share_starves() -> None:
    g, view = _big(10)
    # q deserves 12 (its request): 4 held + 10 > 12, and 10 <= 12.
    state = _state(4, 12)
    assert state.model is not None and state.model.shares["q"].deserved.cpu == 12_000
    assert waits_for_share(SESSION, state, g, view)


def test_no_starving_gang_when_the_share_takes_it_or_could_never() -> None:
    g, view = _big(10)
    assert not waits_for_share(SESSION, _state(2, 12), g, view)  # 2 + 10 <= 12: it goes now
    g8, view8 = _big(10)
    # q deserves 8: its minimum alone exceeds the share, holding the queue helps no one.
    assert not waits_for_share(SESSION, _state(4, 8), g8, view8)
    assert not waits_for_share(SESSION, _state(4, 12, open_=False), g, view)  # closed queue


def test_a_gang_not_valid_yet_does_not_hold_its_queue() -> None:
    g = group("big", 5, queue="q", minResources={CPU: "10"})
    snap = cluster(["n1"], [g], [pod(f"big-{i}", cpu="2", group="big") for i in range(3)])
    view = gangs.gang_view(snap, g.key)
    assert view is not None
    assert not waits_for_share(SESSION, _state(4, 12), g, view)  # 3/5 members made


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
    starving, since = {"q": "ns/big"}, {"q": 100.0}
    assert holding(starving, since, "q", 100.0 + HOLD_SECONDS / 2) == "ns/big"
    assert holding(starving, since, "q", 100.0 + HOLD_SECONDS * 1.5) is None
    assert holding(starving, since, "other", 100.0) is None
