"""`vulcan demo extender` (split from `vulcan.demo`, which heads the demos): the older walkthrough
that calls the extender's HTTP verbs (filter, prioritize, bind) by hand on an embedded API
server, the way kube-scheduler calls them. Separate because it shares nothing with the gang demo
but the command.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import orjson

# ------------------------------------------------------------------ the extender walkthrough


async def _walkthrough() -> None:
    from kubernetes_asyncio.client import Configuration

    from core.cache import ClusterCache
    from core.kube.client import NODES as NODE_RESOURCE
    from core.kube.client import PODS, ClientOptions, KubeClient
    from core.manifests import load_all
    from extender.binder import Binder
    from extender.server import ExtenderServer, serve
    from plugins.framework.config import default_config
    from plugins.framework.node_order import Framework
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
                NODE_RESOURCE,
                {
                    "metadata": {"name": name},
                    "status": {
                        "capacity": resources,
                        "allocatable": resources,
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                },
            )
        examples = Path(__file__).resolve().parents[1] / "examples"
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
                # kube-scheduler asks the extender about the nodes its own filters passed
                # (NodeResourcesFit: room for the request); none: it reports the pod
                # unschedulable without asking.
                candidates = [n for n in ("node-0", "node-1", "node-2") if _room(cache, n, cpu)]
                if not candidates:
                    print(f"{name} (cpu {cpu}): no node has room (kube-scheduler's own filters)")
                    print("  -> unschedulable, as kube-scheduler would report it\n")
                    continue
                args = {"Pod": pod, "Nodes": None, "NodeNames": candidates}
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
                # Scores are relative to the lowest (nodes at it are left out, as
                # kube-scheduler adds nothing for them); none at all: no preference.
                passed = filtered["NodeNames"]
                best = max(scores, key=lambda s: s["Score"])["Host"] if scores else passed[0]
                shown = [(s["Host"], s["Score"]) for s in scores] or "no preference"
                print(f"  prioritize {shown} -> {best}")
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
                await asyncio.wait_for(process.wait(), 60)
                print()
        await runner.cleanup()
        await cache.stop()
        await client.close()
    shutil.rmtree(workdir, ignore_errors=True)


def _room(cache: Any, node: str, cpu: str) -> bool:
    """Whether `node` has `cpu` cores free in the cache: what NodeResourcesFit checks."""
    from core.resources import ResourceVector

    used = cache.node_requested.get(node, ResourceVector())
    return bool(cache.nodes[node].allocatable.cpu - used.cpu >= int(cpu) * 1000)


def _resource_for(doc: dict[str, Any]) -> Any:
    from core.kube.client import QUEUES, VCJOBS

    return {"Queue": QUEUES, "Job": VCJOBS}[doc["kind"]]


async def _post(http: aiohttp.ClientSession, url: str, body: Any) -> Any:
    async with http.post(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    ) as response:
        return orjson.loads(await response.read())


async def _until_cached(cache: Any, key: str, timeout: float = 10.0) -> None:
    await _until(cache, lambda: key in cache.pods, timeout)


async def _until_bound(cache: Any, key: str, timeout: float = 10.0) -> None:
    await _until(cache, lambda: cache.pods.get(key) is not None and cache.pods[key].node, timeout)


async def _until(cache: Any, done: Any, timeout: float) -> None:
    """Wait on the cache's change signal until `done()`, with one overall deadline."""
    async with asyncio.timeout(timeout):
        while not done():
            cache.changed.clear()
            await cache.changed.wait()


def run_extender_walkthrough() -> int:
    from vulcan.sim_commands import run_async

    run_async(_walkthrough())
    return 0
