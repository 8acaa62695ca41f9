"""An extender wired to an embedded API server, served over real HTTP, for tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio.client import Configuration

from core.cache import ClusterCache
from core.kube.client import NODES, PODS, ClientOptions, KubeClient
from extender.binder import Binder, BindHook
from extender.ledger import GangLedger
from extender.metrics import ExtenderMetrics
from extender.server import ExtenderServer, serve
from plugins.framework.config import default_config
from plugins.framework.node_order import Framework
from sim.apiserver.server import EmbeddedApiServer


@dataclass
class Harness:
    apiserver: EmbeddedApiServer
    client: KubeClient
    cache: ClusterCache
    server: ExtenderServer
    url: str
    http: aiohttp.ClientSession

    async def post(
        self, verb: str, body: Any, *, raw: bytes | None = None, timeout: float = 10.0
    ) -> tuple[int, Any]:
        data = raw if raw is not None else orjson.dumps(body)
        async with self.http.post(
            f"{self.url}/v1/{verb}",
            data=data,
            headers={"Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            payload = await response.read()
            return response.status, orjson.loads(payload) if payload else None

    async def add_node(
        self, name: str, cpu: str = "4", memory: str = "8Gi", gpus: int = 0
    ) -> dict[str, Any]:
        allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
        if gpus:
            allocatable["nvidia.com/gpu"] = str(gpus)
        return await self.client.create(
            NODES,
            {
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {
                    "capacity": allocatable,
                    "allocatable": allocatable,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )

    async def add_pod(
        self, name: str, cpu: str = "1", node: str | None = None, namespace: str = "default"
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                }
            ]
        }
        if node:
            spec["nodeName"] = node
        return await self.client.create(
            PODS, {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
        )

    async def settle(self) -> None:
        """Wait until the cache has caught up with everything created so far."""
        import asyncio

        pods = {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"][
                "resourceVersion"
            ]
            for p in (await self.client.list(PODS))["items"]
        }
        nodes = {
            n["metadata"]["name"]: n["metadata"]["resourceVersion"]
            for n in (await self.client.list(NODES))["items"]
        }
        for _ in range(500):
            if {k: r.rv for k, r in self.cache.pods.items()} == pods and {
                k: r.rv for k, r in self.cache.nodes.items()
            } == nodes:
                return
            self.cache.changed.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self.cache.changed.wait(), 0.05)
        raise AssertionError("cache did not catch up")


@asynccontextmanager
async def extender_harness(bind_hook: BindHook | None = None) -> AsyncIterator[Harness]:
    async with EmbeddedApiServer() as apiserver:
        client = KubeClient(Configuration(host=apiserver.url), ClientOptions(qps=0))
        cache = ClusterCache()
        metrics = ExtenderMetrics()
        binder = Binder(client, annotations_for=bind_hook)
        server = ExtenderServer(
            cache,
            Framework(default_config()),
            binder,
            ledger=GangLedger(cache.bump_node),
            metrics=metrics,
        )
        cache.start(client)
        await cache.wait_synced(10)
        runner, port = await serve(server, "127.0.0.1", 0)
        async with aiohttp.ClientSession() as http:
            try:
                yield Harness(apiserver, client, cache, server, f"http://127.0.0.1:{port}", http)
            finally:
                await runner.cleanup()
                await cache.stop()
                await client.close()
