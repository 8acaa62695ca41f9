"""plugins.framework.run: one scheduling pass (Volcano's runOnce) on hand-built snapshots, the
extender's facts in memory: the conf's actions run in the order listed, what one takes the next
sees, and a plugin the conf switches off is not asked."""

from __future__ import annotations

from typing import Any, ClassVar

from core.cache import ClusterCache, Snapshot
from core.records import PodGroupRecord, PodRecord, QueueRecord
from plugins.builtin.queue_plugins import ProportionPlugin
from plugins.framework.config import parse_scheduler_config
from plugins.framework.decisions import ADOPT, ALLOCATE, ENQUEUE, Admitted, Decision, Waiting
from plugins.framework.extension_points import PassState
from plugins.framework.pass_input import QueueWait
from plugins.framework.policy import Policy
from plugins.framework.registry import PLUGINS, build_policy
from plugins.model.queue_inputs import queue_pass
from tests.session_harness import ok, reason, run
from tests.unit.test_gang_placement import node

TIERS = """
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def podgroup(name: str, *, queue: str = "q", job: bool = False, **spec: Any) -> PodGroupRecord:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if job:  # made by Volcano's job controller: its pods come once it is Inqueue
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": name,
                "uid": "j",
                "controller": True,
            }
        ]
    return PodGroupRecord({"metadata": meta, "spec": {"queue": queue, **spec}})


def member(name: str, group: str, cpu: str, priority: int = 0) -> PodRecord:
    return PodRecord(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "annotations": {"scheduling.k8s.io/group-name": group},
            },
            "spec": {
                "schedulerName": "volcano",
                "priority": priority,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            },
            "status": {"phase": "Pending"},
        }
    )


def cluster(groups: list[PodGroupRecord], pods: list[PodRecord], capability: str) -> Snapshot:
    cache = ClusterCache()
    for name in ("n1", "n2"):
        cache.on_node_add(node(name, cpu="4"))
    cache.on_queue_add(
        QueueRecord(
            {"metadata": {"name": "q"}, "spec": {"weight": 1, "capability": {"cpu": capability}}}
        )
    )
    for g in groups:
        cache.on_podgroup_add(g)
    for p in pods:
        cache.on_pod_add(p)
    return cache.snapshot()


def cycle(policy: Policy, snap: Snapshot, **facts: Any) -> list[Decision]:
    """The decisions of one pass over `snap`, in the order taken."""
    return run(policy, snap, now=0.0, **facts).decisions


def placed(decisions: list[Decision]) -> dict[str, str]:
    """Member -> node of every gang the pass admitted."""
    return {
        pod: name for d in decisions if isinstance(d, Admitted) for pod, name in d.slots.items()
    }


def session_of(actions: str, tiers: str = TIERS) -> Policy:
    return build_policy(parse_scheduler_config(f'actions: "{actions}"\n{tiers}'))


def contended_queue() -> Snapshot:
    """Queue q may hold 4 cpu. `vcjob` (a Volcano Job's group: no pods until Inqueue) asks 4 cpu
    to be enqueued; `gang` (one 4-cpu pod, there already) asks the same 4 cpu to be placed.
    Only one of them fits in the queue."""
    vcjob = podgroup("vcjob", job=True, minMember=1, minResources={"cpu": "4"})
    gang = podgroup("gang", minMember=1, minResources={"cpu": "4"})
    return cluster([vcjob, gang], [member("gang-0", "gang", "4")], capability="4")


def outcome(decisions: list[Decision]) -> list[tuple[str | None, str, bool]]:
    return [(d.action, d.key, ok(d)) for d in decisions]


def test_enqueue_before_allocate_lets_the_enqueued_job_hold_the_queue() -> None:
    decisions = cycle(session_of("enqueue, allocate, backfill"), contended_queue())
    assert outcome(decisions) == [("enqueue", "ns/vcjob", True), ("allocate", "ns/gang", False)]
    refused = reason(decisions[1]) or ""
    assert refused.startswith("gang ns/gang: waiting for admission:") and "q" in refused
    assert placed(decisions) == {}


def test_allocate_before_enqueue_places_the_gang_and_refuses_the_job() -> None:
    decisions = cycle(session_of("allocate, enqueue, backfill"), contended_queue())
    assert outcome(decisions) == [("allocate", "ns/gang", True), ("enqueue", "ns/vcjob", False)]
    assert placed(decisions).keys() == {"ns/gang-0"}
    # The gang's placement was booked with the Allocate event handlers before enqueue asked.
    assert "q" in (reason(decisions[1]) or "")


def test_without_an_enqueue_action_allocate_enqueues_too() -> None:
    decisions = cycle(session_of("allocate, backfill"), contended_queue())
    assert [(d.action, d.key) for d in decisions] == [
        ("allocate", "ns/gang"),
        ("allocate", "ns/vcjob"),
    ]
    assert ok(decisions[0]) and decisions[1].stage == ENQUEUE and not ok(decisions[1])


def test_without_an_allocate_action_nothing_is_placed_and_the_reason_says_so() -> None:
    decisions = cycle(session_of("enqueue"), contended_queue())
    assert outcome(decisions) == [("enqueue", "ns/vcjob", True), (None, "ns/gang", False)]
    assert decisions[1].stage == ALLOCATE
    assert reason(decisions[1]) == (
        "gang ns/gang: waiting: the scheduler conf has no allocate action"
    )
    assert placed(decisions) == {}


def test_a_gang_placed_whole_already_is_adopted_at_open() -> None:
    bound = PodRecord(
        {
            "metadata": {
                "name": "old-0",
                "namespace": "ns",
                "uid": "uid-old-0",
                "annotations": {"scheduling.k8s.io/group-name": "old"},
            },
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        }
    )
    old = PodGroupRecord(
        {
            "metadata": {"name": "old", "namespace": "ns", "uid": "uid-old"},
            "spec": {"queue": "q", "minMember": 1},
            "status": {"phase": "Inqueue"},
        }
    )
    decisions = cycle(session_of("enqueue, allocate"), cluster([old], [bound], "4"))
    assert [(d.stage, d.action, d.key) for d in decisions] == [(ADOPT, None, "ns/old")]


class _CountingProportion(ProportionPlugin):
    asked: ClassVar[list[str]] = []

    def job_enqueueable(self, job: Any, state: PassState) -> Any:
        _CountingProportion.asked.append(job.key)
        return super().job_enqueueable(job, state)


def test_a_plugin_switched_off_in_the_conf_is_not_asked(monkeypatch: Any) -> None:
    monkeypatch.setitem(PLUGINS, "proportion", _CountingProportion)
    _CountingProportion.asked = []
    on = session_of("enqueue, allocate")
    cycle(on, contended_queue())
    assert _CountingProportion.asked == ["ns/vcjob", "ns/gang"]
    _CountingProportion.asked = []
    off = session_of(
        "enqueue, allocate",
        TIERS.replace(
            "  - name: proportion\n", "  - name: proportion\n    enableJobEnqueued: false\n"
        ),
    )
    decisions = cycle(off, contended_queue())
    assert _CountingProportion.asked == []
    # Nothing votes on the queue any more: both are let through (the cluster has room).
    assert outcome(decisions) == [("enqueue", "ns/vcjob", True), ("allocate", "ns/gang", True)]


def test_the_queue_model_is_the_conf_plugins() -> None:
    capacity = session_of(
        "enqueue, allocate", "tiers:\n- plugins:\n  - name: gang\n  - name: capacity\n"
    )
    snap = contended_queue()
    assert capacity.queue_model == "capacity"
    assert type(queue_pass(snap, {}, capacity.open_queues).model).__name__ == "CapacityShares"
    assert session_of("enqueue, allocate").queue_model == "proportion"


def test_a_refusal_by_the_enqueue_votes_in_allocate_is_decided_again_every_cycle() -> None:
    """A Volcano Job's group sent back to Pending (its gang evicted whole by reclaim) keeps the
    pods its job made again, so it waits in allocate, where the enqueue votes judge it first.
    The overcommit vote reads the whole cluster (every bound pod), which no input of the
    group's own verdict follows: the refusal must not stand until the group changes, or the
    job waits for ever once the room frees (issue 31)."""
    # (Overcommit in the first tier: its Reject is the verdict whatever proportion says.)
    tiers = TIERS.replace("  - name: gang\n", "  - name: gang\n  - name: overcommit\n")
    session = session_of("enqueue, allocate", tiers)
    vcjob = podgroup("vcjob", job=True, minMember=2, minResources={"cpu": "8"})
    pods = [member("vcjob-0", "vcjob", "4"), member("vcjob-1", "vcjob", "4")]
    other = PodRecord(
        {
            "metadata": {"name": "other", "namespace": "ns", "uid": "uid-other"},
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}],
            },
            "status": {"phase": "Running"},
        }
    )
    [refused] = cycle(session, cluster([vcjob], [*pods, other], "8"))
    # 2 nodes x 4 cpu x 1.2 = 9.6 cpu, 4 of them taken by the other pod.
    assert (refused.stage, ok(refused)) == (ALLOCATE, False)
    assert reason(refused) == (
        "gang ns/vcjob: waiting for admission: not enough cpu (need 8, free 5600m)"
    )
    # The other pod gone, the next pass (nothing of the group changed) places it whole.
    [admitted] = cycle(session, cluster([vcjob], pods, "8"))
    assert (admitted.stage, ok(admitted)) == (ALLOCATE, True)


def test_a_gang_partly_placed_is_not_held_for_a_starving_gang() -> None:
    """Queue q (capability 4) runs 3 cpu and drains for `big` (enqueued, first in order, its 2
    cpu beyond the queue's share): a hold phase. A gang that lost a member (one still runs)
    gets its replacement placed: its running members keep their room anyway, and only the
    missing one makes it whole (soak seed 2026: a job's 3 new members waited 60 s behind
    another queue's starving gang while its 5 others ran); a new gang waits for the hold."""
    big = podgroup("big", minMember=1, minResources={"cpu": "2"})
    big.phase = "Inqueue"
    run, broken, fresh = (
        podgroup(n, minMember=m) for n, m in (("run", 1), ("broken", 2), ("fresh", 1))
    )
    running = [member("run-0", "run", "2"), member("broken-0", "broken", "1")]
    for pod in running:
        pod.node, pod.phase = "n1", "Running"
    pods = [
        *running,
        member("big-0", "big", "2", priority=10),
        member("broken-1", "broken", "1"),
        member("fresh-0", "fresh", "1"),
    ]
    snap = cluster([big, run, broken, fresh], pods, "4")
    since = {"q": QueueWait(since=0.0, waiters={}, target="ns/big")}
    decisions = {d.key: d for d in cycle(session_of("allocate"), snap, starving=since)}
    assert isinstance(decisions["ns/big"], Waiting) and decisions["ns/big"].share is not None
    assert ok(decisions["ns/broken"]), reason(decisions["ns/broken"])
    assert not ok(decisions["ns/fresh"])
    assert "keeps the room its work frees for gang ns/big" in (reason(decisions["ns/fresh"]) or "")


def test_only_a_gang_its_queue_enqueued_is_the_starving_gang() -> None:
    """The queue (capability 8) runs 6 cpu and has a job enqueued for 4 (its `inqueue`): a new
    gang of 4, over the queue's share, is refused at enqueue first (6 + 4 + 4 > 8), which no
    hold cures (the enqueued job waits through a hold too, its `inqueue` with it), so it does
    not hold the queue; the same gang enqueued already, refused only by its share, does."""
    running = [member("run-0", "run", "4"), member("run-1", "run", "2")]
    for pod, name in zip(running, ("n1", "n2"), strict=True):
        pod.node, pod.phase = name, "Running"
    big_pods = [member("big-0", "big", "2"), member("big-1", "big", "2")]
    enqueued_job = podgroup("job", job=True, minMember=1, minResources={"cpu": "4"})
    enqueued_job.phase = "Inqueue"
    pending = podgroup("big", minMember=2, minResources={"cpu": "4"})
    groups = [podgroup("run", minMember=2), enqueued_job, pending]
    snap = cluster(groups, [*running, *big_pods], "8")
    decisions = {d.key: d for d in cycle(session_of("enqueue, allocate"), snap)}
    big = decisions["ns/big"]
    assert isinstance(big, Waiting) and "inqueue" in big.reason, big
    assert big.share is None

    inqueue = podgroup("big", minMember=2, minResources={"cpu": "4"})
    inqueue.phase = "Inqueue"
    snap = cluster([podgroup("run", minMember=2), inqueue], [*running, *big_pods], "8")
    decisions = {d.key: d for d in cycle(session_of("enqueue, allocate"), snap)}
    big = decisions["ns/big"]
    assert isinstance(big, Waiting) and big.share is not None, big
