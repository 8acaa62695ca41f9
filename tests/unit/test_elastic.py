"""Elastic jobs and enqueue on the promise of eviction (issue 31, items 3 and 4), as formulas:
a job's elastic resources (Volcano's ExceededPart(allocated, minResources)), which members are
its surplus, trimming a placement to what the queue may take member by member, the victim walk
over elastic members and whole gangs, the proportion judge counting a member once, and the
enqueue promise (lower priority only)."""

from __future__ import annotations

from core.cache import ClusterCache
from core.records import PodGroupRecord, PriorityClassRecord
from core.resources import ResourceVector
from core.served import ServedPods
from plugins.actions.promise import enqueue_by_eviction
from plugins.framework.config import default_config
from plugins.framework.extension_points import PassState, Preemptor
from plugins.framework.registry import build_policy
from plugins.model.elastic import elastic_resources, surplus_members, trim_elastic
from plugins.model.job_input import job_input
from plugins.model.job_order import JobInput
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_share import QueueInput
from plugins.model.victims import effective_units, victim_units, walk_victims
from tests.session_harness import session
from tests.unit.test_evictions import group, node, pod, snapshot

SESSION = build_policy(default_config())


def cpu(cores: int) -> ResourceVector:
    return ResourceVector({"cpu": cores * 1000})


def test_elastic_resources_are_what_allocated_holds_beyond_min_resources() -> None:
    allocated = ResourceVector({"cpu": 16000, "memory": 8 * 2**30})
    minimum = ResourceVector({"cpu": 4000, "memory": 10 * 2**30})
    # Per dimension, floored at zero (memory is below its minimum: nothing elastic there).
    assert elastic_resources(allocated, minimum) == ResourceVector({"cpu": 12000})
    assert elastic_resources(cpu(4), cpu(4)).is_zero()


def test_without_min_resources_the_members_beyond_min_member_are_elastic() -> None:
    placed = [pod(f"p{i}", "g", "n1", cpu=c) for i, c in enumerate([4, 1, 2, 1])]
    # minMember 2: the two largest (4 and 2 cpu) make the minimum; 1 + 1 cpu are elastic.
    assert elastic_resources(cpu(8), None, placed, 2) == ResourceVector({"cpu": 2000, "pods": 2})
    assert elastic_resources(cpu(8), None, placed, 4).is_zero()


def test_surplus_members_never_take_a_job_or_a_task_below_its_minimum() -> None:
    placed = [pod(f"w{i}", "g", "n1") for i in range(5)]
    surplus = surplus_members(placed, 2)
    assert len(surplus) == 3
    assert [p.name for p in surplus] == ["w4", "w3", "w2"]  # the last members go first
    assert surplus_members(placed, 5) == []
    assert surplus_members(placed, 7) == []


def test_surplus_members_keep_each_task_minimum() -> None:
    ps = [pod("ps-0", "g", "n1"), pod("ps-1", "g", "n1")]
    workers = [pod(f"wk-{i}", "g", "n1") for i in range(4)]
    for record in ps:
        record.task = "ps"
    for record in workers:
        record.task = "worker"
    # minMember 3 with minTaskMember ps 2, worker 1: only workers can go, three of them.
    surplus = surplus_members([*ps, *workers], 3, {"ps": 2, "worker": 1})
    assert sorted(p.name for p in surplus) == ["wk-1", "wk-2", "wk-3"]


def test_trim_keeps_the_required_members_then_each_further_one_the_queue_accepts() -> None:
    members = [pod(f"m{i}", "g", cpu=2) for i in range(8)]
    slots = {p.key: "n1" for p in members}
    room = {"left": 2}  # the queue may take two more members

    def accept(_pod: object) -> bool:
        if room["left"] == 0:
            return False
        room["left"] -= 1
        return True

    kept = trim_elastic(slots, members, 2, {}, accept)
    assert sorted(kept) == ["ns/m0", "ns/m1", "ns/m2", "ns/m3"]


def test_a_running_elastic_gang_is_offered_member_by_member_then_whole() -> None:
    low = group("low", 2)
    pods = [pod(f"low-{i}", "low", "n1", cpu=2) for i in range(4)]
    snap = snapshot([node("n1", cpu=8)], [low], pods)
    units = victim_units(snap, "ns/new", set(), lambda p: "q", ServedPods.every())
    elastic = [u for u in units if u.elastic]
    whole = [u for u in units if not u.elastic]
    assert len(elastic) == 2 and all(not u.breaks_gang and len(u.pods) == 1 for u in elastic)
    assert len(whole) == 1 and len(whole[0].pods) == 4 and whole[0].breaks_gang

    # 2 cpu needed: one elastic member, not the gang.
    def frees(n: int) -> object:
        return lambda taken: sum(len(u.pods) for u in effective_units(taken)) >= n or None

    walked = walk_victims(units, frees(1))
    assert walked is not None and [u.elastic for u in walked[0]] == [True]
    # 3 members needed: past the surplus the whole gang goes, its members counted once.
    walked = walk_victims(units, frees(3))
    assert walked is not None
    assert [u.elastic for u in walked[0]] == [False] and len(walked[0][0].pods) == 4


def test_the_reclaim_judge_counts_an_elastic_member_once() -> None:
    queues = [
        QueueInput("qa", weight=1, allocated=cpu(8), request=cpu(8)),
        QueueInput("qb", weight=3, request=cpu(8)),
    ]
    model = proportion_shares(cpu(8), queues)
    assert model.shares["qa"].deserved.get("cpu") == 2000
    members = [pod(f"a-{i}", "a", "n1", cpu=1) for i in range(8)]
    a = group("a", 1)
    a.queue = "qa"
    snap = snapshot([node("n1", cpu=8)], [a], members)
    units = victim_units(snap, "ns/b", set(), lambda p: "qa", ServedPods.every())
    state = PassState(model=model, inputs={q.name: q for q in queues})
    preemptor = Preemptor("ns/b", "qb", 0, ResourceVector(), cpu(1))
    taken = SESSION.reclaimable(preemptor, units, state)
    # qa holds 8 and deserves 2: six single members may go (each judged while qa is still
    # over), and the whole gang after them only for what is left over its share.
    assert sum(1 for u in taken if u.elastic) == 6


def job(priority: int, queue: str = "q") -> JobInput:
    return JobInput(
        key="ns/high",
        queue=queue,
        priority=priority,
        ready=False,
        allocated=ResourceVector(),
        creation="",
        uid="u",
        min_resources=cpu(16),
    )


def test_a_job_is_enqueued_on_the_promise_of_preempting_lower_priority_work_only() -> None:
    low = group("low", 4)
    pods = [pod(f"low-{i}", "low", "n1", cpu=4, priority=10) for i in range(4)]
    snap = snapshot([node("n1", cpu=16)], [low], pods)
    units = victim_units(snap, "ns/high", set(), lambda p: "q", ServedPods.every())

    def state() -> PassState:
        queues = [QueueInput("q", allocated=cpu(16), request=cpu(32))]
        model = proportion_shares(cpu(16), queues)
        return PassState(
            model=model,
            inputs={q.name: q for q in queues},
            total={"cpu": 16000},
            used={"cpu": 16000},
        )

    refused = SESSION.job_enqueueable(job(1000), state())
    assert refused is not None  # the queue (and the cluster) is full
    ssn = session(SESSION, snap, queue_of=lambda p: "q")
    assert [u.group for u in ssn.victims_for("ns/high", "q")] == [u.group for u in units]
    trial = ssn.state = state()
    promise = enqueue_by_eviction(ssn, job(1000))
    assert promise is not None and promise.action == "preempt"
    assert [u.group for u in promise.units] == ["ns/low"]
    assert promise.describe().startswith("will preempt ns/low (whole gang, 4 pods, priority 10)")
    # The trial left the pass's numbers as they were.
    assert trial.used == {"cpu": 16000}
    assert trial.model is not None and trial.model.shares["q"].allocated == cpu(16)
    # Equal priority: no promise (a job must not be enqueued to evict its equals).
    ssn.state = state()
    assert enqueue_by_eviction(ssn, job(10)) is None


def test_a_podgroup_without_pods_has_its_priority_class_value() -> None:
    cache = ClusterCache()
    high = PodGroupRecord(
        {
            "metadata": {"name": "high", "namespace": "ns"},
            "spec": {"minMember": 4, "queue": "q", "priorityClassName": "batch-high"},
        }
    )
    plain = PodGroupRecord({"metadata": {"name": "plain", "namespace": "ns"}, "spec": {}})
    cache.on_podgroup_add(high)
    cache.on_podgroup_add(plain)
    cache.take_dirty_groups()
    assert job_input(cache.snapshot(), high).priority == 0  # no such class (yet)
    record = PriorityClassRecord({"metadata": {"name": "batch-high"}, "value": 1000})
    cache.on_priority_class_add(record)
    # A class arriving re-decides the groups (their priority may have moved).
    assert cache.take_dirty_groups() == {"ns/high", "ns/plain"}
    assert job_input(cache.snapshot(), high).priority == 1000
    assert job_input(cache.snapshot(), plain).priority == 0
    default = PriorityClassRecord(
        {"metadata": {"name": "everyone"}, "value": 7, "globalDefault": True}
    )
    cache.on_priority_class_add(default)
    assert job_input(cache.snapshot(), plain).priority == 7  # globalDefault
    cache.on_priority_class_delete(record)
    assert job_input(cache.snapshot(), high).priority == 7  # its class is gone: the default
