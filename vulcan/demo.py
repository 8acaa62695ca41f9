"""`vulcan demo`: the embedded cluster today — API server, cache and extender — driven the way
kube-scheduler drives it. (The full demo with the kube-scheduler stand-in, hollow kubelets and
gang scheduling arrives with the embedded-cluster and gang issues.)"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import orjson


async def _demo() -> None:
    from kubernetes_asyncio.client import Configuration

    from core.cache import ClusterCache
    from core.kube.client import NODES, PODS, ClientOptions, KubeClient
    from core.manifests import load_all
    from extender.binder import Binder
    from extender.server import ExtenderServer, serve
    from plugins.config import default_config
    from plugins.framework import Framework
    from sim.apiserver.server import EmbeddedApiServer

    workdir = Path(tempfile.mkdtemp(prefix="vulcan-demo-"))
    kubeconfig = workdir / "kubeconfig"
    async with EmbeddedApiServer(kubeconfig_out=kubeconfig) as apiserver:
        print(f"embedded API server: {apiserver.url}  (kubeconfig: {kubeconfig})")
        client = KubeClient(Configuration(host=apiserver.url), ClientOptions(qps=0))
        for index, cpu in enumerate(("4", "8", "2")):
            name = f"node-{index}"
            resources = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
            await client.create(
                NODES,
                {
                    "metadata": {"name": name},
                    "status": {
                        "capacity": resources,
                        "allocatable": resources,
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                },
            )
        examples = Path(__file__).resolve().parents[1] / "manifests" / "examples"
        for doc in load_all((examples / "gang-job.yaml").read_text()):
            resource = _resource_for(doc)
            await client.create(resource, doc, doc["metadata"].get("namespace"))
        cache = ClusterCache()
        cache.start(client)
        await cache.wait_synced(30)
        server = ExtenderServer(cache, Framework(default_config()), Binder(client))
        runner, port = await serve(server, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{port}/v1"
        print(f"vulcan extender: {url}\n")
        async with aiohttp.ClientSession() as http:
            for name, cpu in (("web-1", "3"), ("web-2", "3"), ("batch-1", "6"), ("huge", "32")):
                pod = await client.create(
                    PODS,
                    {
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": cpu}},
                                }
                            ]
                        },
                    },
                )
                await _until_cached(cache, f"default/{name}")
                args = {"Pod": pod, "Nodes": None, "NodeNames": ["node-0", "node-1", "node-2"]}
                filtered = await _post(http, f"{url}/filter", args)
                print(
                    f"{name} (cpu {cpu}): filter passed {filtered['NodeNames']}, "
                    f"failed {filtered['FailedNodes']}"
                )
                if not filtered["NodeNames"]:
                    print("  -> unschedulable, as kube-scheduler would report it\n")
                    continue
                scores = await _post(
                    http, f"{url}/prioritize", {**args, "NodeNames": filtered["NodeNames"]}
                )
                best = max(scores, key=lambda s: s["Score"])["Host"]
                print(f"  prioritize {[(s['Host'], s['Score']) for s in scores]} -> {best}")
                answer = await _post(
                    http,
                    f"{url}/bind",
                    {
                        "PodName": name,
                        "PodNamespace": "default",
                        "PodUID": pod["metadata"]["uid"],
                        "Node": best,
                    },
                )
                print(f"  bind -> {answer or 'ok'}\n")
                await _until_bound(cache, f"default/{name}")
        if shutil.which("kubectl"):
            for args in (["get", "nodes"], ["get", "pods", "-o", "wide"], ["get", "vcjob,queue"]):
                print(f"$ kubectl {' '.join(args)}")
                process = await asyncio.create_subprocess_exec(
                    "kubectl", "--kubeconfig", str(kubeconfig), *args
                )
                await process.wait()
                print()
        await runner.cleanup()
        await cache.stop()
        await client.close()


def _resource_for(doc: dict[str, Any]) -> Any:
    from core.kube.client import QUEUES, VCJOBS

    return {"Queue": QUEUES, "Job": VCJOBS}[doc["kind"]]


async def _post(http: aiohttp.ClientSession, url: str, body: Any) -> Any:
    async with http.post(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    ) as response:
        return orjson.loads(await response.read())


async def _until_cached(cache: Any, key: str) -> None:
    while key not in cache.pods:
        cache.changed.clear()
        await asyncio.wait_for(cache.changed.wait(), 10)


async def _until_bound(cache: Any, key: str) -> None:
    while cache.pods.get(key) is None or cache.pods[key].node is None:
        cache.changed.clear()
        await asyncio.wait_for(cache.changed.wait(), 10)


def run() -> int:
    from vulcan.sim_commands import run_async

    run_async(_demo())
    return 0
