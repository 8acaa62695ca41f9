"""Scale benchmark of the embedded API server: create, list and watch-delivery throughput at
10k nodes + 100k pods, event-loop responsiveness under a 1,000 objects/s create rate, and the
server's peak memory.

The server runs as its own process (`vulcan sim apiserver`) so that the load generator does not
share its CPU core; the load generator is raw aiohttp with pre-encoded orjson bodies (a client
library's models would make the client the bottleneck). Every throughput is printed next to a
baseline measured in the same run with the same client, because absolute times on a noisy
machine lie:

- create and list: a trivial aiohttp server in another process (`--baseline-server`) that decodes
  each POST body with orjson and returns it with 201 (creates alternate between the two servers
  in blocks, so both rates sample the same stretch of time), or returns a pre-built blob of the
  list's size;
- responsiveness: a probe process (`--probe`) that GETs /healthz every 20 ms, first against the
  idle server (the baseline), then during the paced creates, the big lists and the watch fan-out;
- watch fan-out: the same N changes delivered to one watcher (the baseline) and to 20; encoding
  each event once for all watchers keeps the 20-watcher round close to the 1-watcher one.

The load generator is CPU-bound near the baseline server's rate (see the "load generator CPU"
figures), so the create ratios flatter the API server slightly.

Run: `.venv/bin/python -m bench.apiserver_scale [--nodes 10000 --pods 100000 --watchers 20]`, or
`--quick` for a smoke run. Besides the human-readable lines it prints one line per metric:
`BENCH apiserver.<metric> value=<number> unit=<unit> [baseline=<number> ratio=<value/baseline>]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

# Re-exported: other benchmarks import these from here (bench.cache_memory).
from bench.apiserver_common import BenchError as BenchError
from bench.apiserver_common import ServerProcess as ServerProcess
from bench.apiserver_common import read_rss_kib as read_rss_kib
from bench.apiserver_helpers import (
    IDLE_PROBE_SECONDS,
    PROBE_INTERVAL,
    run_baseline_server,
    run_probe,
)
from bench.apiserver_objects import JOB_SIZE as JOB_SIZE
from bench.apiserver_objects import NAMESPACES as NAMESPACES
from bench.apiserver_objects import node_body as node_body
from bench.apiserver_objects import pod_body as pod_body
from bench.apiserver_run import bench


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.apiserver_scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--watch-events", type=int, default=5_000, help="pods patched per round")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument(
        "--paced-seconds", type=float, default=10.0, help="length of the 1,000/s create phase"
    )
    parser.add_argument(
        "--baseline-pods", type=int, default=20_000, help="pod creates sent to the baseline"
    )
    parser.add_argument("--list-runs", type=int, default=2, help="lists timed (best counts)")
    parser.add_argument("--idle-probe-seconds", type=float, default=IDLE_PROBE_SECONDS)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 200 nodes, 2,000 pods, 5 watchers, 500 events",
    )
    # Internal: the helper processes are this module run with these flags.
    parser.add_argument("--baseline-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--probe-max-seconds", type=float, default=900.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.pods, args.watchers, args.watch_events = 200, 2_000, 5, 500
        args.paced_seconds, args.idle_probe_seconds = 1.0, 1.0
    if args.watch_events > args.pods:
        parser.error("--watch-events cannot exceed --pods")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.baseline_server:
        return run_baseline_server()
    if args.probe:
        return run_probe(args.probe, PROBE_INTERVAL, args.probe_max_seconds)
    runner = asyncio.run
    with contextlib.suppress(ImportError):
        # The load generator runs on uvloop (a vulcan dependency) so the client side stays
        # cheap; the servers keep the plain asyncio loop that `vulcan sim apiserver` uses.
        import uvloop

        runner = uvloop.run
    try:
        runner(bench(args))
    except asyncio.CancelledError:
        print("interrupted; the servers were stopped", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
