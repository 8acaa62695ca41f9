"""What a phase of `bench/real_throughput.py` reads besides its pods: the CPU each process
used (from /proc), vulcan's extender metrics and kube-scheduler's scheduling-algorithm
histogram."""

from __future__ import annotations

import math
import ssl
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from bench.proc_cpu import cpu_of
from bench.real_cluster import PhaseCluster


def phase_cpu(cluster: PhaseCluster) -> dict[str, float]:
    """CPU seconds so far of each running part of the phase and of this load generator."""
    used = {role: cpu_of(pid) for role, pid in cluster.pids().items()}
    used["load generator"] = time.process_time()
    return used


def report_extender_metrics(label: str, cluster: PhaseCluster) -> None:
    """vulcan's own count of the calls it answered, by verb, its binds by result, its
    scheduling passes (how many, their time) and each verb's p50/p99 from its histogram (from
    the request read to the answer returned)."""
    try:
        with urllib.request.urlopen(f"{cluster.extender_url}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    except OSError as exc:
        print(f"[{label}] extender metrics unavailable: {exc}")
        return
    calls: dict[str, float] = {}
    binds: dict[str, float] = {}
    buckets: dict[str, list[tuple[float, float]]] = {}
    gc_pauses: dict[str, float] = {}
    passes = {"n": 0.0, "s": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "vulcan_extender_requests_total":
                verb = sample.labels["verb"]
                calls[verb] = calls.get(verb, 0.0) + sample.value
            elif sample.name == "vulcan_extender_binds_total":
                binds[sample.labels["result"]] = sample.value
            elif sample.name in ("vulcan_gc_pause_seconds_sum", "vulcan_gc_pause_seconds_count"):
                part = "s" if sample.name.endswith("_sum") else "n"
                gc_pauses[f"{sample.labels['generation']}{part}"] = sample.value
            elif sample.name == "vulcan_schedule_pass_duration_seconds_count":
                passes["n"] = sample.value
            elif sample.name == "vulcan_schedule_pass_duration_seconds_sum":
                passes["s"] = sample.value
            elif sample.name == "vulcan_extender_request_duration_seconds_bucket":
                bound = float(sample.labels["le"])
                buckets.setdefault(sample.labels["verb"], []).append((bound, sample.value))
    print(f"[{label}] extender calls: " + ", ".join(f"{v} {n:.0f}" for v, n in calls.items()))
    print(f"[{label}] extender binds: " + ", ".join(f"{r} {n:.0f}" for r, n in binds.items()))
    print(
        f"[{label}] extender passes (whole run): {passes['n']:.0f}, {passes['s']:.2f}s in all, "
        f"{passes['s'] * 1000 / max(passes['n'], 1):.2f} ms each"
    )
    print(
        f"[{label}] extender GC (whole run) by generation: "
        + ", ".join(
            f"gen{g} {gc_pauses.get(f'{g}n', 0):.0f} collections "
            f"{gc_pauses.get(f'{g}s', 0) * 1000:.0f} ms"
            for g in ("0", "1", "2")
        )
    )
    for verb, cumulative in sorted(buckets.items()):
        total = max(count for _, count in cumulative)
        if total:
            p50, p99 = (_bucket_quantile(sorted(cumulative), q) * 1e3 for q in (0.5, 0.99))
            print(f"[{label}] extender {verb}: p50 <= {p50:.2f} ms, p99 <= {p99:.2f} ms")


def apiserver_requests(cluster: PhaseCluster) -> dict[str, float]:
    """kube-apiserver's count of the requests it served so far (`apiserver_request_total`), by
    "VERB resource[/subresource]", and of the watch events it sent (`apiserver_watch_events_*`),
    by "watch resource" (events) and "watch-bytes resource"; {} when its metrics cannot be
    read."""
    try:
        with cluster.plane.open_get("/metrics") as answer:
            text = answer.read().decode()
    except OSError as exc:
        print(f"kube-apiserver metrics unavailable: {exc}")
        return {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "apiserver_request_total":
                what = labels.get("resource", "")
                if labels.get("subresource"):
                    what += "/" + labels["subresource"]
                key = f"{labels.get('verb', '')} {what}"
            elif sample.name == "apiserver_watch_events_total":
                key = f"watch {labels.get('resource', '')}"
            elif sample.name == "apiserver_watch_events_sizes_sum":
                key = f"watch-bytes {labels.get('resource', '')}"
            else:
                continue
            counts[key] = counts.get(key, 0.0) + sample.value
    return counts


def report_apiserver_requests(
    label: str, before: dict[str, float], after: dict[str, float], pods: int
) -> None:
    """The phase's kube-apiserver requests per pod, most first (watches and reads of the
    metrics themselves included: what the API server spent its CPU on), then the watch events
    it sent per pod, by resource, with their kilobytes."""
    if not before or not after:
        return
    spent = {k: v - before.get(k, 0.0) for k, v in after.items()}
    requests = {k: n for k, n in spent.items() if not k.startswith("watch")}
    top = sorted(((n, k) for k, n in requests.items() if n / pods >= 0.01), reverse=True)
    total = sum(requests.values()) / pods
    print(
        f"[{label}] kube-apiserver requests per pod: {total:.2f} "
        + "("
        + ", ".join(f"{k} {n / pods:.2f}" for n, k in top[:14])
        + ")"
    )
    events = {k.split(" ", 1)[1]: n for k, n in spent.items() if k.startswith("watch ")}
    sent = sorted(((n, k) for k, n in events.items() if n / pods >= 0.01), reverse=True)
    if sent:
        print(
            f"[{label}] kube-apiserver watch events sent per pod: "
            + ", ".join(
                f"{k} {n / pods:.2f} ({spent.get(f'watch-bytes {k}', 0.0) / pods / 1024:.1f} KiB)"
                for n, k in sent[:8]
            )
        )


def scheduler_algorithm_quantiles(cluster: PhaseCluster) -> tuple[float, float] | None:
    """p50 and p99 (ms, interpolated in the bucket as Prometheus' histogram_quantile does) of
    kube-scheduler's `scheduler_scheduling_algorithm_duration_seconds`: the Filter and Score of
    each pod, which include the extender's filter and prioritize calls. Set against the alone
    phase it is the extender's latency as kube-scheduler saw it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate
    url = f"https://127.0.0.1:{cluster.scheduler_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as answer:
            text = answer.read().decode()
    except OSError as exc:
        print(f"kube-scheduler metrics unavailable: {exc}")
        return None
    cumulative = [
        (float(sample.labels["le"]), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "scheduler_scheduling_algorithm_duration_seconds_bucket"
    ]
    if not cumulative or not max(count for _, count in cumulative):
        return None
    cumulative.sort()
    return _interpolated(cumulative, 0.5) * 1e3, _interpolated(cumulative, 0.99) * 1e3


def _interpolated(cumulative: list[tuple[float, float]], q: float) -> float:
    total = cumulative[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in cumulative:
        if count >= rank:
            if bound == math.inf:
                return lower_bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / max(
                count - lower_count, 1e-12
            )
        lower_bound, lower_count = bound, count
    return lower_bound


def _bucket_quantile(cumulative: list[tuple[float, float]], q: float) -> float:
    """The upper bound of the histogram bucket holding quantile q."""
    total = cumulative[-1][1]
    return next(bound for bound, count in cumulative if count >= q * total)
