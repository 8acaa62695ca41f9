"""A queue's books within one session: an enqueued gang's room is counted once, in `inqueue`
while it waits and in `allocated` once placed, never in both (issue 48: with the placed gang's
minResources still in `inqueue`, the next gang of its queue was refused "allocated 4, inqueue 4"
although the queue had its room)."""

from __future__ import annotations

from typing import Any

from core.records import PodGroupRecord
from plugins.framework.memo import Memo
from tests.session_harness import ok, reason, run
from tests.unit.test_run_pass import cluster, member, session_of


def _group(name: str, phase: str, cpu: str) -> PodGroupRecord:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"queue": "q", "minMember": 1, "minResources": {"cpu": cpu}},
        "status": {"phase": phase},
    }
    return PodGroupRecord(body)


def _queue_of_two(second_phase: str = "Pending") -> Any:
    """Queue q may hold 6 cpu of the 8 there are. `first` (Inqueue: its 4 cpu counted in q's
    `inqueue`) and `second` (2 cpu) each have their pod; both fit: 4 + 2 = 6."""
    groups = [_group("first", "Inqueue", "4"), _group("second", second_phase, "2")]
    pods = [member("first-0", "first", "4"), member("second-0", "second", "2")]
    return cluster(groups, pods, capability="6")


def test_a_placed_gang_leaves_inqueue_as_it_enters_allocated() -> None:
    for memo in (None, Memo()):
        result = run(session_of("enqueue, allocate"), _queue_of_two(), memo=memo)
        decisions = {d.key: d for d in result.decisions}
        assert ok(decisions["ns/first"])
        assert ok(decisions["ns/second"]), reason(decisions["ns/second"])
        share = result.queues.model.shares["q"]
        assert share.allocated.cpu == 6_000
        assert share.inqueue.cpu == 0


def test_the_books_at_open_count_an_inqueue_gang_once() -> None:
    result = run(session_of("enqueue"), _queue_of_two())
    share = result.queues.model.shares["q"]
    assert share.allocated.cpu == 0
    assert share.inqueue.cpu == 4_000  # first's, not placed yet
    assert result.queues.counted_inqueue("ns/first") is not None
    assert result.queues.counted_inqueue("ns/second") is None


def test_a_second_inqueue_gang_counted_once_too() -> None:
    """Both Inqueue: the second is judged with the first's room in `allocated` only."""
    result = run(session_of("enqueue, allocate"), _queue_of_two("Inqueue"))
    assert all(ok(d) for d in result.decisions), [reason(d) for d in result.decisions]
    share = result.queues.model.shares["q"]
    assert (share.allocated.cpu, share.inqueue.cpu) == (6_000, 0)
