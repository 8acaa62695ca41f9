"""The child processes of the extender-latency benchmark, run as `python -m
bench.extender_latency` with an internal flag: the extender (`--serve-extender`: embedded API
server + ClusterCache + ExtenderServer, wired as `vulcan extender`) and the floor server
(`--serve-floor`)."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
from collections.abc import Sequence
from typing import Any

import orjson
from aiohttp import web

from bench.apiserver_objects import NAMESPACES, pod_body
from bench.extender_objects import node_names, node_object, placements
from bench.extender_settings import CLIENT_MAX_SIZE, JSON, STARTUP_TIMEOUT

# ------------------------------------------------------------------------ child processes


def self_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.extender_latency", *args]


async def until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def fill(store: Any, names: Sequence[str], pods: int) -> None:
    """Create the nodes and bound pods straight in the store (no HTTP, no client)."""
    registry = store.registry
    ns_type, node_type, pod_type = (
        registry.get("", "v1", plural) for plural in ("namespaces", "nodes", "pods")
    )
    assert ns_type and node_type and pod_type
    for namespace in NAMESPACES:
        if store.find(ns_type, "", namespace) is None:
            store.create(ns_type, "", {"metadata": {"name": namespace}})
    for index, name in enumerate(names):
        store.create(node_type, "", node_object(index, name))
    for index, node in enumerate(placements(names, pods)):
        pod = orjson.loads(pod_body(index)[1])
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "qosClass": "Guaranteed"}
        store.create(pod_type, pod["metadata"]["namespace"], pod)


async def serve_extender(nodes: int, pods: int) -> None:
    """Child: embedded API server + ClusterCache + ExtenderServer, wired as `vulcan extender`."""
    from kubernetes_asyncio.client import Configuration

    from core.cache import ClusterCache
    from core.kube.client import ClientOptions, KubeClient
    from extender.binder import Binder
    from extender.ledger import GangLedger
    from extender.metrics import ExtenderMetrics
    from extender.server import ExtenderServer, serve
    from plugins.framework.config import default_config
    from plugins.framework.node_order import Framework
    from sim.apiserver.server import EmbeddedApiServer

    apiserver = EmbeddedApiServer(watch_history=1_000)
    fill(apiserver.store, node_names(nodes), pods)
    async with apiserver:
        client = KubeClient(Configuration(host=apiserver.url), ClientOptions(qps=0))
        cache = ClusterCache()
        try:
            metrics = ExtenderMetrics()
            binder = Binder(client)  # the server counts binds by result itself
            server = ExtenderServer(
                cache, Framework(default_config()), binder, ledger=GangLedger(), metrics=metrics
            )
            cache.start(client)
            await cache.wait_synced(STARTUP_TIMEOUT)
            runner, port = await serve(server, "127.0.0.1", 0)
            try:
                print(f"vulcan extender listening on http://127.0.0.1:{port}", flush=True)
                await until_signalled()
            finally:
                await runner.cleanup()
        finally:
            await cache.stop()
            await client.close()


async def serve_floor() -> None:
    """Child: what aiohttp + orjson cost for these payloads with no extender logic at all."""

    async def filter_(request: web.Request) -> web.Response:
        args = orjson.loads(await request.read())
        answer = {
            "NodeNames": args["NodeNames"],
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        return web.Response(body=orjson.dumps(answer), content_type=JSON)

    async def prioritize(request: web.Request) -> web.Response:
        args = orjson.loads(await request.read())
        answer = [{"Host": name, "Score": 0} for name in args["NodeNames"]]
        return web.Response(body=orjson.dumps(answer), content_type=JSON)

    app = web.Application(client_max_size=CLIENT_MAX_SIZE)
    app.router.add_post("/v1/filter", filter_)
    app.router.add_post("/v1/prioritize", prioritize)
    # The extender's runner settings (extender/server.py serve()).
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        handler_cancellation=True,
        shutdown_timeout=5.0,
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, reuse_address=True, backlog=1024)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    # As the extender does once its cache has synced (ClusterCache): keep the cyclic GC off the
    # long-lived startup objects, so neither server pays full collections over them.
    gc.collect()
    gc.freeze()
    try:
        print(f"floor server listening on http://127.0.0.1:{port}", flush=True)
        await until_signalled()
    finally:
        await runner.cleanup()
