"""The statistics of the extender-latency benchmark: nearest-rank percentiles of the client's
samples (Stats) and the extender's own request-duration histogram scraped from /metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bench.extender_settings import METRIC

# ----------------------------------------------------------------------------- statistics


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted samples (p99 of 200 samples is the 198th)."""
    if not ordered:
        return float("nan")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(slots=True)
class Stats:
    p50: float
    p99: float
    max: float
    count: int

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> Stats:
        ordered = sorted(samples_ms)
        return cls(
            percentile(ordered, 0.50),
            percentile(ordered, 0.99),
            ordered[-1] if ordered else float("nan"),
            len(ordered),
        )

    def __str__(self) -> str:
        return f"{self.p50:6.2f} {self.p99:7.2f} {self.max:7.2f}"


@dataclass(slots=True)
class Histogram:
    """One verb's `vulcan_extender_request_duration_seconds` as scraped from /metrics."""

    buckets: list[tuple[float, float]]  # (upper bound s, cumulative count), ascending
    total: float
    count: float

    @classmethod
    def parse(cls, text: str, verb: str) -> Histogram:
        label = f'verb="{verb}"'
        buckets: list[tuple[float, float]] = []
        total = count = 0.0
        for line in text.splitlines():
            if not line.startswith(METRIC) or label not in line:
                continue
            name, value = line.rsplit(" ", 1)
            if name.startswith(METRIC + "_bucket{"):
                bound = name.split('le="', 1)[1].split('"', 1)[0]
                buckets.append((float(bound), float(value)))  # float("+Inf") is inf
            elif name.startswith(METRIC + "_sum{"):
                total = float(value)
            elif name.startswith(METRIC + "_count{"):
                count = float(value)
        buckets.sort()
        return cls(buckets, total, count)

    def __sub__(self, before: Histogram) -> Histogram:
        earlier = dict(before.buckets)
        return Histogram(
            [(bound, n - earlier.get(bound, 0.0)) for bound, n in self.buckets],
            self.total - before.total,
            self.count - before.count,
        )

    def mean_ms(self) -> float:
        return 1000 * self.total / self.count if self.count else float("nan")

    def quantile_ms(self, q: float) -> float:
        """Prometheus' histogram_quantile: linear within the bucket holding rank q*count."""
        if not self.count or not self.buckets:
            return float("nan")
        rank = q * self.count
        lower, below = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(bound):
                    return 1000 * lower  # beyond the last finite bucket
                inside = cumulative - below
                fraction = (rank - below) / inside if inside else 1.0
                return 1000 * (lower + (bound - lower) * fraction)
            lower, below = bound, cumulative
        return 1000 * lower
