"""Gangs the memo passes by (plugins.framework.memo.Memo.settled): a running gang seen and kept is
not read again while nothing of its own moved, and is decided again as a pass without the memo
decides it the moment one of its facts moves, even when nobody told the memo
(plugins.framework.fact_changes compares the extender's facts whole)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from core.cache import ClusterCache
from core.resources import ResourceVector
from plugins.framework.fact_changes import FactChanges
from plugins.framework.memo import Memo
from plugins.framework.pass_input import ExtenderFacts, PassInput, Settings
from plugins.framework.run import run_pass
from tests.session_harness import Ledger
from tests.unit.test_memo_property import POLICY, group, member, node, queue


def _cluster(running: int) -> ClusterCache:
    cache = ClusterCache()
    cache.on_node_add(node("n0", 64))
    cache.on_queue_add(queue("q", 1, None))
    for index in range(running):
        name = f"g{index}"
        cache.on_podgroup_add(group(name, "q", 1, 1, "Running", False))
        cache.on_pod_add(member(f"{name}-0", name, 1, 0, "n0"))
    return cache


def _given(cache: ClusterCache, admitted: Collection[str], **facts: Any) -> PassInput:
    return PassInput(
        cache.live_view(),
        ExtenderFacts(admitted=frozenset(admitted), ledger=facts.pop("ledger", Ledger()), **facts),
        Settings(queue_of=cache.queue_of),
        0.0,
    )


def _summaries(decisions: list[Any]) -> Mapping[str, tuple[Any, ...]]:
    return {d.key: d.summary() for d in decisions}


def test_a_running_gang_seen_is_passed_by_until_one_of_its_facts_moves() -> None:
    cache = _cluster(20)
    everyone = {f"ns/g{index}" for index in range(20)}
    memo = Memo()
    read: list[str] = []
    facts_of = memo.facts
    memo.facts = lambda ssn, key: read.append(key) or facts_of(ssn, key)  # type: ignore[method-assign]

    def both(admitted: Collection[str], **facts: Any) -> list[Any]:
        memo.changed(cache.take_dirty_groups())
        given_ = _given(cache, admitted, **facts)
        with_memo = run_pass(given_, POLICY, memo)
        fresh = run_pass(_given(cache, admitted, **facts), POLICY)
        table = {key: s for (key, _), s in memo.table().items()}
        table.update(_summaries(with_memo.decisions))
        assert table == _summaries(fresh.decisions)
        return with_memo.decisions

    assert len(both(everyone)) == 20  # each seen once
    # A member of one gang changed (the queue is visited): it is seen again, the other 19 are
    # passed by unread.
    cache.on_pod_add(member("g3-0", "g3", 2, 0, "n0"))
    read.clear()
    assert [d.key for d in both(everyone)] == ["ns/g3"]
    assert set(read) == {"ns/g3"}
    # The extender forgot one admission, another backs off, a third holds room: no one told
    # the memo, and each is decided again as without it (adopted, seen with its new facts);
    # the other 17 are still passed by unread.
    read.clear()
    ledger = Ledger({"ns/g9-x": ("n0", ResourceVector({"cpu": 1000}), "ns/g9")})
    decided = both(everyone - {"ns/g5"}, backoff={"ns/g7": ("timed out", 9.0)}, ledger=ledger)
    assert {d.key: type(d).__name__ for d in decided} == {
        "ns/g5": "Adopted",
        "ns/g7": "Seen",
        "ns/g9": "Seen",
    }
    assert set(read) <= {"ns/g5", "ns/g7", "ns/g9"}


def test_fact_changes_name_the_gangs_whose_facts_moved() -> None:
    changes = FactChanges()
    ledger = Ledger({"ns/a-0": ("n0", ResourceVector({"cpu": 1000}), "ns/a")})
    first = ExtenderFacts(admitted={"ns/a", "ns/b"}, ledger=ledger, promised={"ns/c": {"p"}})
    assert changes.moved(first) is None  # the first pass: any may have moved
    assert changes.moved(first) == set()
    moved = ExtenderFacts(
        admitted={"ns/a", "ns/d"},
        ledger=Ledger({"ns/a-0": ("n0", ResourceVector({"cpu": 2000}), "ns/a")}),
        backoff={"ns/e": ("timed out", 1.0)},
        promised={},
    )
    assert changes.moved(moved) == {"ns/a", "ns/b", "ns/c", "ns/d", "ns/e"}
