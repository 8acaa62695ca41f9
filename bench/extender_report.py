"""The report of the extender-latency benchmark: the table per candidate count, the
`BENCH extender.<metric> ...` lines and the checks against the targets."""

from __future__ import annotations

from collections.abc import Sequence

from bench.extender_client import SAME_POD, STREAMS, Phase
from bench.extender_settings import HEADLINE
from bench.extender_stats import Stats

# ----------------------------------------------------------------------------- reporting


def say(text: str = "") -> None:
    print(text, flush=True)


def label(count: int) -> str:
    return f"{count // 1000}k" if count >= 1000 and count % 1000 == 0 else str(count)


def ratio(value: float, baseline: float) -> float:
    return value / baseline if baseline else float("nan")


def report_count(phases: Sequence[Phase]) -> None:
    """The table of one candidate count: a block of rows per stream."""
    first = phases[0]
    reasons = ", ".join(f"{n}x {r!r}" for r, n in sorted(first.reasons.items())) or "none"
    say(
        f"\n{first.count} candidates ({first.rounds} rounds per stream, request "
        f"{first.request_kib:.0f} KiB): filter passed {first.passed}, failed {first.failed} "
        f"({reasons})"
    )
    say(
        f"  {'':30} {'extender (ms)':>22}   {'floor (ms)':>22}   {'ratio':>11}"
        f"   {'extender server-side (ms)':>26}"
    )
    say(
        f"  {'stream':10}{'call':20} {'p50':>6} {'p99':>7} {'max':>7}   {'p50':>6} {'p99':>7} "
        f"{'max':>7}   {'p50':>5} {'p99':>5}   {'mean':>6} {'~p50':>6} {'~p99':>6}"
    )
    for phase in phases:
        rows = (
            ("filter+prioritize", phase.extender.both, phase.floor.both, None),
            ("filter", phase.extender.filter, phase.floor.filter, phase.server_filter),
            (
                "prioritize",
                phase.extender.prioritize,
                phase.floor.prioritize,
                phase.server_prioritize,
            ),
        )
        for index, (name, ext_samples, floor_samples, histogram) in enumerate(rows):
            ext, base = Stats.of(ext_samples), Stats.of(floor_samples)
            stream = phase.stream if index == 0 else ""
            line = (
                f"  {stream:10}{name:20} {ext}   {base}   {ratio(ext.p50, base.p50):5.2f} "
                f"{ratio(ext.p99, base.p99):5.2f}"
            )
            if histogram is not None:
                line += (
                    f"   {histogram.mean_ms():6.2f} {histogram.quantile_ms(0.5):6.2f} "
                    f"{histogram.quantile_ms(0.99):6.2f}"
                )
            say(line)
    for phase in phases:
        say(
            f"  {phase.stream}: CPU per filter+prioritize: extender {phase.extender_cpu_ms:.2f} "
            f"ms, floor {phase.floor_cpu_ms:.2f} ms; client {phase.client_cpu_ms:.2f} ms per "
            f"round (both servers)"
        )


def bench_lines(phases: Sequence[Phase]) -> list[str]:
    lines = []
    for phase in phases:
        prefix = "" if phase.stream == SAME_POD else "new_shape_"
        metrics: tuple[tuple[str, list[float], list[float], tuple[str, ...]], ...] = (
            ("filter_prioritize", phase.extender.both, phase.floor.both, ("p50", "p99")),
        )
        if phase.stream == SAME_POD:
            metrics += (
                ("filter", phase.extender.filter, phase.floor.filter, ("p99",)),
                ("prioritize", phase.extender.prioritize, phase.floor.prioritize, ("p99",)),
            )
        for metric, ext_samples, floor_samples, quantiles in metrics:
            ext, base = Stats.of(ext_samples), Stats.of(floor_samples)
            for quantile in quantiles:
                value, baseline = getattr(ext, quantile), getattr(base, quantile)
                lines.append(
                    f"BENCH extender.{prefix}{metric}_{quantile}_{label(phase.count)} "
                    f"value={value:.3f} unit=ms baseline={baseline:.3f} "
                    f"ratio={ratio(value, baseline):.3f}"
                )
    return lines


def target_lines(phases: dict[tuple[str, int], Phase]) -> list[str]:
    checks: list[tuple[str, float, float]] = []
    for stream in STREAMS:
        for (phase_stream, count), phase in phases.items():
            if phase_stream == stream and count <= 500:
                stats = Stats.of(phase.extender.both)
                checks.append((f"{stream}: p50 at {count} candidates", stats.p50, 1.0))
                checks.append((f"{stream}: p99 at {count} candidates", stats.p99, 5.0))
        headline = phases.get((stream, HEADLINE))
        if headline is not None:
            ext, base = Stats.of(headline.extender.both), Stats.of(headline.floor.both)
            checks.append((f"{stream}: p99 at {label(HEADLINE)}", ext.p99, 12.0))
            checks.append(
                (
                    f"{stream}: p99 ratio to the floor at {label(HEADLINE)}",
                    ratio(ext.p99, base.p99),
                    3.0,
                )
            )
    return [
        f"  {name:46} {value:8.2f} <= {limit:<5g} {'met' if value <= limit else 'MISSED'}"
        for name, value, limit in checks
    ]
