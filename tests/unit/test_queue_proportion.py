"""plugins.model.proportion_shares: Volcano's weight-based fair share (spec/volcano.md §3.4, §3.9),
against tables computed by hand in the comments. cpu is in millicores, memory in bytes."""

from __future__ import annotations

import pytest

from core.resources import ResourceVector
from plugins.model.proportion_shares import proportion_shares
from plugins.model.queue_share import QueueInput, share_of

GI = 2**30


def res(cpu: float = 0, mem_gi: float = 0, pods: int = 0) -> ResourceVector:
    amounts = {"cpu": int(cpu * 1000), "memory": int(mem_gi * GI), "pods": pods}
    return ResourceVector({k: v for k, v in amounts.items() if v})


TOTAL = res(40, 160, pods=220)
HUGE = res(1000, 10_000)  # a request no queue can get: every queue stays hungry


def deserved(model, name: str) -> tuple[float, float]:
    share = model.shares[name]
    return share.deserved.cpu / 1000, share.deserved.memory / GI


def test_weights_1_to_3_both_saturated() -> None:
    # Round 1: W = 1 + 3 = 4; a += 40*1/4 = 10 cpu, 160*1/4 = 40Gi; b += 30 cpu, 120Gi.
    # Both still below their request -> unmet; remaining = 40 - 40 = 0 -> stop.
    model = proportion_shares(
        TOTAL, [QueueInput("a", 1, request=HUGE), QueueInput("b", 3, request=HUGE)]
    )
    assert deserved(model, "a") == (10, 40)
    assert deserved(model, "b") == (30, 120)
    # pods is no share dimension (Volcano keeps the pod count out of its Resource).
    assert "pods" not in model.shares["a"].deserved


def test_capability_caps_heavy_queue_and_the_rest_flows_to_the_other() -> None:
    # b: capability cpu 20 -> realCapability cpu min(40, 20) = 20, memory 160Gi.
    # Round 1 (W=4): a = 10 cpu / 40Gi; b = min(30, 20) = 20 cpu / 120Gi.
    #   remaining = cpu 40-30 = 10, memory 160-160 = 0.
    # Round 2 (W=4): a += 10/4 = 2.5 -> 12.5 cpu; b += 7.5 -> capped at 20: unchanged -> met.
    #   remaining = cpu 10-2.5 = 7.5.
    # Round 3 (W=1): a += 7.5 -> 20 cpu; remaining 0 -> stop.
    model = proportion_shares(
        TOTAL,
        [
            QueueInput("a", 1, request=HUGE),
            QueueInput("b", 3, request=HUGE, capability=res(20)),
        ],
    )
    assert deserved(model, "a") == (20, 40)
    assert deserved(model, "b") == (20, 120)
    assert model.shares["b"].real_capability == res(20, 160)


def test_guarantee_floors_deserved_and_is_held_back_from_the_others() -> None:
    # totalGuarantee = cpu 15. realCapability a = (40-15) + 15 = 40 cpu; b = (40-15) + 0 = 25.
    # Round 1 (W=4): a = max(10, guarantee 15) = 15 cpu, 40Gi; b = min(30, 25) = 25 cpu, 120Gi.
    #   remaining = cpu 40-15-25 = 0, memory 0 -> stop.
    model = proportion_shares(
        TOTAL,
        [
            QueueInput("a", 1, request=HUGE, guarantee=res(15)),
            QueueInput("b", 3, request=HUGE),
        ],
    )
    assert deserved(model, "a") == (15, 40)
    assert deserved(model, "b") == (25, 120)
    assert model.shares["a"].real_capability == res(40, 160)
    assert model.shares["b"].real_capability == res(25, 160)


def test_guarantee_is_deserved_even_above_the_request() -> None:
    # a asks for 5 cpu / 20Gi but is guaranteed 15 cpu: deserved = max(min(20, 5), 15) = 15
    # (met: request <= deserved). b: realCapability 40-15 = 25; round 1 b = 20 cpu, 80Gi;
    # remaining cpu 40-35 = 5, memory 160-100 = 60Gi; round 2 b += 5 -> 25 (its cap), += 60Gi.
    model = proportion_shares(
        TOTAL,
        [
            QueueInput("a", 1, request=res(5, 20), guarantee=res(15)),
            QueueInput("b", 1, request=HUGE),
        ],
    )
    assert deserved(model, "a") == (15, 20)
    assert deserved(model, "b") == (25, 140)


def test_queue_requesting_less_than_its_share_donates_the_rest() -> None:
    # Round 1 (W=2): a = min(20, request 5) = 5 cpu, min(80, 20) = 20Gi -> request met;
    #   b = 20 cpu, 80Gi. remaining = cpu 40-25 = 15, memory 160-100 = 60Gi.
    # Round 2 (W=1): b += 15 -> 35 cpu, += 60 -> 140Gi. remaining 0 -> stop.
    model = proportion_shares(
        TOTAL,
        [QueueInput("a", 1, request=res(5, 20)), QueueInput("b", 1, request=HUGE)],
    )
    assert deserved(model, "a") == (5, 20)
    assert deserved(model, "b") == (35, 140)


def test_queue_without_jobs_gets_nothing() -> None:
    # c (weight 4) has no jobs: the division is a:b = 1:3 alone (10 / 30 cpu), c deserves 0.
    model = proportion_shares(
        TOTAL,
        [
            QueueInput("a", 1, request=HUGE),
            QueueInput("b", 3, request=HUGE),
            QueueInput("c", 4, request=HUGE, has_jobs=False),
        ],
    )
    assert deserved(model, "a") == (10, 40)
    assert deserved(model, "b") == (30, 120)
    assert model.shares["c"].deserved.is_zero()


def test_real_capability_subtracts_every_other_queues_guarantee() -> None:
    # totalGuarantee = 4 + 6 = 10 cpu (b has no jobs but its guarantee is still reserved).
    # a: (40-10) + 4 = 34 cpu, 160Gi. b: (40-10) + 6 = 36 cpu.
    # c: (40-10) + 0 = 30 -> capability cpu 20 => 20; capability memory 0 means unbounded.
    model = proportion_shares(
        TOTAL,
        [
            QueueInput("a", request=HUGE, guarantee=res(4)),
            QueueInput("b", guarantee=res(6), has_jobs=False),
            QueueInput("c", request=HUGE, capability=ResourceVector({"cpu": 20_000, "memory": 0})),
        ],
    )
    assert model.shares["a"].real_capability == res(34, 160)
    assert model.shares["b"].real_capability == res(36, 160)
    assert model.shares["c"].real_capability == res(20, 160)
    assert model.shares["c"].capability == res(20)


def test_awkward_division_is_floored_and_never_exceeds_the_total() -> None:
    # 1000m cpu and 1000 bytes over weights 1:2 -> 333.33 / 666.67 -> floored 333 / 666;
    # 1m and 1 byte are left undeserved.
    total = ResourceVector({"cpu": 1000, "memory": 1000})
    request = ResourceVector({"cpu": 10**6, "memory": 10**6})
    model = proportion_shares(
        total, [QueueInput("a", 1, request=request), QueueInput("b", 2, request=request)]
    )
    assert model.shares["a"].deserved == ResourceVector({"cpu": 333, "memory": 333})
    assert model.shares["b"].deserved == ResourceVector({"cpu": 666, "memory": 666})


def test_three_equal_queues_over_ten_cpus() -> None:
    # 10000m / 3 = 3333.33 each -> 3333; a fourth round does not hand out the last 1m.
    request = res(100)
    model = proportion_shares(res(10), [QueueInput(n, request=request) for n in "abc"])
    assert [model.shares[n].deserved.cpu for n in "abc"] == [3333, 3333, 3333]


def test_share_and_overused() -> None:
    # a deserves 10 cpu / 40Gi (the 1:3 table).
    # allocated 12 cpu / 20Gi -> share max(12/10, 20/40) = 1.2; not overused (memory below).
    # allocated 10 cpu / 40Gi -> share 1.0 and overused (deserved <= allocated everywhere).
    def model_with(allocated: ResourceVector):
        return proportion_shares(
            TOTAL,
            [
                QueueInput("a", 1, request=HUGE, allocated=allocated),
                QueueInput("b", 3, request=HUGE),
            ],
        )

    a = model_with(res(12, 20)).shares["a"]
    assert a.share == pytest.approx(1.2)
    assert not a.overused()
    a = model_with(res(10, 40)).shares["a"]
    assert a.share == pytest.approx(1.0)
    assert a.overused()
    assert model_with(res(10, 40)).overused("a")
    assert not model_with(res(10, 40)).overused("b")


def test_share_of_zero_deserved() -> None:
    # x/0 = 1, 0/0 = 0 (Volcano's helpers.Share); pods never counts.
    gpu = "nvidia.com/gpu"
    assert share_of(ResourceVector({"cpu": 5, gpu: 1}), ResourceVector({"cpu": 10, gpu: 0})) == 1.0
    assert share_of(ResourceVector({"cpu": 5}), ResourceVector({"cpu": 10, gpu: 0})) == 0.5
    assert share_of(ResourceVector({"pods": 5}), ResourceVector({"cpu": 10, "pods": 1})) == 0.0


def test_on_allocated_moves_share() -> None:
    model = proportion_shares(
        TOTAL, [QueueInput("a", 1, request=HUGE), QueueInput("b", 3, request=HUGE)]
    )
    model.on_allocated("a", res(5, pods=1))
    assert model.shares["a"].allocated == res(5)
    assert model.shares["a"].share == pytest.approx(0.5)  # 5 / 10 cpu
    model.on_released("a", res(5, pods=1))
    assert model.shares["a"].share == 0.0


def research(**kwargs) -> QueueInput:
    return QueueInput("research", request=HUGE, **kwargs)


def test_enqueueable_rejects_with_reason_and_accepts() -> None:
    # Single queue: realCapability = 40 cpu. 8 + 36 + 0 - 0 = 44 > 40 -> reject.
    model = proportion_shares(TOTAL, [research(allocated=res(36))])
    assert model.enqueueable("research", res(8)) == (
        "queue research cannot hold minResources: "
        "cpu need 8, realCapability 40, allocated 36, inqueue 0"
    )
    # 4 + 36 = 40 <= 40 -> admit; it then counts as inqueue, so 1 more cpu no longer fits.
    assert model.enqueueable("research", res(4)) is None
    model.on_enqueued("research", res(4))
    assert model.shares["research"].inqueue == res(4)
    assert model.enqueueable("research", res(1)) == (
        "queue research cannot hold minResources: "
        "cpu need 1, realCapability 40, allocated 36, inqueue 4"
    )
    # No minResources always passes; only requested dimensions count (pods never).
    assert model.enqueueable("research", None) is None
    assert model.enqueueable("research", ResourceVector({"memory": GI, "pods": 10_000})) is None


def test_enqueueable_subtracts_elastic_and_names_memory() -> None:
    # 8 + 36 - 6 (elastic) = 38 <= 40 -> admit.
    model = proportion_shares(TOTAL, [research(allocated=res(36, 100), elastic=res(6))])
    assert model.enqueueable("research", res(8)) is None
    # memory: 64 + 100 = 164Gi > 160Gi.
    assert model.enqueueable("research", res(1, 64)) == (
        "queue research cannot hold minResources: "
        "memory need 64Gi, realCapability 160Gi, allocated 100Gi, inqueue 0"
    )


def test_enqueueable_counts_inqueue_against_real_capability_not_deserved() -> None:
    # research deserves 10 cpu (weights 1:3) but may hold up to its realCapability (40)
    # allocated and enqueued: 6 allocated + 28 inqueue + 6 = 40.
    model = proportion_shares(
        TOTAL, [research(allocated=res(6), inqueue=res(28)), QueueInput("b", 3, request=HUGE)]
    )
    assert model.shares["research"].deserved.cpu == 10_000
    assert model.enqueueable("research", res(6)) is None
    refused = model.enqueueable("research", res(7))
    assert refused is not None and "realCapability 40" in refused


def test_enqueueable_refuses_a_minimum_beyond_the_share() -> None:
    """Beyond Volcano: a minimum the queue's deserved share cannot hold is refused at enqueue
    (allocate could never place it, and Inqueue it would hold the queue's room)."""
    model = proportion_shares(TOTAL, [research(), QueueInput("b", 3, request=HUGE)])
    assert model.enqueueable("research", res(10)) is None
    assert model.enqueueable("research", res(11)) == (
        "queue research cannot hold minResources within its share: cpu need 11, deserves 10"
    )


def test_beyond_limit_compares_the_minimum_alone_with_deserved() -> None:
    # research deserves 10 cpu (weights 1:3), holds 6: 10 fits its share were it empty (though
    # not now, 6 + 10 > 10); 11 can never be allocated at this share; pods never count.
    model = proportion_shares(
        TOTAL, [research(allocated=res(6), inqueue=res(11)), QueueInput("b", 3, request=HUGE)]
    )
    assert model.beyond_limit("research", res(10, pods=100)) is None
    assert model.beyond_limit("research", res(11)) is not None
    assert model.beyond_limit("nope", res(11)) is None
    # Released from inqueue (floored at 0): later enqueues no longer count it.
    model.release_inqueue("research", res(11, pods=3))
    assert model.shares["research"].inqueue.is_zero()
    assert model.enqueueable("research", res(10)) is None


def test_allocatable_reason_is_exact() -> None:
    # research alone deserves all 40 cpu; 40 allocated + 8 = 48 > 40.
    model = proportion_shares(TOTAL, [research(allocated=res(40))])
    assert model.allocatable("research", res(8, pods=1)) == (
        "queue research over its share: holds cpu 40, would hold 48 with this gang, deserves 40"
    )
    assert model.allocatable("research", res(0, 1)) is None  # memory only: 1Gi <= 160Gi


def test_preemptive_is_allocated_plus_request_within_deserved() -> None:
    # a deserves 10 cpu and holds 6: 6 + 4 = 10 ok, 6 + 5 = 11 not.
    model = proportion_shares(
        TOTAL,
        [QueueInput("a", 1, request=HUGE, allocated=res(6)), QueueInput("b", 3, request=HUGE)],
    )
    assert model.preemptive("a", res(4))
    assert not model.preemptive("a", res(5))


def test_closed_queue_rejects_everything() -> None:
    model = proportion_shares(TOTAL, [research(open=False, state="Closed")])
    assert model.enqueueable("research", None) == "queue research is Closed"
    assert model.enqueueable("research", res(1)) == "queue research is Closed"
    assert model.allocatable("research", res(1)) == "queue research is Closed"
    assert not model.preemptive("research", res(1))
    # Without a state for the message it still rejects.
    model = proportion_shares(TOTAL, [research(open=False)])
    assert model.enqueueable("research", None) == "queue research is not Open"


def test_unknown_queue_is_rejected() -> None:
    model = proportion_shares(TOTAL, [research()])
    assert model.enqueueable("nope", None) == "queue nope does not exist"


def test_queue_order_priority_then_share_then_creation_then_name() -> None:
    # d has no jobs (share 0) but priority 1, so it leads whatever its share.
    t0, t1 = "2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z"
    queues = [
        QueueInput("a", 1, request=HUGE, allocated=res(9), creation=t0),
        QueueInput("b", 3, request=HUGE, allocated=res(15), creation=t1),
        QueueInput("d", 1, request=HUGE, priority=1, creation=t1, has_jobs=False),
        QueueInput("c", 3, request=HUGE, allocated=res(15), creation=t0),
    ]
    model = proportion_shares(TOTAL, queues)
    # Weights a:b:c = 1:3:3 of 40 cpu -> deserved 5714m / 17142m / 17142m, so shares
    # a = 9000/5714 = 1.58, b = c = 15000/17142 = 0.875; c is older than b.
    assert model.queue_order() == ["d", "c", "b", "a"]
