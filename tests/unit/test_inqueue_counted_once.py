"""A queue's books within one session: an enqueued gang's room is counted once, in `inqueue`
while it waits and in `allocated` once placed, never in both (issue 48: with the placed gang's
minResources still in `inqueue`, the next gang of its queue was refused "allocated 4, inqueue 4"
although the queue had its room)."""

from __future__ import annotations

from typing import Any

from core.cache import ClusterCache
from core.records import PodGroupRecord, PodRecord, QueueRecord
from plugins.framework.decisions import Waiting
from plugins.framework.memo import Memo
from tests.session_harness import ok, reason, run
from tests.unit.test_gang_placement import node
from tests.unit.test_run_pass import cluster, member, podgroup, session_of


def _group(name: str, phase: str, cpu: str, queue: str = "q") -> PodGroupRecord:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"queue": queue, "minMember": 1, "minResources": {"cpu": cpu}},
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


def _two_queues() -> Any:
    """8 cpu between queues q and b (weight 1 each; b asks 8): q deserves 4. In q, `big`
    (Inqueue, minResources 6, its two pods there) and `small` (2 cpu, created after it)."""
    cache = ClusterCache()
    for name in ("n1", "n2"):
        cache.on_node_add(node(name, cpu="4"))
    for name in ("q", "b"):
        cache.on_queue_add(QueueRecord({"metadata": {"name": name}, "spec": {"weight": 1}}))
    big = _group("big", "Inqueue", "6")
    small = _group("small", "Pending", "2")
    other = _group("other", "Pending", "8", queue="b")
    for group in (big, small, other):
        cache.on_podgroup_add(group)
    for pod in (
        member("big-0", "big", "3"),
        member("big-1", "big", "3"),
        member("small-0", "small", "2"),
        member("other-0", "other", "8"),
    ):
        cache.on_pod_add(pod)
    return cache.snapshot()


def test_an_inqueue_gang_its_share_cannot_hold_goes_back_to_pending() -> None:
    """Its room is not the queue's `inqueue` from the session's open (the gang after it is
    enqueued on it in the same pass), and it is dequeued with the reason."""
    for memo in (None, Memo()):
        result = run(session_of("enqueue, allocate"), _two_queues(), memo=memo)
        decisions = {d.key: d for d in result.decisions}
        big = decisions["ns/big"]
        assert isinstance(big, Waiting) and big.dequeue, big
        assert "cannot hold minResources within its share: cpu need 6, deserves 4" in big.reason
        assert "back to Pending" in big.reason
        assert ok(decisions["ns/small"]), reason(decisions["ns/small"])
        assert result.queues.model.shares["q"].inqueue.is_zero()


def _promised_job(victim_exists: bool) -> Any:
    """Queue q (capability 8 of 8 cpu) runs `other` (4 cpu, same priority: no victim) and has
    `job` (minResources 8) enqueued on the promise of evicting `ns/low-0`."""
    job = _group("job", "Inqueue", "8")
    other = _group("other", "Running", "4")
    pods = [member("job-0", "job", "4"), member("job-1", "job", "4")]
    running = member("other-0", "other", "4")
    running.node, running.phase = "n1", "Running"
    pods.append(running)
    groups = [job, other]
    if victim_exists:
        low = member("low-0", "low", "4")
        low.node, low.phase = "n2", "Running"
        groups.append(_group("low", "Running", "4"))
        pods.append(low)
    return cluster(groups, pods, capability="8")


def test_a_job_whose_promised_victims_are_gone_is_judged_again() -> None:
    """Its victim gone and the room taken, the enqueue votes would not take it now: it goes
    back to Pending, its room no longer the queue's to hold. While the victim is there it
    stays enqueued."""
    promised = {"ns/job": ["ns/low-0"]}
    result = run(session_of("enqueue, allocate"), _promised_job(False), promised=promised)
    job = {d.key: d for d in result.decisions}["ns/job"]
    assert isinstance(job, Waiting) and job.dequeue, job
    assert job.reason.startswith(
        "gang ns/job: waiting for admission: the work it was enqueued to evict is gone, and "
        "queue q cannot hold minResources: cpu need 8, realCapability 8, allocated 4, inqueue 0"
    )
    assert result.queues.model.shares["q"].inqueue.is_zero()

    result = run(session_of("enqueue, allocate"), _promised_job(True), promised=promised)
    job = {d.key: d for d in result.decisions}["ns/job"]
    assert isinstance(job, Waiting) and not job.dequeue, job


def test_a_gangs_pods_beyond_its_minimum_must_fit_beside_what_is_enqueued() -> None:
    """Queue q (capability 6) has a Volcano Job enqueued for 4 (its pods not made yet: its
    `inqueue`). `small` declares minResources 1 but its pod asks 3: the vote passes (1 + 4 <=
    6) and its share would take it, but placed it would leave allocated 3 + inqueue 4 > 6."""
    job_owned = podgroup("job", job=True, minMember=1, minResources={"cpu": "4"})
    job_owned.phase = "Inqueue"
    small = _group("small", "Pending", "1")
    snap = cluster([job_owned, small], [member("small-0", "small", "3")], capability="6")
    result = run(session_of("enqueue, allocate"), snap)
    decision = {d.key: d for d in result.decisions}["ns/small"]
    assert isinstance(decision, Waiting), decision
    assert "queue q cannot hold this gang's pods: cpu need 3, realCapability 6" in decision.reason
    assert result.breaches == []


def test_members_beyond_a_gangs_minimum_count_as_elastic_in_the_pass() -> None:
    """`el` (minMember 1, minResources 2) has two 2-cpu pods: both placed, the second is
    elastic: the queue's allocated grows by 4 and its elastic by 2, as the next pass counts."""
    el = PodGroupRecord(
        {
            "metadata": {"name": "el", "namespace": "ns", "uid": "uid-el"},
            "spec": {"queue": "q", "minMember": 1, "minResources": {"cpu": "2"}},
            "status": {"phase": "Pending"},
        }
    )
    snap = cluster([el], [member("el-0", "el", "2"), member("el-1", "el", "2")], capability="8")
    result = run(session_of("enqueue, allocate"), snap)
    [decision] = result.decisions
    assert ok(decision) and len(decision.slots) == 2
    share = result.queues.model.shares["q"]
    assert (share.allocated.cpu, share.elastic.cpu) == (4_000, 2_000)


def _after_a_dead_gang(owner: dict[str, Any] | None) -> Any:
    """Queue q may hold 6 cpu. `dead` (Inqueue, minResources 4 for 2 members) lost a member
    (its node failed) and its other one ran to its end; `next` (4 cpu) waits with its pod."""
    dead = _group("dead", "Inqueue", "4")
    if owner is not None:
        body = {
            "metadata": {
                "name": "dead",
                "namespace": "ns",
                "uid": "uid-dead",
                "ownerReferences": [owner],
            },
            "spec": {"queue": "q", "minMember": 1, "minResources": {"cpu": "4"}},
            "status": {"phase": "Inqueue"},
        }
        dead = PodGroupRecord(body)
    finished = PodRecord(
        {
            "metadata": {
                "name": "dead-0",
                "namespace": "ns",
                "uid": "uid-dead-0",
                "annotations": {"scheduling.k8s.io/group-name": "dead"},
            },
            "spec": {
                "schedulerName": "volcano",
                "nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            },
            "status": {"phase": "Succeeded"},
        }
    )
    groups = [dead, _group("next", "Pending", "4")]
    return cluster(groups, [finished, member("next-0", "next", "4")], capability="6")


def test_a_bare_gang_whose_members_all_ended_holds_no_room() -> None:
    """Nobody makes a bare gang's lost members again: enqueued, it would hold 4 of q's 6 cpu
    for ever (a real soak: the gangs behind it stalled)."""
    for memo in (None, Memo()):
        result = run(session_of("enqueue, allocate"), _after_a_dead_gang(None), memo=memo)
        decisions = {d.key: d for d in result.decisions}
        assert ok(decisions["ns/next"]), reason(decisions["ns/next"])


def test_a_volcano_jobs_gang_between_tasks_keeps_its_room() -> None:
    """A Volcano Job's group whose first task is done keeps its room: the job controller
    makes the next task's pods."""
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "dead",
        "uid": "uid-job",
        "controller": True,
    }
    result = run(session_of("enqueue, allocate"), _after_a_dead_gang(owner))
    decisions = {d.key: d for d in result.decisions}
    assert isinstance(decisions["ns/next"], Waiting)
    assert "inqueue 4" in reason(decisions["ns/next"]), reason(decisions["ns/next"])


def test_enqueued_gangs_whose_largest_members_ask_more_than_their_minimum_do_not_deadlock() -> None:
    """q may hold 7 cpu. `a` and `b`, both Inqueue with minResources 3 (a Volcano Job's first
    pods in task order: 1 + 2), need two members each, and the placement takes the largest
    first (4 + 2 = 6). Counted at 3 each, each needed 3 more than the other's `inqueue` left
    (0 + 6 + 3 > 7) and neither was ever allocated; counted at what they take, the first is
    allocated and the second waits for it at its share."""
    groups = [_group("a", "Inqueue", "3"), _group("b", "Inqueue", "3")]
    for group in groups:
        group.min_member = 2
    pods = [member(f"{g}-{i}", g, cpu) for g in ("a", "b") for i, cpu in enumerate(("1", "2", "4"))]
    for memo in (None, Memo()):
        result = run(
            session_of("enqueue, allocate"), cluster(groups, pods, capability="7"), memo=memo
        )
        decisions = {d.key: d for d in result.decisions}
        assert ok(decisions["ns/a"]), reason(decisions["ns/a"])
        assert isinstance(decisions["ns/b"], Waiting)
