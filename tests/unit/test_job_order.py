"""Volcano's job order within a queue and queue order (spec/volcano.md §3.2, §3.12, §3.13,
§3.18, §3.21), as the session of a conf with priority, gang, drf and sla orders jobs. Each test
isolates one level of the chain priority -> gang -> drf -> sla -> creationTimestamp -> UID."""

from __future__ import annotations

from dataclasses import replace

from core.resources import ResourceVector
from plugins.builtin.sla import SlaPlugin
from plugins.framework.config import SchedulerConfig, default_config, parse_scheduler_config
from plugins.framework.extension_points import PassState
from plugins.framework.registry import build_policy
from plugins.model.job_order import JobInput, drf_share, parse_time, queue_order_key
from plugins.model.queue_share import QueueInput, QueueShare

GI = 2**30
TOTAL = ResourceVector({"cpu": 100_000, "memory": 100 * GI, "pods": 110})
T10 = "2024-05-01T10:00:00Z"
T11 = "2024-05-01T11:00:00Z"
NOW = parse_time("2024-05-01T12:00:00Z")


def job(name: str, **overrides) -> JobInput:
    base = JobInput(
        key=f"ns/{name}",
        queue="q",
        priority=0,
        ready=False,
        allocated=ResourceVector(),
        creation=T10,
        uid=f"uid-{name}",
    )
    return replace(base, **overrides)


# The chain of the tests: Volcano's default tiers with sla after drf.
CHAIN = parse_scheduler_config(
    "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n"
    "- plugins:\n  - name: drf\n  - name: sla\n  - name: proportion\n"
)


def job_order_key(job: JobInput, config: SchedulerConfig = CHAIN) -> tuple[object, ...]:
    state = PassState(total=TOTAL.as_dict(), now=NOW)
    return build_policy(config).job_order_key(job, state)


def order(*jobs: JobInput) -> list[str]:
    return [j.key.split("/")[1] for j in sorted(jobs, key=job_order_key)]


def job_order_plugins(config: SchedulerConfig) -> tuple[str, ...]:
    return tuple(p.name for p in build_policy(config).plugins_for("job_order_key"))


def cpu(cores: float, mem_gi: float = 0) -> ResourceVector:
    return ResourceVector({"cpu": int(cores * 1000), "memory": int(mem_gi * GI)})


def test_priority_first_even_against_ready_and_bigger_share() -> None:
    # high is ready and holds half the cluster; it still beats a fresh low-priority job.
    high = job("high", priority=10, ready=True, allocated=cpu(50), creation=T11)
    low = job("low", priority=1)
    assert order(low, high) == ["high", "low"]


def test_gang_not_ready_before_ready() -> None:
    ready = job("ready", ready=True, creation=T10)
    waiting = job("waiting", ready=False, allocated=cpu(40), creation=T11)
    assert order(ready, waiting) == ["waiting", "ready"]


def test_drf_dominant_share_not_sum() -> None:
    # x: cpu 30/100, memory 30/100 -> dominant 0.3 (sum 0.6)
    # y: cpu 40/100, memory 0      -> dominant 0.4 (sum 0.4)
    # DRF puts x first; a sum-of-shares order would put y first.
    x = job("x", allocated=cpu(30, 30), creation=T11)
    y = job("y", allocated=cpu(40), creation=T10)
    assert drf_share(x.allocated, TOTAL) == 0.3
    assert drf_share(y.allocated, TOTAL) == 0.4
    assert order(y, x) == ["x", "y"]


def test_drf_ignores_pods_and_resources_the_cluster_lacks() -> None:
    # 100 of 110 pod slots is not a share; a GPU the cluster does not have is skipped.
    allocated = ResourceVector({"cpu": 10_000, "pods": 100, "nvidia.com/gpu": 2})
    assert drf_share(allocated, TOTAL) == 0.1


def test_sla_job_with_waiting_time_before_job_without() -> None:
    # Equal priority, readiness and share; plain is older but has no SLA.
    plain = job("plain", creation=T10)
    sla = job("sla", creation=T11, sla_waiting_seconds=3600)
    assert order(plain, sla) == ["sla", "plain"]


def test_sla_earlier_deadline_first() -> None:
    # old: 10:00 + 2h = 12:00; young: 11:00 + 30m = 11:30 -> young's deadline is earlier.
    old = job("old", creation=T10, sla_waiting_seconds=7200)
    young = job("young", creation=T11, sla_waiting_seconds=1800)
    assert order(old, young) == ["young", "old"]


def test_sla_does_not_override_priority_gang_or_drf() -> None:
    # overdue: deadline 10:00 + 10m long passed; yet tiers vote in order (§3.2, §3.21).
    overdue = {"creation": T10, "sla_waiting_seconds": 600}
    assert order(job("late", **overdue), job("vip", priority=5)) == ["vip", "late"]
    assert order(job("late", ready=True, **overdue), job("unready")) == ["unready", "late"]
    assert order(job("late", allocated=cpu(20), **overdue), job("small", allocated=cpu(10))) == [
        "small",
        "late",
    ]


def test_non_positive_waiting_time_is_ignored() -> None:
    # A zero waiting time is no SLA: the older plain job wins on creationTimestamp.
    assert order(job("zero", creation=T11, sla_waiting_seconds=0), job("plain")) == [
        "plain",
        "zero",
    ]


def test_creation_then_uid() -> None:
    assert order(job("young", creation=T11), job("old", creation=T10)) == ["old", "young"]
    b = job("b", uid="uid-2")
    a = job("a", uid="uid-1")
    assert order(b, a) == ["a", "b"]
    # Fractional seconds and offsets compare as instants, not strings.
    early = job("early", creation="2024-05-01T12:30:00+02:00")  # 10:30Z
    late = job("late", creation="2024-05-01T10:45:00.5Z")
    assert order(late, early) == ["early", "late"]


def test_unreadable_creation_counts_as_oldest() -> None:
    assert parse_time("") == 0.0
    assert parse_time("yesterday") == 0.0
    assert order(job("ok", creation=T10), job("bad", creation="yesterday")) == ["bad", "ok"]


def test_sla_permits_once_expired() -> None:
    sla = SlaPlugin({})
    j = job("j", creation=T10, sla_waiting_seconds=7200)  # deadline 12:00

    def permits(j: JobInput, now: float) -> bool:
        return sla.job_enqueueable(j, PassState(now=now)).verdict == 1

    assert permits(j, NOW)
    assert not permits(j, NOW - 1)
    assert not permits(job("none"), NOW)


def share(name: str, value: float, best_effort: bool = False) -> QueueShare:
    return QueueShare(name=name, share=value, best_effort=best_effort)


def test_queue_order_key() -> None:
    entries = [
        (share("low-share", 0.2), QueueInput("low-share", creation=T11)),
        (share("urgent", 0.9), QueueInput("urgent", priority=3, creation=T11)),
        (share("best-effort", 0.5, True), QueueInput("best-effort", creation=T10)),
        (share("half-new", 0.5), QueueInput("half-new", creation=T11)),
        (share("half-old", 0.5), QueueInput("half-old", creation=T10)),
        (share("half-old-b", 0.5), QueueInput("half-old-b", creation=T10)),
    ]
    ordered = [s.name for s, q in sorted(entries, key=lambda e: queue_order_key(*e))]
    # priority desc; share asc; best-effort after equal shares; creation; name.
    assert ordered == ["urgent", "low-share", "half-old", "half-old-b", "half-new", "best-effort"]


def test_the_conf_decides_which_plugins_vote_and_in_which_order() -> None:
    assert job_order_plugins(default_config()) == ("priority", "gang", "drf")  # no sla there
    with_sla = parse_scheduler_config(
        "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n"
        "- plugins:\n  - name: drf\n  - name: sla\n"
    )
    assert job_order_plugins(with_sla) == ("priority", "gang", "drf", "sla")
    drf_first = parse_scheduler_config(
        "tiers:\n- plugins:\n  - name: drf\n  - name: priority\n"
        "    enableJobOrder: false\n  - name: gang\n"
    )
    assert job_order_plugins(drf_first) == ("drf", "gang")

    important = JobInput(
        key="ns/important",
        queue="q",
        priority=10,
        ready=False,
        allocated=ResourceVector({"cpu": 8000}),
        creation="2026-01-01T00:00:00Z",
        uid="1",
    )
    small = JobInput(
        key="ns/small",
        queue="q",
        priority=0,
        ready=False,
        allocated=ResourceVector({"cpu": 1000}),
        creation="2026-01-01T00:00:00Z",
        uid="2",
    )

    def first(config: SchedulerConfig) -> str:
        return min((important, small), key=lambda j: job_order_key(j, config)).key

    assert first(default_config()) == "ns/important"  # priority decides
    assert first(drf_first) == "ns/small"  # the smaller share first
