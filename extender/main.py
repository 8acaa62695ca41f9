"""Wiring of the extender process: client, cache, plugin framework, binder, HTTP server."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from dataclasses import dataclass

from core.cache import ClusterCache
from core.kube.client import KubeClient
from core.kube.flags import options_from_args
from extender.binder import Binder
from extender.ledger import GangLedger
from extender.metrics import ExtenderMetrics
from extender.server import ExtenderServer, serve
from plugins.config import load_scheduler_config
from plugins.framework import Framework

log = logging.getLogger("vulcan.extender")

# kube-scheduler's own pod informer leaves finished pods out; they hold no resources.
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(slots=True)
class Extender:
    client: KubeClient
    cache: ClusterCache
    server: ExtenderServer

    @classmethod
    async def build(cls, args: argparse.Namespace) -> Extender:
        config = load_scheduler_config(args.config)
        client = await KubeClient.connect(options_from_args(args))
        cache = ClusterCache()
        metrics = ExtenderMetrics()
        binder = Binder(client, on_result=lambda result: metrics.binds.labels(result).inc())
        server = ExtenderServer(
            cache, Framework(config), binder, ledger=GangLedger(cache.bump_node), metrics=metrics
        )
        return cls(client, cache, server)


async def run(args: argparse.Namespace) -> None:
    extender = await Extender.build(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    extender.cache.start(extender.client, pod_field_selector=ACTIVE_PODS)
    runner, port = await serve(extender.server, args.bind_address, args.port)
    print(f"vulcan extender listening on http://{args.bind_address}:{port}/v1", flush=True)
    try:
        await stop.wait()
    finally:
        # Drain in-flight requests (binds) before going away.
        await runner.cleanup()
        await extender.cache.stop()
        await extender.client.close()
