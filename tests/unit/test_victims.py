"""Gang-aware victim selection for reclaim and preempt (spec/volcano.md §2.2, §3.7, §3.8,
§3.13) as production makes it: the action's candidates, the session of Volcano's default conf
(priority, gang, conformance; drf, proportion) and the walk of plugins.model.victims.

Unless a test says otherwise the cluster is 40 cpu shared by `dev` and `prod` (weight 1 each,
both asking for more than the cluster) so each deserves 20 cpu; prod holds 30 (10 over its
share) and dev asks for the difference."""

from __future__ import annotations

import pytest

from core.cache import ClusterCache
from core.resources import ResourceVector
from plugins.actions import preempt as preempt_action
from plugins.actions import reclaim as reclaim_action
from plugins.framework.config import default_config
from plugins.framework.extension_points import PassState, Preemptor
from plugins.framework.registry import build_policy
from plugins.model.capacity_shares import capacity_shares
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_share import QueueInput, ShareModel
from plugins.model.victims import VictimUnit, is_critical, preemptable_flag, select_victims
from tests.session_harness import session

SESSION = build_policy(default_config())
ZERO = ResourceVector()


def victims_for_need(
    action: str,
    state: PassState,
    preemptor: Preemptor,
    need: ResourceVector,
    units: list[VictimUnit],
) -> list[VictimUnit] | None:
    """The units to evict so that `need` is freed: only units that free something still
    missing are offered to the session, then the victim walk (`select_victims`)."""
    ssn = session(SESSION, ClusterCache().snapshot())
    ssn.state = state
    wanted = [name for name, amount in need.items() if amount > 0]
    helpful = [u for u in units if any(u.freed.get(name) > 0 for name in wanted)]
    accepted = reclaim_action.accepted if action == "reclaim" else preempt_action.accepted
    return select_victims(need, accepted(ssn, preemptor, helpful))


def reclaim_victims(
    queue: str,
    need: ResourceVector,
    units: list[VictimUnit],
    model: ShareModel,
    qs: dict[str, QueueInput],
) -> list[VictimUnit] | None:
    state = PassState(model=model, inputs=qs)
    preemptor = Preemptor("ns/reclaimer", queue, 0, ZERO, need)
    return victims_for_need("reclaim", state, preemptor, need, units)


def preempt_victims(
    queue: str,
    priority: int,
    need: ResourceVector,
    units: list[VictimUnit],
    *,
    beneficiary_group: str = "ns/preemptor",
) -> list[VictimUnit] | None:
    preemptor = Preemptor(beneficiary_group, queue, priority, ZERO, need)
    return victims_for_need("preempt", PassState(), preemptor, need, units)


GI = 2**30
T1, T2, T3 = "2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z", "2024-05-01T12:00:00Z"


def cpu(cores: float, mem_gi: float = 0) -> ResourceVector:
    amounts = {"cpu": int(cores * 1000), "memory": int(mem_gi * GI)}
    return ResourceVector({k: v for k, v in amounts.items() if v})


def unit(
    name: str,
    queue: str = "prod",
    *,
    priority: int = 0,
    freed: ResourceVector | None = None,
    members: int = 1,
    preemptable: bool = True,
    critical: bool = False,
    breaks_gang: bool = True,
    creation: str = T1,
) -> VictimUnit:
    return VictimUnit(
        group=f"ns/{name}",
        queue=queue,
        priority=priority,
        pods=tuple(f"ns/{name}-{i}" for i in range(members)),
        freed=freed if freed is not None else cpu(4),
        preemptable=preemptable,
        critical=critical,
        breaks_gang=breaks_gang,
        creation=creation,
    )


def names(victims: list[VictimUnit] | None) -> list[str] | None:
    return None if victims is None else [v.group.split("/")[1] for v in victims if v.group]


HUGE = cpu(1000)


def queues(
    *, guarantee: ResourceVector | None = None, reclaimable: bool = True
) -> dict[str, QueueInput]:
    return {
        "dev": QueueInput("dev", request=HUGE, allocated=cpu(10)),
        "prod": QueueInput(
            "prod", request=HUGE, allocated=cpu(30), guarantee=guarantee, reclaimable=reclaimable
        ),
    }


def reclaim(need: float, units: list[VictimUnit], qs: dict[str, QueueInput] | None = None):
    qs = qs or queues()
    model = proportion_shares(cpu(40), list(qs.values()))
    return names(reclaim_victims("dev", cpu(need), units, model, qs))


def test_lowest_priority_first_and_only_as_many_as_needed() -> None:
    # prod 30 > 20: take low (-> 26), 26 > 20: take mid (-> 22); 8 cpu >= 6 needed -> stop.
    units = [unit("high", priority=9), unit("low", priority=1), unit("mid", priority=5)]
    assert reclaim(6, units) == ["low", "mid"]


def test_stops_when_victim_queue_is_back_at_its_deserved_share() -> None:
    # 30 -> 26 -> 22 -> 18: after three victims prod (18) is no longer over 20, so the fourth
    # is refused; 12 cpu < 14 needed -> None, although prod still runs 16 cpu of victims.
    units = [unit(f"u{i}", priority=i) for i in range(4)]
    assert reclaim(14, units) is None
    assert reclaim(12, units) == ["u0", "u1", "u2"]


def test_never_below_guarantee() -> None:
    # prod guarantee 25: realCapability dev = 40 - 25 = 15 -> dev deserves 15, prod max(20, 25)
    # = 25. prod 30 > 25: first victim leaves 26 >= 25; the second would leave 22 < 25.
    qs = queues(guarantee=cpu(25))
    units = [unit("a", priority=1), unit("b", priority=2)]
    assert reclaim(4, units, qs) == ["a"]
    assert reclaim(8, units, qs) is None


def test_never_from_non_reclaimable_queue() -> None:
    qs = queues(reclaimable=False)
    assert reclaim(4, [unit("a")], qs) is None


def test_never_non_preemptable_or_critical_pods() -> None:
    units = [
        unit("pinned", priority=0, preemptable=False),
        unit("critical", priority=0, critical=True),
        unit("ok", priority=5),
    ]
    assert reclaim(4, units) == ["ok"]
    assert reclaim(8, units) is None


def test_never_from_own_queue_or_unknown_queue() -> None:
    units = [unit("mine", queue="dev"), unit("stray", queue="ghost")]
    assert reclaim(4, units) is None


def test_whole_gangs_only() -> None:
    # One 2-member gang freeing 8 cpu serves a need of 4: it is taken whole, never split.
    victims = reclaim_victims(
        "dev",
        cpu(4),
        [unit("gang", members=2, freed=cpu(8))],
        proportion_shares(cpu(40), list(queues().values())),
        queues(),
    )
    assert victims is not None and len(victims) == 1
    assert victims[0].pods == ("ns/gang-0", "ns/gang-1")


def test_prefers_units_that_break_no_gang_then_youngest() -> None:
    units = [
        unit("gang", breaks_gang=True, creation=T3),
        unit("old-pod", breaks_gang=False, creation=T1),
        unit("young-pod", breaks_gang=False, creation=T2),
    ]
    assert reclaim(4, units) == ["young-pod"]
    assert reclaim(8, units) == ["young-pod", "old-pod"]
    # Priority still comes first: a lower-priority gang goes before plain pods.
    units.append(unit("cheap-gang", priority=-1, breaks_gang=True))
    assert reclaim(4, units) == ["cheap-gang"]


def test_units_that_free_nothing_missing_are_skipped() -> None:
    # 40 cpu + 4 GPUs, both queues hungry: each deserves 20 cpu + 2 GPUs. prod holds 30 cpu
    # (over) and 2 GPUs (exactly its share). dev needs 2 GPUs.
    # The cpu-only unit comes first in victim order but frees no GPU. Had it been taken, prod
    # would drop to 18 cpu / 2 GPUs <= deserved and the GPU unit would be refused (None).
    gpus = ResourceVector({"nvidia.com/gpu": 2})
    want = HUGE + ResourceVector({"nvidia.com/gpu": 8})
    units = [unit("cpu-only", priority=0, freed=cpu(12)), unit("gpu", priority=5, freed=gpus)]
    qs = {
        "dev": QueueInput("dev", request=want),
        "prod": QueueInput("prod", request=want, allocated=cpu(30) + gpus),
    }
    model = proportion_shares(cpu(40) + gpus + gpus, list(qs.values()))
    assert model.shares["prod"].deserved == cpu(20) + gpus
    assert names(reclaim_victims("dev", gpus, units, model, qs)) == ["gpu"]


def test_reprieves_victims_the_others_cover() -> None:
    # Walk: small (1 cpu, priority 0) then big (8 cpu): 9 >= 8. big alone covers 8, so small
    # is reprieved; small alone does not, so big stays.
    units = [unit("small", priority=0, freed=cpu(1)), unit("big", priority=5, freed=cpu(8))]
    assert reclaim(8, units) == ["big"]


def test_nothing_needed_takes_nothing() -> None:
    assert reclaim(0, [unit("a")]) == []


# ---------------------------------------------------------------------- capacity queue rule


def test_capacity_victim_must_free_what_its_queue_holds_beyond_deserved() -> None:
    # prod deserves 30 cpu / 100Gi and holds 20 cpu (under), 150Gi (over) and 1 GPU.
    gpu = ResourceVector({"nvidia.com/gpu": 1})
    qs = {
        "dev": QueueInput("dev", deserved=cpu(10, 10)),
        "prod": QueueInput("prod", deserved=cpu(30, 100), allocated=cpu(20, 150) + gpu),
    }
    model = capacity_shares(cpu(40, 400), list(qs.values()))
    cpu_only = unit("cpu-only", freed=cpu(4))
    both = unit("both", priority=1, freed=cpu(4, 10))
    assert names(reclaim_victims("dev", cpu(4), [cpu_only, both], model, qs)) == ["both"]
    # A GPU unit: prod's deserved has no GPU dimension, so its GPUs are always lendable.
    assert names(reclaim_victims("dev", gpu, [unit("g", freed=gpu)], model, qs)) == ["g"]


def test_capacity_guarantee_floor() -> None:
    # prod: deserved 20, guarantee 20, holds 24: one 4-cpu victim (-> 20) yes, a second no.
    qs = {
        "dev": QueueInput("dev", deserved=cpu(20)),
        "prod": QueueInput("prod", deserved=cpu(20), guarantee=cpu(20), allocated=cpu(24)),
    }
    model = capacity_shares(cpu(40), list(qs.values()))
    units = [unit("a", priority=0), unit("b", priority=1, freed=cpu(2))]
    assert names(reclaim_victims("dev", cpu(4), units, model, qs)) == ["a"]
    assert reclaim_victims("dev", cpu(6), units, model, qs) is None


def test_capacity_hierarchy_judges_the_levels_that_lose() -> None:
    # root 100 cpu: eng (deserved 50) {a (deserved 20, holds 30), b (deserved 30, holds 10)},
    # research (deserved 50) {c (deserved 50)}. eng holds 40 <= 50.
    # For c (other subtree) a victim of a must leave both a and eng over deserved: eng is not.
    # For b (sibling, common ancestor eng) only a is judged: 30 > 20 -> taken.
    qs = {
        "eng": QueueInput("eng", deserved=cpu(50)),
        "research": QueueInput("research", deserved=cpu(50)),
        "a": QueueInput("a", parent="eng", deserved=cpu(20), allocated=cpu(30)),
        "b": QueueInput("b", parent="eng", deserved=cpu(30), allocated=cpu(10)),
        "c": QueueInput("c", parent="research", deserved=cpu(50)),
    }
    model = capacity_shares(cpu(100), list(qs.values()), hierarchical=True)
    victim = unit("x", queue="a")
    assert reclaim_victims("c", cpu(4), [victim], model, qs) is None
    assert names(reclaim_victims("b", cpu(4), [victim], model, qs)) == ["x"]


# ------------------------------------------------------------------------------- preempt


def test_preempt_only_lower_priority_in_same_queue() -> None:
    units = [
        unit("other-queue", queue="dev", priority=0),
        unit("equal", priority=5),
        unit("lower", priority=4),
        unit("lowest", priority=1, freed=cpu(2)),
    ]
    assert names(preempt_victims("prod", 5, cpu(6), units)) == ["lowest", "lower"]
    assert preempt_victims("prod", 5, cpu(8), units) is None  # 'equal' is never a victim


def test_preempt_skips_own_job_and_protected_pods() -> None:
    units = [
        unit("mine", priority=0),
        unit("pinned", priority=0, preemptable=False),
        unit("critical", priority=0, critical=True),
        unit("ok", priority=3),
    ]
    victims = preempt_victims("prod", 5, cpu(4), units, beneficiary_group="ns/mine")
    assert names(victims) == ["ok"]
    assert preempt_victims("prod", 5, cpu(8), units, beneficiary_group="ns/mine") is None


# ------------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("priority_class", "namespace", "critical"),
    [
        ("system-cluster-critical", "default", True),
        ("system-node-critical", "team", True),
        (None, "kube-system", True),
        ("high", "default", False),
        (None, "default", False),
    ],
)
def test_is_critical(priority_class: str | None, namespace: str, critical: bool) -> None:
    assert is_critical(priority_class, namespace) is critical


@pytest.mark.parametrize(
    ("annotations", "labels", "expected"),
    [
        (None, None, True),  # default true when absent
        ({}, {"volcano.sh/preemptable": "false"}, False),
        ({"volcano.sh/preemptable": "true"}, {"volcano.sh/preemptable": "false"}, True),
        ({"volcano.sh/preemptable": "false"}, {"volcano.sh/preemptable": "true"}, False),
        ({"volcano.sh/preemptable": "1"}, None, True),
        ({"volcano.sh/preemptable": "maybe"}, None, False),  # unreadable: do not evict
    ],
)
def test_preemptable_flag(annotations, labels, expected: bool) -> None:
    assert preemptable_flag(annotations, labels) is expected
