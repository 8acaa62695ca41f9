"""The run of the API-server benchmark (`bench`): the phases in order (creates against the
baseline, paced creates under the probe, lists, watch fan-out, memory), their human-readable
lines, and the Report that collects the `BENCH apiserver.<metric> ...` lines printed last."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import statistics
import time
from collections.abc import Sequence

import aiohttp

from bench.apiserver_common import BenchError, ServerProcess, self_argv, vulcan_argv
from bench.apiserver_helpers import ProbeStats, probing
from bench.apiserver_load import (
    Usage,
    measured,
    new_session,
    send_all,
    send_paced,
    timed_get,
    watch_round,
)
from bench.apiserver_objects import NAMESPACES, namespace_body, node_body, pod_body

PACED_RATE = 1000.0  # objects/s, the create rate the issue asks to sustain without stalling


# ------------------------------------------------------------------------------- reporting


class Report:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(self, name: str, value: float, unit: str, baseline: float | None = None) -> None:
        line = f"BENCH apiserver.{name} value={value:.6g} unit={unit}"
        if baseline is not None:
            ratio = value / baseline if baseline else float("nan")
            line += f" baseline={baseline:.6g} ratio={ratio:.4g}"
        self.lines.append(line)


def say(text: str) -> None:
    print(text, flush=True)


# ------------------------------------------------------------------------------------- run


async def interleaved_creates(
    vulcan: ServerProcess,
    baseline: ServerProcess,
    session: aiohttp.ClientSession,
    posts: Sequence[tuple[str, bytes]],
    baseline_posts: Sequence[tuple[str, bytes]],
    *,
    concurrency: int,
    blocks: int,
) -> tuple[Usage, Usage]:
    """POST `posts` to vulcan and `baseline_posts` to the baseline in `blocks` alternating
    slices, so that both rates sample the same stretch of a noisy machine's time (measured one
    after the other, the baseline alone varied from 3,000 to 7,400 obj/s between runs)."""
    usage, base_usage = Usage(), Usage()
    for block in range(blocks):
        for server, requests, into in (
            (baseline, baseline_posts, base_usage),
            (vulcan, posts, usage),
        ):
            part = requests[block * len(requests) // blocks : (block + 1) * len(requests) // blocks]
            with measured(server, into):
                await send_all(
                    session, server.url, "POST", part, concurrency=concurrency, expect=201
                )
    return usage, base_usage


async def bench(args: argparse.Namespace) -> None:
    # SIGINT/SIGTERM cancel the run, so the `finally` blocks stop every subprocess.
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main_task.cancel)
    report = Report()
    started = time.perf_counter()
    say("building request bodies ...")
    nodes = [node_body(i) for i in range(args.nodes)]
    pods = [pod_body(i) for i in range(args.pods)]
    pod_posts = [(f"/api/v1/namespaces/{ref.namespace}/pods", body) for ref, body in pods]
    node_sizes = [len(body) for _, body in nodes]
    pod_sizes = [len(body) for _, body in pods]
    say(
        f"{args.nodes} nodes (mean body {statistics.mean(node_sizes):.0f} B), "
        f"{args.pods} pods (mean body {statistics.mean(pod_sizes):.0f} B) "
        f"in {len(NAMESPACES)} namespaces; concurrency {args.concurrency}"
    )
    # The paced phase creates the last pods, so the store ends with exactly --pods pods.
    paced_count = min(int(PACED_RATE * args.paced_seconds), args.pods // 2)
    burst_posts, paced_posts = pod_posts[: args.pods - paced_count], pod_posts[-paced_count:]
    baseline_pod_posts = pod_posts[: min(len(pod_posts), args.baseline_pods)]

    async with contextlib.AsyncExitStack() as stack:
        vulcan = ServerProcess("vulcan sim apiserver", vulcan_argv())
        baseline = ServerProcess("baseline server", self_argv("--baseline-server"))
        stack.push_async_callback(vulcan.stop)
        stack.push_async_callback(baseline.stop)
        await asyncio.gather(vulcan.start(), baseline.start())
        say(f"vulcan API server {vulcan.url} (pid {vulcan.pid}); baseline {baseline.url}")
        session = await stack.enter_async_context(new_session(args.concurrency))
        rss_start = vulcan.rss_mib()

        # ---- create throughput
        await send_all(
            session,
            vulcan.url,
            "POST",
            [namespace_body(ns) for ns in NAMESPACES],
            concurrency=1,
            expect=201,
        )
        # Untimed warm-up: open the keep-alive connections to both servers and run the
        # baseline's handler a while, so the first timed phase does not pay for either (it
        # made the first baseline rate ~40% low in a trial run).
        probes = [("/healthz", b"")] * (4 * args.concurrency)
        for server in (vulcan, baseline):
            await send_all(
                session, server.url, "GET", probes, concurrency=args.concurrency, expect=200
            )
        await send_all(
            session,
            baseline.url,
            "POST",
            baseline_pod_posts[:2000],
            concurrency=args.concurrency,
            expect=201,
        )
        usage, base_usage = await interleaved_creates(
            vulcan, baseline, session, nodes, nodes, concurrency=args.concurrency, blocks=5
        )
        rate, base_rate = len(nodes) / usage.wall, len(nodes) / base_usage.wall
        say(
            f"create nodes: {len(nodes)} in {usage.wall:.2f} s = {rate:.0f} obj/s ({usage}); "
            f"baseline {base_rate:.0f} obj/s ({base_usage}); ratio {rate / base_rate:.2f}"
        )
        report.metric("create_nodes", rate, "obj/s", base_rate)

        usage, base_usage = await interleaved_creates(
            vulcan,
            baseline,
            session,
            burst_posts,
            baseline_pod_posts,
            concurrency=args.concurrency,
            blocks=10,
        )
        rate = len(burst_posts) / usage.wall
        base_rate = len(baseline_pod_posts) / base_usage.wall
        say(
            f"create pods: {len(burst_posts)} in {usage.wall:.2f} s = {rate:.0f} obj/s "
            f"({usage}); baseline {base_rate:.0f} obj/s over {len(baseline_pod_posts)} "
            f"({base_usage}); ratio {rate / base_rate:.2f}"
        )
        report.metric("create_pods", rate, "obj/s", base_rate)

        # ---- responsiveness: idle, then under a paced 1,000 creates/s
        async with probing(vulcan.url) as idle_samples:
            await asyncio.sleep(args.idle_probe_seconds)
        idle = ProbeStats.of(idle_samples)
        say(f"probe /healthz, idle server: {idle}")
        async with probing(vulcan.url) as paced_samples:
            usage = Usage()
            with measured(vulcan, usage):
                paced = await send_paced(
                    session,
                    vulcan.url,
                    paced_posts,
                    rate=PACED_RATE,
                    concurrency=args.concurrency,
                )
        loaded = ProbeStats.of(paced_samples)
        say(
            f"paced creates: {len(paced_posts)} pods at {paced.achieved_rate:.0f} obj/s "
            f"(target {PACED_RATE:.0f}; worst send lag {paced.max_lag_ms:.1f} ms; {usage})"
        )
        say(f"probe /healthz during paced creates: {loaded}")
        report.metric("paced_create_rate", paced.achieved_rate, "obj/s", PACED_RATE)
        report.metric("probe_p50_paced_create", loaded.p50, "ms", idle.p50)
        report.metric("probe_p99_paced_create", loaded.p99, "ms", idle.p99)
        report.metric("probe_max_paced_create", loaded.max, "ms", idle.max)

        rss_loaded = vulcan.rss_mib()
        per_object = (rss_loaded - rss_start) * 1024 * 1024 / (args.nodes + args.pods)
        say(
            f"server RSS: {rss_start:.0f} MiB at start, {rss_loaded:.0f} MiB with "
            f"{args.nodes} nodes + {args.pods} pods (~{per_object / 1024:.1f} KiB per object)"
        )
        report.metric("rss_loaded", rss_loaded, "MiB")

        # ---- lists (best of --list-runs; the probe shows how long the event loop stalls)
        async with probing(vulcan.url) as list_samples:
            for resource in ("pods", "nodes"):
                best = float("inf")
                size = 0
                for _ in range(args.list_runs):
                    body, seconds = await timed_get(session, f"{vulcan.url}/api/v1/{resource}")
                    best, size = min(best, seconds), len(body)
                    kind = b'"kind":"Pod"' if resource == "pods" else b'"kind":"Node"'
                    items = body.count(kind)
                    del body
                    wanted = args.pods if resource == "pods" else args.nodes
                    if items != wanted:
                        raise BenchError(f"list of {resource}: {items} items, want {wanted}")
                async with session.put(f"{baseline.url}/_bench/blob?size={size}") as r:
                    await r.read()
                base_best = float("inf")
                for _ in range(args.list_runs):
                    body, seconds = await timed_get(session, f"{baseline.url}/_bench/blob")
                    base_best = min(base_best, seconds)
                    del body
                mb = size / 1e6
                say(
                    f"list {resource}: {mb:.1f} MB in {best:.3f} s = {mb / best:.0f} MB/s; "
                    f"baseline (same bytes, pre-built) {base_best:.3f} s = "
                    f"{mb / base_best:.0f} MB/s; ratio {base_best / best:.2f}"
                )
                report.metric(f"list_{resource}", mb / best, "MB/s", mb / base_best)
                report.metric(f"list_{resource}_seconds", best, "s", base_best)
        during_list = ProbeStats.of(list_samples)
        say(f"probe /healthz during the lists: {during_list}")
        report.metric("probe_max_list", during_list.max, "ms", idle.max)
        say(
            f"server RSS after the lists: {vulcan.rss_mib():.0f} MiB (peak so far "
            f"{vulcan.hwm_mib():.0f} MiB)"
        )

        # ---- watch delivery: one watcher (baseline), then the fan-out
        targets = [ref for ref, _ in pods[: args.watch_events]]
        async with probing(vulcan.url) as single_samples:
            single = await watch_round(
                vulcan,
                session,
                targets,
                watchers=1,
                label_value="single",
                concurrency=args.concurrency,
            )
        during_single = ProbeStats.of(single_samples)
        say(
            f"watch, 1 watcher: {single.events} events in {single.seconds:.2f} s = "
            f"{single.per_watcher_rate:.0f} events/s (patches done after "
            f"{single.patch_seconds:.2f} s; {single.usage})"
        )
        async with probing(vulcan.url) as fan_samples:
            fan = await watch_round(
                vulcan,
                session,
                targets,
                watchers=args.watchers,
                label_value="fanout",
                concurrency=args.concurrency,
            )
        during_fan = ProbeStats.of(fan_samples)
        say(
            f"watch, {fan.watchers} watchers: {fan.events} events each in {fan.seconds:.2f} s "
            f"= {fan.per_watcher_rate:.0f} events/s per watcher, {fan.total_rate:.0f} "
            f"events/s in all (patches done after {fan.patch_seconds:.2f} s; {fan.usage})"
        )
        say(
            f"fan-out cost: {fan.seconds / single.seconds:.2f}x the single-watcher time for "
            f"{fan.watchers}x the deliveries"
        )
        # Both rounds keep the server saturated with `concurrency` PATCHes in flight, so the
        # probe waits behind them in either; the single-watcher round is the fair baseline.
        say(f"probe /healthz during the 1-watcher round: {during_single}")
        say(f"probe /healthz during the {fan.watchers}-watcher round: {during_fan}")
        report.metric("watch_per_watcher", fan.per_watcher_rate, "events/s", single.total_rate)
        report.metric("watch_total", fan.total_rate, "events/s", single.total_rate)
        report.metric("probe_p99_watch", during_fan.p99, "ms", during_single.p99)
        report.metric("probe_max_watch", during_fan.max, "ms", during_single.max)

        # ---- memory
        peak = max(vulcan.hwm_mib(), vulcan.peak_rss_kib / 1024)
        say(
            f"server peak RSS {peak:.0f} MiB (VmHWM; highest sampled VmRSS "
            f"{vulcan.peak_rss_kib / 1024:.0f} MiB), now {vulcan.rss_mib():.0f} MiB"
        )
        report.metric("peak_rss", peak, "MiB")

    say(f"total time {time.perf_counter() - started:.0f} s")
    say("")
    for line in report.lines:
        say(line)
