"""Prometheus metrics of the extender (base units, `vulcan_` prefix), in a registry of its own
so several servers in one process (tests) do not collide."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from core.gc_pauses import GcPauseTimer
from core.records import PodGroupRecord
from core.timestamps import epoch_seconds
from plugins.model.gang import GangView

# Filter and prioritize are sub-millisecond to a few ms; binds may be held for a gang.
_LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)


class _CacheCollector(Collector):
    """Object counts and informer lag, computed at scrape time."""

    def __init__(
        self, counts: Callable[[], dict[str, int]], last_events: Callable[[], dict[str, float]]
    ) -> None:
        self._counts = counts
        self._last_events = last_events

    def collect(self) -> Iterable[GaugeMetricFamily]:
        objects = GaugeMetricFamily(
            "vulcan_cache_objects", "Objects in vulcan's cluster cache.", labels=["kind"]
        )
        for kind, count in self._counts().items():
            objects.add_metric([kind], count)
        yield objects
        lag = GaugeMetricFamily(
            "vulcan_informer_lag_seconds",
            "Seconds since the informer last heard from the API server (event or bookmark).",
            labels=["resource"],
        )
        now = time.monotonic()
        for resource, last in self._last_events().items():
            lag.add_metric([resource], max(0.0, now - last) if last else float("nan"))
        yield lag


# Gang latencies: from a fraction of a second (small gangs) to minutes (waiting for room).
_GANG_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class GangMetrics:
    """The two gang latencies a user asks about: how long a gang waited to be admitted, and
    how long, once all its members existed, until they were bound together."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.admission_duration = Histogram(
            "vulcan_gang_admission_duration_seconds",
            "From a gang's minMember-th member created to its minMember-th member bound "
            "(as the extender saw them).",
            ["queue"],
            buckets=_GANG_BUCKETS,
            registry=registry,
        )
        self.wait_duration = Histogram(
            "vulcan_gang_wait_duration_seconds",
            "From a PodGroup's creation to its admission (Pending -> Inqueue).",
            ["queue"],
            buckets=_GANG_BUCKETS,
            registry=registry,
        )
        # A gang whose held binds timed out (its members were released to be placed again):
        # the alert "gangs past their timeout" counts these, whatever the timeout was set to.
        self.timeouts = Counter(
            "vulcan_gang_timeouts",
            "Gangs whose held binds timed out before all their members arrived (GangTimedOut).",
            ["queue"],
            registry=registry,
        )
        # group -> when the loop first saw minMember of its members exist, until it sees
        # minMember bound.
        self._quorum_seen: dict[str, float] = {}

    def observe(self, group: PodGroupRecord, view: GangView, admitted_now: bool) -> None:
        """What one decision about `group` tells the two histograms."""
        key = group.key
        created = epoch_seconds(group.created) if admitted_now else None
        if created is not None:
            waited = time.time() - created
            self.wait_duration.labels(group.queue).observe(max(0.0, waited))
        if view.scheduled >= view.min_member:
            seen = self._quorum_seen.pop(key, None)
            if seen is not None:
                took = time.monotonic() - seen
                self.admission_duration.labels(group.queue).observe(took)
        elif view.created >= view.min_member and key not in self._quorum_seen:
            self._quorum_seen[key] = time.monotonic()

    def timed_out(self, group: PodGroupRecord) -> None:
        self.timeouts.labels(group.queue).inc()

    def forget(self, key: str) -> None:
        self._quorum_seen.pop(key, None)


class ExtenderMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.request_duration = Histogram(
            "vulcan_extender_request_duration_seconds",
            "Time to answer one kube-scheduler extender call.",
            ["verb"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.requests = Counter(
            "vulcan_extender_requests",
            "Extender calls answered, by verb and HTTP code.",
            ["verb", "code"],
            registry=self.registry,
        )
        self.filter_nodes = Counter(
            "vulcan_extender_filter_nodes",
            "Candidate nodes judged by filter, by result.",
            ["result"],
            registry=self.registry,
        )
        self.binds = Counter(
            "vulcan_extender_binds",
            "Bind calls answered, by the result that ended each: bound, already_bound, "
            "gang_timeout, gang_broken, gang_released, gang_backoff, superseded, "
            "podgroup_deleted, podgroup_recreated, podgroup_not_found, not_found, "
            "uid_mismatch, bound_elsewhere, error, internal_error, invalid_request.",
            ["result"],
            registry=self.registry,
        )
        self.binds_in_flight = Gauge(
            "vulcan_extender_binds_in_flight", "Bind calls being worked on.", registry=self.registry
        )
        self.schedule_pass_duration = Histogram(
            "vulcan_schedule_pass_duration_seconds",
            "Time of one pass of the gang/queue scheduling loop (admission, reclaim, statuses).",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.gangs = GangMetrics(self.registry)
        self.memo_divergences = Counter(
            "vulcan_scheduler_memo_divergences",
            "Gangs the scheduling memo decided otherwise than a pass without it "
            "(--scheduler-memo=check; any is a bug).",
            registry=self.registry,
        )
        self.accounting_breaches = Counter(
            "vulcan_accounting_breaches",
            "Bookings of a scheduling pass that broke a queue accounting invariant "
            "(inqueue-over-capability, allocated-over-capability, victim-promised-twice; any "
            "is a bug).",
            ["kind"],
            registry=self.registry,
        )
        # Installed by the process (gc callbacks are process-wide), not by every server.
        self.gc_pauses = GcPauseTimer(self.registry)

    def watch_cache(
        self, counts: Callable[[], dict[str, int]], last_events: Callable[[], dict[str, float]]
    ) -> None:
        self.registry.register(_CacheCollector(counts, last_events))
