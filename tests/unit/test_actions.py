"""plugins.actions (enqueue, allocate's whole-gang placement): Volcano's enqueue and allocate as
pure decisions over a session, on hand-built snapshots (the extender applies what they
return)."""

from __future__ import annotations

from core.cache import ClusterCache, Snapshot
from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from plugins.actions.enqueue import enqueue_job
from plugins.actions.whole_gang import Admission, allocate_gang
from plugins.builtin.gang import GangPlugin
from plugins.framework.config import default_config, parse_scheduler_config
from plugins.framework.decisions import Enqueued, Waiting
from plugins.framework.extension_points import PERMIT, REJECT, PassState
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy
from plugins.model import gang as gangs
from plugins.model import gang_ready
from plugins.model.demand import gang_demand
from plugins.model.gang import GangView
from plugins.model.job_input import job_input
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_share import QueueInput
from tests.session_harness import session
from tests.unit.test_gang_placement import node, pod

DEFAULT = build_policy(default_config())


def group(name: str, min_member: int, **spec: object) -> PodGroupRecord:
    return PodGroupRecord(
        {"metadata": {"name": name, "namespace": "ns"}, "spec": {"minMember": min_member, **spec}}
    )


def cluster(nodes: list[str], groups: list[PodGroupRecord], pods: list[PodRecord]) -> Snapshot:
    cache = ClusterCache()
    for name in nodes:
        cache.on_node_add(node(name, cpu="4"))
    for g in groups:
        cache.on_podgroup_add(g)
    for p in pods:
        cache.on_pod_add(p)
    return cache.snapshot()


def allocate(
    policy: Policy, snap: Snapshot, g: PodGroupRecord, state: PassState | None = None
) -> Admission:
    view = gangs.gang_view(snap, g.key)
    assert view is not None
    ssn = session(policy, snap)
    ssn.state = state or PassState(total=snap.total_allocatable.as_dict())
    return allocate_gang(ssn, g, view, job_input(snap, g))


def test_allocate_places_the_whole_gang_or_says_why() -> None:
    g = group("a", 3)
    members = [pod(f"a-{i}", cpu="2") for i in range(3)]
    snap = cluster(["n1", "n2"], [g], members)
    decision = allocate(DEFAULT, snap, g)
    assert decision.plan is not None and decision.plan.ok and decision.reason is None
    assert len(decision.plan.slots) == 3
    big = group("a", 3)
    snap = cluster(["n1"], [big], [pod(f"a-{i}", cpu="2") for i in range(3)])
    refused = allocate(DEFAULT, snap, big)
    assert refused.plan is None and refused.reason is not None
    assert refused.reason.startswith("gang ns/a: waiting for admission:")


def test_allocate_refuses_a_gang_with_too_few_members_by_the_gang_plugin() -> None:
    g = group("a", 3)
    snap = cluster(["n1", "n2"], [g], [pod("a-0"), pod("a-1")])
    decision = allocate(DEFAULT, snap, g)
    assert decision.reason == "gang ns/a: 2/3 members created"
    # Without gang in the conf there is no JobValid: the placement itself is what fails.
    no_gang = build_policy(parse_scheduler_config("tiers:\n- plugins:\n  - name: priority\n"))
    reason = allocate(no_gang, snap, g).reason
    assert reason == "gang ns/a: waiting for admission: only 2 pending members for 3 required"


def test_allocate_asks_the_queue_through_the_session() -> None:
    g = group("a", 2, minResources={"cpu": "4"}, queue="q")
    snap = cluster(["n1", "n2"], [g], [pod("a-0", cpu="2"), pod("a-1", cpu="2")])
    want = ResourceVector({"cpu": 4000})

    def state(capability: ResourceVector | None) -> PassState:
        queues = {"q": QueueInput("q", request=want, capability=capability)}
        model = proportion_shares(snap.total_allocatable, list(queues.values()))
        return PassState(model=model, inputs=queues, total=snap.total_allocatable.as_dict())

    roomy, tight = state(None), state(ResourceVector({"cpu": 2000}))
    assert allocate(DEFAULT, snap, g, roomy).plan is not None
    refused = allocate(DEFAULT, snap, g, tight)
    assert refused.reason is not None and "queue q" in refused.reason
    # proportion off: the queue's capability refuses nothing.
    plain = build_policy(parse_scheduler_config("tiers:\n- plugins:\n  - name: gang\n"))
    assert allocate(plain, snap, g, tight).plan is not None


def test_a_gang_admitted_again_asks_its_queue_only_for_its_missing_members() -> None:
    """Issue 31: a gang that lost one of three members (the other two still run) is admitted
    again for the one it misses; minResources counted whole would count the two twice."""
    g = group("a", 3, minResources={"cpu": "3"})
    members = [pod(f"a-{i}", node_name="n0", phase="Running") for i in range(2)]
    members.append(pod("a-2"))
    snap = cluster(["n0", "n1"], [g], members)
    view = gangs.gang_view(snap, g.key)
    assert view is not None
    pending = gang_ready.pending_members(view)
    assert gang_demand(g, pending, 1, view).cpu == 1000
    assert gang_demand(g, pending, 1).cpu == 3000  # without the view: minResources
    leaving = [pod("a-0", node_name="n0", phase="Running"), pod("a-1"), pod("a-2")]
    snap = cluster(["n0"], [g], leaving)
    view = gangs.gang_view(snap, g.key)
    assert view is not None
    assert gang_demand(g, gang_ready.pending_members(view), 2, view).cpu == 2000


def test_a_running_gang_that_lost_a_member_is_not_judged_by_enqueue_again() -> None:
    """A real soak: one of three members bound, the PodGroup Unknown, its replacements refused
    by the enqueue votes on its whole minResources, its bound member counted in `allocated`
    as well. Past enqueue (Volcano's looks at Pending jobs only), the queue is asked only for
    the members it misses, beside what it holds."""

    def in_phase(phase: str) -> PodGroupRecord:
        spec = {"minMember": 3, "minResources": {"cpu": "3"}, "queue": "q"}
        meta = {"name": "a", "namespace": "ns"}
        return PodGroupRecord({"metadata": meta, "spec": spec, "status": {"phase": phase}})

    members = [pod(f"a-{i}", node_name="n0", phase="Running") for i in range(2)]
    members.append(pod("a-2"))
    running = in_phase("Unknown")
    snap = cluster(["n0", "n1"], [running], members)
    cap = ResourceVector({"cpu": 3000})
    held = ResourceVector({"cpu": 2000})
    queues = {"q": QueueInput("q", allocated=held, request=cap, capability=cap)}
    model = proportion_shares(snap.total_allocatable, list(queues.values()))
    state = PassState(model=model, inputs=queues, total=snap.total_allocatable.as_dict())
    decision = allocate(DEFAULT, snap, running, state)
    assert decision.reason is None and decision.plan is not None
    assert list(decision.plan.slots) == ["ns/a-2"]
    # Pending (not enqueued yet), it is judged on its minResources by the enqueue votes.
    pending = in_phase("Pending")
    refused = allocate(DEFAULT, cluster(["n0", "n1"], [pending], members), pending, state)
    assert refused.at_enqueue and refused.reason is not None and "minResources" in refused.reason


def test_enqueue_votes_then_books_what_it_admitted() -> None:
    a, b = group("a", 1, minResources={"cpu": "8"}), group("b", 1, minResources={"cpu": "8"})
    snap = cluster([], [a, b], [])
    ssn = session(DEFAULT, snap)
    ssn.state = PassState(total={"cpu": 10_000}, used={})
    first = enqueue_job(ssn, a, _view(snap, a), "enqueue")
    assert isinstance(first, Enqueued)
    ssn.take(first, a)
    assert ssn.state.used == {"cpu": 8000}  # overcommit's JobEnqueued
    refusal = ssn.enqueue_refusal(job_input(snap, b))  # 8 + 8 > 10 x 1.2
    assert refusal is not None and "cpu" in refusal.reason and refusal.plugin == "overcommit"
    second = enqueue_job(ssn, b, _view(snap, b), "enqueue")
    assert isinstance(second, Waiting) and "cpu" in second.reason
    ssn.take(second, b)
    assert ssn.state.used == {"cpu": 8000}  # a refused job books nothing


def _view(snap: Snapshot, g: PodGroupRecord) -> GangView:
    view = gangs.gang_view(snap, g.key)
    assert view is not None
    return view


def test_the_gang_plugin_extension_points() -> None:
    plugin = GangPlugin({})
    g = group("a", 2, minTaskMember={"worker": 2})
    waiting = cluster(["n1"], [g], [pod("a-0", task="worker")])
    view = _view(waiting, g)
    assert plugin.job_valid(view) == "gang ns/a: task worker: 1/2 members created"
    assert not plugin.job_ready(view) and plugin.job_starving(view)
    assert plugin.job_pipelined(view, job_input(waiting, g), PassState()).verdict == REJECT
    running = cluster(
        ["n1"],
        [g],
        [
            pod("a-0", task="worker", node_name="n1", phase="Running"),
            pod("a-1", task="worker", node_name="n1", phase="Running"),
        ],
    )
    view = _view(running, g)
    assert plugin.job_valid(view) is None and plugin.job_ready(view)
    assert not plugin.job_starving(view)
    assert plugin.job_pipelined(view, job_input(running, g), PassState()).verdict == PERMIT


def test_a_gang_whose_minimum_members_ask_more_than_min_resources_stays_within_capability() -> None:
    """Issue 31's short soak (seed 7): soak-q3 (capability 32) held 34 cpu. A Volcano Job's
    minResources count its first minAvailable pods in task order (here the two 1-cpu ones),
    but the placement's required members are the largest (3 + 3): the queue was asked for 2,
    its elastic members judged against that, and the gang took 8 of a 6-cpu capability.
    Volcano's allocate judges each task's own request (Allocatable per task)."""
    g = group("a", 2, minResources={"cpu": "2"}, queue="q")
    members = [pod("a-0", cpu="3"), pod("a-1", cpu="3"), pod("a-2", cpu="1"), pod("a-3", cpu="1")]
    snap = cluster(["n1", "n2"], [g], members)
    view = gangs.gang_view(snap, g.key)
    assert view is not None
    assert gang_demand(g, gang_ready.pending_members(view), 2, view).cpu == 6000
    cap = ResourceVector({"cpu": 6000})
    queues = {"q": QueueInput("q", request=ResourceVector({"cpu": 8000}), capability=cap)}
    model = proportion_shares(snap.total_allocatable, list(queues.values()))
    state = PassState(model=model, inputs=queues, total=snap.total_allocatable.as_dict())
    decision = allocate(DEFAULT, snap, g, state)
    assert decision.plan is not None and decision.reason is None
    requests = {p.key: p.requests.cpu for p in members}
    assert sum(requests[k] for k in decision.plan.slots) <= 6000, decision.plan.slots
