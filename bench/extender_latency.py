"""Extender latency: filter + prioritize as kube-scheduler calls them, next to a floor server.

    .venv/bin/python -m bench.extender_latency [--quick]

The extender runs in a child process, as it is deployed, so this client does not take its CPU.
That process fills an in-process embedded API server directly (no HTTP) with 10,000 EKS-style GPU
nodes (p4d.24xlarge; allocatable memory differs by some KiB from node to node, as kubelets report
it) and 20,000 Volcano job pods bound to them (every 50th node has all 8 GPUs taken, so ~2% of
the candidates fail filter), syncs a ClusterCache from it over HTTP exactly as `vulcan extender`
does (all pods), wires `ExtenderServer` with Volcano's default scheduler
configuration and serves it. The floor is a second child: a bare aiohttp server whose /v1/filter
and /v1/prioritize decode the body with orjson and answer a same-shape echo (every name passes /
scores 0). Both children run on the event loop `vulcan` uses (`vulcan.sim_commands.run_async`:
uvloop when installed) with the same AppRunner settings (no access log).

The client sends what kube-scheduler sends in node-cache mode: the pod as its informer holds it
(no kind/apiVersion, ~3 KB) and N candidate names, a different random sample of the 10,000 per
request, pre-encoded; one keep-alive connection per server and one request at a time (kube-
scheduler calls filter, then prioritize, serially for a pod). Each round times filter and
prioritize back to back, from sending until the whole response body is read; rounds alternate
between the extender and the floor (which goes first alternates too) so both sample the same
stretch of a noisy machine. The client's cyclic GC is off while a phase is timed.

Two request streams are measured at every candidate count, one after the other:
- "same pod": one pod again and again, as for the consecutive pods of a job (same requests).
  Before it, one untimed call with all 10,000 names: the steady state of a long job, where the
  extender has already judged this request shape on every node.
- "new shape": every call a pod whose cpu request no earlier call had (4001m, 4002m, ...), like
  the first pod of each job: nothing remembered per request shape can answer it.
The cluster does not change during a run (no binds), which favours anything cached per node.

Also reported, per phase: the extender's own view (the mean and histogram-estimated p50/p99 of
`vulcan_extender_request_duration_seconds` over the phase, which starts after aiohttp has parsed
the request line and ends before the response is written) and the CPU each server process burnt
per filter+prioritize pair (from /proc; 10 ms ticks, so only meaningful over a whole phase).

Besides the table it prints one line per metric,
`BENCH extender.[new_shape_]<metric> value=<ms> unit=ms baseline=<floor ms> ratio=<value/baseline>`,
and as its last line, for the "same pod" stream,
`filter_prioritize_p99_ms_5k=<X> floor_p99_ms_5k=<Y> ratio=<X/Y>`.
Targets (the issue's): p50 <= 1 ms and p99 <= 5 ms at 500 candidates, p99 <= 12 ms at 5k and a
p99 ratio to the floor <= 3 at 5k, all for filter+prioritize; checked for both streams.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys
import time

import aiohttp
import orjson

from bench.apiserver_common import BenchError, ServerProcess
from bench.extender_client import (
    NEW_SHAPE,
    SAME_POD,
    STREAMS,
    Phase,
    Pods,
    cache_count,
    run_phase,
    scrape,
)
from bench.extender_objects import node_names
from bench.extender_report import bench_lines, label, ratio, report_count, say, target_lines
from bench.extender_servers import self_argv, serve_extender, serve_floor
from bench.extender_settings import (
    COUNTS,
    HEADLINE,
    NODES,
    PODS,
    QUICK_COUNTS,
    QUICK_ROUNDS,
    ROUNDS,
    SEED,
    STARTUP_TIMEOUT,
)
from bench.extender_stats import Stats

# ------------------------------------------------------------------------------------ main


async def bench(args: argparse.Namespace) -> None:
    # SIGINT/SIGTERM cancel the run, so the exit stack stops both children.
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main_task.cancel)
    started = time.perf_counter()
    names = node_names(args.nodes)
    pods = Pods()
    rng = random.Random(SEED + 1)
    phases: dict[tuple[str, int], Phase] = {}
    say(
        f"extender child: {args.nodes} nodes (e.g. {names[0]}), {args.pods} bound pods; "
        f"scheduling pod {len(orjson.dumps(pods.same))} B; candidates "
        f"{', '.join(map(str, args.counts))}; streams: {SAME_POD!r} (a job's consecutive pods, "
        f"one request shape) and {NEW_SHAPE!r} (a request shape never seen before, every call)"
    )
    async with contextlib.AsyncExitStack() as stack:
        extender = ServerProcess(
            "vulcan extender",
            self_argv(
                "--serve-extender",
                "--nodes",
                str(args.nodes),
                "--pods",
                str(args.pods),
                "--counts",  # checked against --nodes by the child's own parse_args
                ",".join(map(str, args.counts)),
            ),
        )
        floor = ServerProcess("floor server", self_argv("--serve-floor"))
        stack.push_async_callback(extender.stop)
        stack.push_async_callback(floor.stop)
        await floor.start()
        await extender.start(STARTUP_TIMEOUT)
        session = await stack.enter_async_context(
            aiohttp.ClientSession(
                # One keep-alive connection per server, one request at a time.
                connector=aiohttp.TCPConnector(limit=2, limit_per_host=1),
                timeout=aiohttp.ClientTimeout(total=60),
            )
        )
        metrics = await scrape(session, extender.url)
        cached = cache_count(metrics, "nodes"), cache_count(metrics, "pods")
        ready_rss = extender.rss_mib()
        say(
            f"extender {extender.url} (pid {extender.pid}) ready after "
            f"{time.perf_counter() - started:.1f} s with {cached[0]} nodes and {cached[1]} pods "
            f"cached, RSS {ready_rss:.0f} MiB; floor {floor.url} (pid {floor.pid})"
        )
        if cached != (args.nodes, args.pods):
            raise BenchError(f"the extender's cache holds {cached}, not {args.nodes, args.pods}")
        for count in args.counts:
            rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS).get(count, 200)
            for stream in STREAMS:
                phases[stream, count] = await run_phase(
                    session, extender, floor, names, pods, stream, count, rounds, rng
                )
            report_count([phases[stream, count] for stream in STREAMS])
        say(
            f"\nextender RSS {extender.rss_mib():.0f} MiB at the end ({ready_rss:.0f} MiB when "
            f"ready, peak {extender.hwm_mib():.0f} MiB)"
        )

    say(f"total time {time.perf_counter() - started:.0f} s")
    say("\ntargets (filter+prioritize, client-measured):")
    for line in target_lines(phases):
        say(line)
    say()
    for line in bench_lines([phases[stream, count] for count in args.counts for stream in STREAMS]):
        say(line)
    headline = phases[SAME_POD, HEADLINE]
    ext, base = Stats.of(headline.extender.both), Stats.of(headline.floor.both)
    say(
        f"filter_prioritize_p99_ms_{label(HEADLINE)}={ext.p99:.3f} "
        f"floor_p99_ms_{label(HEADLINE)}={base.p99:.3f} ratio={ratio(ext.p99, base.p99):.3f}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.extender_latency", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 500 and 5k, few rounds")
    parser.add_argument("--nodes", type=int, default=NODES, help="nodes in the cluster")
    parser.add_argument("--pods", type=int, default=PODS, help="pods bound to them")
    parser.add_argument(
        "--counts",
        help=f"comma-separated candidate counts (must include {HEADLINE}); default "
        f"{','.join(map(str, COUNTS))}",
    )
    parser.add_argument(
        "--rounds", type=int, help="measured rounds per stream at every candidate count"
    )
    # Internal: the child processes are this module run with these flags.
    parser.add_argument("--serve-extender", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.counts:
        try:
            args.counts = sorted({int(c) for c in args.counts.split(",")})
        except ValueError:
            parser.error("--counts takes comma-separated integers")
    else:
        args.counts = list(QUICK_COUNTS if args.quick else COUNTS)
    if HEADLINE not in args.counts:
        parser.error(f"--counts must include {HEADLINE} (the last line reports it)")
    if min(args.counts) < 1 or max(args.counts) > args.nodes:
        parser.error("candidate counts must be between 1 and --nodes")
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    from vulcan.sim_commands import run_async  # uvloop when installed, as `vulcan` runs

    args = parse_args(argv)
    if args.serve_extender:
        with contextlib.suppress(KeyboardInterrupt):
            run_async(serve_extender(args.nodes, args.pods))
        return 0
    if args.serve_floor:
        with contextlib.suppress(KeyboardInterrupt):
            run_async(serve_floor())
        return 0
    try:
        run_async(bench(args))
    except asyncio.CancelledError:
        print("interrupted; the servers were stopped", file=sys.stderr)
        return 130
    except (BenchError, aiohttp.ClientError, TimeoutError) as exc:
        print(f"benchmark failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
