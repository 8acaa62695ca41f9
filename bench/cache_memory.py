"""How much memory and time the cluster cache needs for a big cluster, and how long a full GC
pause is once it is loaded.

    python -m bench.cache_memory --nodes 10000 --pods 100000

An embedded API server in a child process is filled directly (no HTTP) with realistic nodes and
Volcano job pods. This process then starts the ClusterCache (informers over HTTP, paginated lists,
slim records), waits for sync, and measures its own RSS, the sync time and a full `gc.collect()`.
Baseline, measured in the same run in a fresh child process: the same objects listed and kept as
plain orjson dicts (what a cache without slim records holds), with its RSS and full GC pause.
The last line is `rss_mib=<N> sync_s=<S> gc_pause_ms=<P>`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import subprocess
import sys
import time
from typing import Any

import orjson

from bench.apiserver_scale import NAMESPACES, node_body, pod_body, read_rss_kib


def rss_mib(pid: int | None = None) -> float:
    return read_rss_kib(pid or os.getpid()) / 1024


# ------------------------------------------------------------------ the populated server


async def serve_populated(nodes: int, pods: int) -> None:
    from sim.apiserver.server import EmbeddedApiServer

    server = EmbeddedApiServer(watch_history=1000)
    store = server.store
    registry = store.registry
    ns_type, node_type, pod_type = (
        registry.get("", "v1", p) for p in ("namespaces", "nodes", "pods")
    )
    assert ns_type and node_type and pod_type
    for name in NAMESPACES:
        if store.find(ns_type, "", name) is None:
            store.create(ns_type, "", {"metadata": {"name": name}})
    for index in range(nodes):
        store.create(node_type, "", orjson.loads(node_body(index)[1]))
    for index in range(pods):
        ref, body = pod_body(index)
        obj = orjson.loads(body)
        # Spread the pods over the nodes, as a scheduled cluster has them.
        obj["spec"]["nodeName"] = f"node-{index % max(nodes, 1):05d}"
        store.create(pod_type, ref.namespace, obj)
    async with server:
        print(server.url, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()


def start_server(nodes: int, pods: int) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.cache_memory",
            "--serve",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError("the populated API server did not start")
    return process, url


# ---------------------------------------------------------------------------- measuring


def full_gc_pause_ms(rounds: int = 3) -> float:
    worst = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        gc.collect()
        worst = max(worst, (time.perf_counter() - start) * 1000)
    return worst


async def measure_cache(url: str) -> tuple[float, float, float, int, int]:
    from kubernetes_asyncio.client import Configuration

    from core.cache import ClusterCache
    from core.kube.client import ClientOptions, KubeClient

    client = KubeClient(Configuration(host=url), ClientOptions(qps=0))
    cache = ClusterCache()
    start = time.perf_counter()
    cache.start(client)
    await cache.wait_synced(timeout=600)
    sync_s = time.perf_counter() - start
    pause = full_gc_pause_ms()
    rss = rss_mib()
    counts = (len(cache.nodes), len(cache.pods))
    await cache.stop()
    await client.close()
    return rss, sync_s, pause, *counts


async def baseline_dicts(url: str) -> None:
    """Child process: keep the listed objects as plain dicts; print `rss pause`."""
    import aiohttp

    kept: list[Any] = []
    async with aiohttp.ClientSession() as session:
        for path in ("/api/v1/nodes", "/api/v1/pods"):
            async with session.get(url + path) as response:
                kept.append(orjson.loads(await response.read())["items"])
    print(f"{rss_mib():.1f} {full_gc_pause_ms():.2f}", flush=True)


def run_baseline(url: str) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.cache_memory", "--baseline", url],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    rss, pause = out.stdout.split()
    return float(rss), float(pause)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve_populated(args.nodes, args.pods))
        return 0
    if args.baseline:
        asyncio.run(baseline_dicts(args.baseline))
        return 0
    print(
        f"filling an embedded API server with {args.nodes} nodes and {args.pods} pods ...",
        flush=True,
    )
    server, url = start_server(args.nodes, args.pods)
    try:
        base_rss = rss_mib()
        rss, sync_s, pause, n_nodes, n_pods = asyncio.run(measure_cache(url))
        print(
            f"cache: {n_nodes} nodes, {n_pods} pods synced in {sync_s:.1f} s; RSS {rss:.0f} "
            f"MiB (process before start {base_rss:.0f} MiB); full GC pause {pause:.2f} ms"
        )
        dict_rss, dict_pause = run_baseline(url)
        print(
            f"baseline (same objects kept as orjson dicts): RSS {dict_rss:.0f} MiB, full GC "
            f"pause {dict_pause:.2f} ms"
        )
        print(
            f"BENCH cache.rss value={rss:.1f} unit=MiB baseline={dict_rss:.1f} "
            f"ratio={rss / dict_rss:.3f}"
        )
        print(
            f"BENCH cache.gc_pause value={pause:.2f} unit=ms baseline={dict_pause:.2f} "
            f"ratio={pause / dict_pause if dict_pause else 0:.3f}"
        )
        print(f"rss_mib={rss:.0f} sync_s={sync_s:.1f} gc_pause_ms={pause:.1f}")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
