"""plugins.model.capacity_shares: Volcano's deserved-based queues, flat and hierarchical
(spec/volcano.md §3.10), against tables computed by hand in the comments."""

from __future__ import annotations

from core.resources import ResourceVector
from plugins.model.capacity_shares import capacity_shares
from plugins.model.queue_share import QueueInput

GI = 2**30


def res(cpu: float = 0, mem_gi: float = 0, pods: int = 0) -> ResourceVector:
    amounts = {"cpu": int(cpu * 1000), "memory": int(mem_gi * GI), "pods": pods}
    return ResourceVector({k: v for k, v in amounts.items() if v})


TOTAL = res(100, 400, pods=1100)


def flat(**usage: ResourceVector):
    """a: deserved 60, guarantee 20; b: deserved 70, capability 50; c: deserved 5, guarantee
    10; d: no deserved (best-effort). `usage` gives allocated per queue."""
    return capacity_shares(
        TOTAL,
        [
            QueueInput("a", deserved=res(60), guarantee=res(20), allocated=usage.get("a", res())),
            QueueInput("b", deserved=res(70), capability=res(50), allocated=usage.get("b", res())),
            QueueInput("c", deserved=res(5), guarantee=res(10), allocated=usage.get("c", res())),
            QueueInput("d", allocated=usage.get("d", res())),
        ],
    )


def test_flat_deserved_is_clamped_to_real_capability_and_floored_at_guarantee() -> None:
    # totalGuarantee = 20 + 10 = 30 cpu; unguaranteed = 70 cpu, 400Gi.
    # a: realCapability = 70 + 20 = 90 cpu, 400Gi; deserved = min(60, 90) = 60.
    # b: realCapability = min(70 + 0, capability 50) = 50 cpu, 400Gi; deserved = min(70, 50) = 50.
    # c: realCapability = 70 + 10 = 80 cpu; deserved = max(5, guarantee 10) = 10.
    model = flat()
    assert model.shares["a"].real_capability == res(90, 400)
    assert model.shares["a"].deserved == res(60)
    assert model.shares["b"].real_capability == res(50, 400)
    assert model.shares["b"].deserved == res(50)
    assert model.shares["c"].real_capability == res(80, 400)
    assert model.shares["c"].deserved == res(10)


def test_best_effort_queue_has_share_one_and_is_ordered_after_equal_shares() -> None:
    # a: 30/60 = 0.5; b: 50/50 = 1.0; c: 0/10 = 0; d: best-effort, fixed 1.0 even when idle.
    model = flat(a=res(30), b=res(50))
    assert model.shares["d"].best_effort
    assert model.shares["d"].share == 1.0
    assert model.shares["b"].share == 1.0
    assert model.queue_order() == ["c", "a", "b", "d"]


def test_no_overused_hook_a_queue_may_borrow_up_to_real_capability() -> None:
    # a holds 80 > deserved 60 but realCapability is 90: still allocatable for 10 more.
    model = flat(a=res(80))
    assert not model.shares["a"].overused()
    assert not model.overused("a")
    assert model.allocatable("a", res(10)) is None
    assert model.allocatable("a", res(11)) == (
        "queue a over its capability: holds cpu 80, would hold 91 with this gang, "
        "may hold (realCapability) 90"
    )


def test_flat_enqueue_against_real_capability() -> None:
    # b: 6 + 45 = 51 > 50.
    model = flat(b=res(45))
    assert model.enqueueable("b", res(6)) == (
        "queue b cannot hold minResources: cpu need 6, realCapability 50, allocated 45, inqueue 0"
    )
    assert model.enqueueable("b", res(5)) is None
    model.on_enqueued("b", res(5))
    assert model.enqueueable("b", res(1)) is not None  # 1 + 45 + 5 inqueue = 51


def test_preemptive_needs_room_below_deserved() -> None:
    # a deserves 60: 50 + 5 = 55 <= 60 -> may reclaim; 58 + 5 = 63 -> at/over deserved in cpu
    # (memory is not in its deserved, so it cannot count as "below deserved").
    assert flat(a=res(50)).preemptive("a", res(5, 1))
    assert not flat(a=res(58)).preemptive("a", res(5, 1))
    # Best-effort d deserves nothing, so it never reclaims.
    assert not flat().preemptive("d", res(1))


# ---------------------------------------------------------------------------- hierarchical
#
#   root (total 100 cpu / 400Gi)
#   ├── eng       guarantee 20, capability cpu 60, deserved 50
#   │   ├── a     guarantee 10, deserved 30
#   │   └── b     capability memory 64Gi, deserved 20
#   └── research  guarantee 10, deserved 40
#
# root:      realCapability = total = 100 cpu, 400Gi; capability unbounded.
# eng:       Σ guarantee of root's children = 20 + 10 = 30.
#            realCapability = (100 - 30) + 20 = 90 ∧ 60 = 60 cpu; 400Gi. deserved 50.
# research:  (100 - 30) + 10 = 80 cpu, 400Gi. deserved 40.
# a:         Σ guarantee of eng's children = 10; capability inherits cpu 60.
#            realCapability = (60 - 10) + 10 = 60 cpu ∧ 60; 400Gi. deserved 30.
# b:         capability = memory 64Gi (own) + cpu 60 (inherited).
#            realCapability = (60 - 10) + 0 = 50 cpu; min(400, 64) = 64Gi. deserved 20.
# root:      deserved = 50 + 40 = 90 cpu; guarantee = 20 + 10 = 30 cpu.


def tree(a_alloc: ResourceVector | None = None, b_alloc: ResourceVector | None = None):
    return capacity_shares(
        TOTAL,
        [
            QueueInput("eng", guarantee=res(20), capability=res(60), deserved=res(50)),
            QueueInput("research", parent="root", guarantee=res(10), deserved=res(40)),
            QueueInput(
                "a", parent="eng", guarantee=res(10), deserved=res(30), allocated=a_alloc or res()
            ),
            QueueInput(
                "b",
                parent="eng",
                capability=res(0, 64),
                deserved=res(20),
                allocated=b_alloc or res(),
            ),
        ],
        hierarchical=True,
    )


def test_hierarchical_real_capability_deserved_and_inherited_capability() -> None:
    model = tree()
    s = model.shares
    assert s["root"].real_capability == res(100, 400)
    assert s["eng"].real_capability == res(60, 400)
    assert s["research"].real_capability == res(80, 400)
    assert s["a"].real_capability == res(60, 400)
    assert s["b"].real_capability == res(50, 64)
    assert s["b"].capability == res(60, 64)  # cpu inherited from eng
    assert s["a"].capability == res(60)
    assert s["eng"].deserved == res(50)
    assert s["a"].deserved == res(30)
    assert s["root"].deserved == res(90)
    assert s["root"].guarantee == res(30)


def test_hierarchical_usage_adds_up_to_ancestors() -> None:
    model = tree(a_alloc=res(40), b_alloc=res(10))
    assert model.shares["eng"].allocated == res(50)
    assert model.shares["root"].allocated == res(50)
    assert model.shares["eng"].share == 1.0  # 50 / 50
    model.on_allocated("b", res(5, pods=1))
    assert model.shares["eng"].allocated == res(55)
    assert model.shares["root"].allocated == res(55)


def test_hierarchical_enqueue_checks_every_ancestor() -> None:
    # a: 15 + 40 = 55 <= 60 fits a, but eng: 15 + (40 + 10) = 65 > 60.
    model = tree(a_alloc=res(40), b_alloc=res(10))
    assert model.enqueueable("a", res(15)) == (
        "queue eng (ancestor of a) cannot hold minResources: "
        "cpu need 15, realCapability 60, allocated 50, inqueue 0"
    )
    # 10 + 50 = 60 fits eng; once enqueued, eng holds 10 inqueue and b cannot add 1 more.
    assert model.enqueueable("a", res(10)) is None
    model.on_enqueued("a", res(10))
    assert model.shares["eng"].inqueue == res(10)
    assert model.shares["root"].inqueue == res(10)
    assert model.enqueueable("b", res(1)) == (
        "queue eng (ancestor of b) cannot hold minResources: "
        "cpu need 1, realCapability 60, allocated 50, inqueue 10"
    )
    # research is in another subtree: unaffected.
    assert model.enqueueable("research", res(30)) is None


def test_hierarchical_allocatable_checks_ancestors() -> None:
    model = tree(a_alloc=res(40), b_alloc=res(10))
    assert model.allocatable("a", res(15)) == (
        "queue eng (ancestor of a) over its capability: holds cpu 50, would hold 65 with this "
        "gang, may hold (realCapability) 60"
    )
    assert model.allocatable("a", res(10)) is None


def test_non_leaf_queue_rejects_jobs() -> None:
    model = tree()
    reason = "queue eng is not a leaf queue: jobs must be in leaf queues"
    assert model.enqueueable("eng", None) == reason
    assert model.enqueueable("eng", res(1)) == reason
    assert model.allocatable("eng", res(1)) == reason
    assert model.enqueueable("a", None) is None


def test_flat_mode_ignores_parent() -> None:
    model = capacity_shares(
        TOTAL,
        [
            QueueInput("eng", capability=res(10), deserved=res(10)),
            QueueInput("a", parent="eng", deserved=res(30)),
        ],
    )
    assert model.enqueueable("eng", res(1)) is None  # no leaf rule
    assert model.enqueueable("a", res(20)) is None  # eng's capability does not bind a
    assert model.shares["a"].capability.is_zero()


def test_unknown_parent_and_cycles_hang_under_root() -> None:
    model = capacity_shares(
        TOTAL,
        [
            QueueInput("x", parent="ghost", deserved=res(10)),
            QueueInput("p", parent="q", deserved=res(10)),
            QueueInput("q", parent="p", deserved=res(10)),
        ],
        hierarchical=True,
    )
    assert model.chain("x") == ("x", "root")
    # p -> q -> p: q is cut to hang under root, p stays under q.
    chains = {model.chain("p"), model.chain("q")}
    assert all(chain[-1] == "root" for chain in chains)
    assert model.shares["root"].real_capability == res(100, 400)
