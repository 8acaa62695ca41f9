"""Volcano's enqueue for any PodGroup (issue 48, item 3): a user's group is enqueued on its
minResources before its pods exist, holds that room in its queue's `inqueue` while Inqueue, and
its gang is placed whole only once enough members exist."""

from __future__ import annotations

from typing import Any

from core.records import PodGroupRecord
from plugins.framework.decisions import Enqueued, Waiting
from plugins.framework.memo import Memo
from tests.session_harness import ok, run
from tests.unit.test_run_pass import cluster, member, session_of


def _user_group(name: str, phase: str, cpu: str, min_member: int = 2) -> PodGroupRecord:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"queue": "q", "minMember": min_member, "minResources": {"cpu": cpu}},
        "status": {"phase": phase},
    }
    return PodGroupRecord(body)


def test_a_users_podgroup_without_pods_is_enqueued_on_its_min_resources() -> None:
    for memo in (None, Memo()):
        result = run(
            session_of("enqueue, allocate"),
            cluster([_user_group("early", "Pending", "2")], [], capability="8"),
            memo=memo,
        )
        [decision] = result.decisions
        assert isinstance(decision, Enqueued), decision
        assert decision.waits is None


def test_one_refused_by_its_queues_capability_is_not() -> None:
    snap = cluster([_user_group("big", "Pending", "8")], [], capability="6")
    [decision] = run(session_of("enqueue, allocate"), snap).decisions
    assert isinstance(decision, Waiting), decision
    assert "queue q cannot hold minResources" in decision.reason


def test_enqueued_with_too_few_members_it_says_it_waits_for_the_rest() -> None:
    snap = cluster(
        [_user_group("early", "Pending", "2")], [member("early-0", "early", "1")], capability="8"
    )
    [decision] = run(session_of("enqueue, allocate"), snap).decisions
    assert isinstance(decision, Enqueued), decision
    assert decision.waits == "gang ns/early: 1/2 members created"


def test_inqueue_without_pods_it_holds_its_room_and_the_next_gang_waits() -> None:
    """Queue q may hold 6: `early` (Inqueue, no pods yet) holds 4, so `late` (4, its pods
    there) waits; with early's pods made, early is placed whole."""
    groups = [_user_group("early", "Inqueue", "4"), _user_group("late", "Pending", "4", 1)]
    snap = cluster(groups, [member("late-0", "late", "4")], capability="6")
    result = run(session_of("enqueue, allocate"), snap)
    decisions = {d.key: d for d in result.decisions}
    assert isinstance(decisions["ns/late"], Waiting), decisions["ns/late"]
    assert "inqueue 4" in decisions["ns/late"].reason
    assert result.queues.model.shares["q"].inqueue.cpu == 4_000

    pods = [member(f"early-{i}", "early", "2") for i in range(2)]
    result = run(session_of("enqueue, allocate"), cluster(groups[:1], pods, capability="6"))
    [decision] = result.decisions
    assert ok(decision) and len(decision.slots) == 2
