"""plugins.framework.policy: the conf's plugins combined at each extension point as Volcano
combines them (spec/volcano.md §3.2), and each plugin's contribution switched off by leaving it out
of the conf or by its enable flag."""

from __future__ import annotations

from core.resources import ResourceVector
from plugins.framework.config import default_config, parse_scheduler_config
from plugins.framework.extension_points import (
    ABSTAIN,
    EXTENSION_POINTS,
    PERMIT,
    REJECT,
    PassState,
    Preemptor,
    SessionPlugin,
    Vote,
)
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy
from plugins.model.job_order import JobInput
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_share import QueueInput
from plugins.model.victims import VictimUnit

ZERO = ResourceVector()


def cpu(cores: int) -> ResourceVector:
    return ResourceVector({"cpu": cores * 1000})


def session_of(tiers: str, actions: str = "enqueue, allocate") -> Policy:
    return build_policy(parse_scheduler_config(f'actions: "{actions}"\ntiers:\n{tiers}'))


def job(name: str, **fields: object) -> JobInput:
    values: dict[str, object] = {
        "key": f"ns/{name}",
        "queue": "default",
        "priority": 0,
        "ready": False,
        "allocated": ZERO,
        "creation": "2026-01-01T00:00:00Z",
        "uid": name,
    }
    values.update(fields)
    return JobInput(**values)  # type: ignore[arg-type]


def unit(
    name: str, *, queue: str = "prod", priority: int = 0, critical: bool = False
) -> VictimUnit:
    return VictimUnit(
        group=f"ns/{name}",
        queue=queue,
        priority=priority,
        pods=(f"ns/{name}-0",),
        freed=cpu(4),
        preemptable=True,
        critical=critical,
        breaks_gang=True,
        creation="2026-01-01T00:00:00Z",
    )


# ------------------------------------------------------------------------------ job order


def test_job_order_follows_the_confs_plugins_in_tier_order() -> None:
    high_ready = job("a", priority=10, ready=True)
    low_waiting = job("b", priority=1, ready=False)
    state = PassState(total={"cpu": 100_000})
    default = build_policy(default_config())
    # priority first (tier 1): the higher-priority job leads though it is ready.
    ranked = sorted([low_waiting, high_ready], key=lambda j: default.job_order_key(j, state))
    assert [j.key for j in ranked] == ["ns/a", "ns/b"]
    # gang before priority: the job not ready yet leads.
    gang_first = session_of("- plugins:\n  - name: gang\n  - name: priority\n")
    ranked = sorted([high_ready, low_waiting], key=lambda j: gang_first.job_order_key(j, state))
    assert [j.key for j in ranked] == ["ns/b", "ns/a"]
    # priority with enableJobOrder: false votes no more: creation, then name decide.
    off = session_of("- plugins:\n  - name: priority\n    enableJobOrder: false\n")
    ranked = sorted([low_waiting, high_ready], key=lambda j: off.job_order_key(j, state))
    assert [j.key for j in ranked] == ["ns/a", "ns/b"]
    assert off.job_order_key(high_ready, state)[0] != -10


def test_drf_orders_by_dominant_share_only_when_configured() -> None:
    big = job("big", allocated=cpu(60))
    small = job("small", allocated=cpu(10), creation="2026-01-02T00:00:00Z")
    state = PassState(total={"cpu": 100_000})
    with_drf = session_of("- plugins:\n  - name: drf\n")
    assert sorted([big, small], key=lambda j: with_drf.job_order_key(j, state))[0] is small
    without = session_of("- plugins:\n  - name: gang\n")
    assert sorted([big, small], key=lambda j: without.job_order_key(j, state))[0] is big


def test_sla_orders_by_deadline_and_its_global_argument_applies() -> None:
    plain = job("plain")
    urgent = job("urgent", sla_waiting_seconds=60.0, creation="2026-01-02T00:00:00Z")
    state = PassState()
    sla = session_of("- plugins:\n  - name: sla\n")
    assert sorted([plain, urgent], key=lambda j: sla.job_order_key(j, state))[0] is urgent
    # The plugin's sla-waiting-time gives every job a deadline; the older one is due first.
    waiting = session_of("- plugins:\n  - name: sla\n    arguments: {sla-waiting-time: 1h}\n")
    ranked = sorted([urgent, plain], key=lambda j: waiting.job_order_key(j, state))
    assert ranked[0] is plain  # 2026-01-01 + 1h before 2026-01-02 + 60s


# -------------------------------------------------------------------------------- enqueue


class _Voter(SessionPlugin):
    def __init__(self, name: str, verdict: int) -> None:
        super().__init__({})
        self.vote = Vote(verdict, f"{name} says no")
        self.asked = 0

    def job_enqueueable(self, job: JobInput, state: PassState) -> Vote:
        self.asked += 1
        return self.vote


def _voting(*tiers: list[tuple[str, int]]) -> tuple[Policy, dict[str, _Voter]]:
    text = "".join(
        "- plugins:\n" + "".join(f"  - name: {name}\n" for name, _ in tier) for tier in tiers
    )
    config = parse_scheduler_config(f"tiers:\n{text}")
    voters = {name: _Voter(name, verdict) for tier in tiers for name, verdict in tier}
    return Policy(config, voters), voters


def test_enqueue_votes_combine_by_tier() -> None:
    # A Reject anywhere refuses, with its reason.
    session, _ = _voting([("priority", ABSTAIN)], [("overcommit", REJECT)])
    assert session.job_enqueueable(job("j"), PassState()) == "overcommit says no"
    # A Permit in a tier admits without asking the later tiers (sla's bypass of quotas).
    session, voters = _voting([("sla", PERMIT)], [("proportion", REJECT)])
    assert session.job_enqueueable(job("j"), PassState()) is None
    assert voters["proportion"].asked == 0
    # ... but a Reject in the same tier still refuses.
    session, _ = _voting([("sla", PERMIT), ("proportion", REJECT)])
    assert session.job_enqueueable(job("j"), PassState()) == "proportion says no"
    # Everyone abstains: admitted.
    session, _ = _voting([("sla", ABSTAIN)])
    assert session.job_enqueueable(job("j"), PassState()) is None


def test_overcommit_and_proportion_vote_only_when_configured() -> None:
    queues = {"default": QueueInput("default", request=cpu(100), capability=cpu(4))}
    model = proportion_shares(cpu(10), list(queues.values()))
    greedy = job("greedy", min_resources=cpu(11))
    state = PassState(model=model, inputs=queues, total={"cpu": 10_000}, used={})
    default = build_policy(default_config())
    refused = default.job_enqueueable(greedy, state)
    assert refused is not None and "cpu" in refused
    none = session_of("- plugins:\n  - name: gang\n")
    assert none.job_enqueueable(greedy, state) is None  # no overcommit, no proportion: no rule
    # overcommit alone: 10 x 1.2 = 12 cpu >= 11.
    over = session_of("- plugins:\n  - name: overcommit\n")
    assert over.job_enqueueable(greedy, state) is None
    over.job_enqueued(greedy, state)
    assert state.used == {"cpu": 11_000}
    assert over.job_enqueueable(job("next", min_resources=cpu(2)), state) is not None


def test_sla_permits_a_due_job_past_a_later_tiers_quota() -> None:
    queues = {"default": QueueInput("default", request=cpu(100), capability=cpu(1))}
    model = proportion_shares(cpu(10), list(queues.values()))
    due = job("due", min_resources=cpu(4), sla_waiting_seconds=1.0)
    state = PassState(model=model, inputs=queues, total={"cpu": 10_000}, now=2e9)
    sla_first = session_of("- plugins:\n  - name: sla\n- plugins:\n  - name: proportion\n")
    assert sla_first.job_enqueueable(due, state) is None
    not_due = PassState(model=model, inputs=queues, total={"cpu": 10_000}, now=0.0)
    assert sla_first.job_enqueueable(due, not_due) is not None


# -------------------------------------------------------------------------------- victims


def test_preempt_victims_are_decided_by_the_first_tier_with_a_list() -> None:
    default = build_policy(default_config())
    preemptor = Preemptor("ns/p", "prod", 5, ZERO, cpu(4))
    units = [unit("low", priority=1), unit("equal", priority=5), unit("crit", critical=True)]
    # Tier 1: priority (lower only) and conformance (not critical) intersect; drf in tier 2
    # (which would refuse whole units) is not asked.
    assert [u.group for u in default.preemptable(preemptor, units, PassState())] == ["ns/low"]
    # Without priority the first tier has only conformance: equal priority may go too.
    no_priority = session_of("- plugins:\n  - name: conformance\n")
    taken = no_priority.preemptable(preemptor, units, PassState())
    assert [u.group for u in taken] == ["ns/low", "ns/equal"]
    # Without conformance, critical work may go.
    bare = session_of("- plugins:\n  - name: priority\n")
    assert [u.group for u in bare.preemptable(preemptor, units, PassState())] == [
        "ns/low",
        "ns/crit",
    ]
    # No victim plugin at all: nothing is preemptable.
    assert (
        session_of("- plugins:\n  - name: gang\n").preemptable(preemptor, units, PassState()) == []
    )


def test_conformance_abstains_when_it_removes_nothing_so_the_queue_share_still_judges() -> None:
    # Volcano #5896: prod deserves 20 of 40 cpu and holds 24; dev (the reclaimer) holds 16.
    queues = {
        "dev": QueueInput("dev", request=cpu(100), allocated=cpu(16)),
        "prod": QueueInput("prod", request=cpu(100), allocated=cpu(24)),
    }
    model = proportion_shares(cpu(40), list(queues.values()))
    state = PassState(model=model, inputs=queues)
    default = build_policy(default_config())
    reclaimer = Preemptor("ns/r", "dev", 0, ZERO, cpu(4))
    units = [unit("a"), unit("b"), unit("c")]
    # Only one 4-cpu unit takes prod back to its share: proportion (tier 2) decides.
    assert [u.group for u in default.reclaimable(reclaimer, units, state)] == ["ns/a"]
    # With proportion off nothing judges the queue: every candidate may go.
    no_share = session_of(
        "- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n"
        "- plugins:\n  - name: drf\n"
    )
    assert no_share.reclaimable(reclaimer, units, state) == []  # no plugin lists any


def test_a_plugin_listed_twice_is_asked_once_with_its_last_arguments() -> None:
    session = session_of(
        "- plugins:\n  - name: overcommit\n    arguments: {overcommit-factor: 1.0}\n"
        "- plugins:\n  - name: overcommit\n    arguments: {overcommit-factor: 3.0}\n"
    )
    assert session.plugins["overcommit"].factor == 3.0
    assert len(session.plugins_for("job_enqueueable")) == 1


def test_drf_alone_lets_no_whole_unit_go_to_a_preemptor_with_a_share() -> None:
    """drf's Preemptable: the victim's job must keep at least the share the preemptor reaches;
    a unit is all its job holds, so a preemptor that would hold any share takes nothing."""
    drf = session_of("- plugins:\n  - name: drf\n")
    state = PassState(total={"cpu": 100_000})
    units = [unit("low", priority=1)]
    asking = Preemptor("ns/p", "prod", 5, ZERO, cpu(4))
    assert drf.preemptable(asking, units, state) == []
    nothing = Preemptor("ns/p", "prod", 5, ZERO, ZERO)
    assert [u.group for u in drf.preemptable(nothing, units, state)] == ["ns/low"]


def test_capacity_registers_no_overused_and_predicates_registers_nothing() -> None:
    """capacity lets a queue borrow up to its realCapability (no Overused, unlike proportion);
    predicates is kube-scheduler's own filtering, which runs before the extender."""
    queues = {"q": QueueInput("q", request=cpu(100), allocated=cpu(30))}
    model = proportion_shares(cpu(20), list(queues.values()))
    state = PassState(model=model, inputs=queues)
    assert model.overused("q")  # holds 30 of a 20-cpu cluster: more than it deserves
    assert session_of("- plugins:\n  - name: proportion\n").overused("q", state)
    assert not session_of("- plugins:\n  - name: capacity\n").overused("q", state)
    predicates = session_of("- plugins:\n  - name: predicates\n")
    assert predicates.has("predicates")
    assert all(
        not predicates.plugins_for(hook)
        for hook in EXTENSION_POINTS
        if hook not in ("score", "open_queues", "configure")
    )


# ------------------------------------------------------------------ refusals kept on the queue


def test_a_refusal_says_which_vote_refused_and_whether_an_earlier_tier_could_admit() -> None:
    session, _ = _voting([("priority", ABSTAIN)], [("overcommit", REJECT)])
    refusal = session.enqueue_refusal(job("j"), PassState())
    assert refusal is not None
    assert (refusal.reason, refusal.plugin) == ("overcommit says no", "overcommit")
    assert not refusal.first  # the first tier has a vote (it abstained this time)
    session, _ = _voting([("overcommit", PERMIT), ("proportion", REJECT)])
    refusal = session.enqueue_refusal(job("j"), PassState())
    assert refusal is not None and refusal.plugin == "proportion" and refusal.first
