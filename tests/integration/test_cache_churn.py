"""The cluster cache, fed by informers from the embedded API server, equals a fresh list after a
randomized churn — including deletes it only learns about by relisting after a 410 and after an
API server restart — and its accounting equals a recomputation from scratch."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from kubernetes_asyncio.client import Configuration

from core.cache import ClusterCache
from core.kube.client import (
    NAMESPACES as NAMESPACE_RESOURCE,
)
from core.kube.client import (
    NODES,
    PODGROUPS,
    PODS,
    QUEUES,
    ApiError,
    ClientOptions,
    KubeClient,
)
from core.records import NodeRecord, PodGroupRecord, PodRecord
from core.resources import ResourceVector
from sim.apiserver.server import EmbeddedApiServer
from sim.apiserver.store import Store

NAMESPACES = ("default", "team-a")


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[tuple[EmbeddedApiServer, KubeClient, ClusterCache]]:
    async with EmbeddedApiServer(watch_history=200) as server:
        # No client-side rate limit: the churn should be as fast as the server allows.
        client = KubeClient(Configuration(host=server.url), ClientOptions(qps=0))
        cache = ClusterCache()
        try:
            yield server, client, cache
        finally:
            await cache.stop()
            await client.close()


def node(name: str, cpu: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": str(cpu), "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str, namespace: str, cpu_m: int, node_name: str | None, group: str | None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "i",
                "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{cpu_m}Mi"}},
            }
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec}


class Churn:
    """Random creates/updates/deletes of nodes, pods and PodGroups through the real API."""

    def __init__(self, client: KubeClient, seed: int) -> None:
        self.client = client
        self.rng = random.Random(seed)
        self.nodes: set[str] = set()
        self.pods: set[tuple[str, str]] = set()
        self.groups: set[tuple[str, str]] = set()
        self.counter = 0

    def _name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    async def step(self) -> None:
        rng, c = self.rng, self.client
        roll = rng.random()
        try:
            if roll < 0.08 or not self.nodes:
                name = self._name("n")
                await c.create(NODES, node(name, rng.choice((8, 16, 32))))
                self.nodes.add(name)
            elif roll < 0.10:
                name = rng.choice(sorted(self.nodes))
                await c.delete(NODES, name)
                self.nodes.discard(name)
            elif roll < 0.14:
                namespace = rng.choice(NAMESPACES)
                name = self._name("g")
                await c.create(
                    PODGROUPS,
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": namespace},
                        "spec": {"minMember": 2, "queue": rng.choice(("default", "q1", "q2"))},
                    },
                )
                self.groups.add((namespace, name))
            elif roll < 0.17 and self.groups:
                namespace, name = rng.choice(sorted(self.groups))
                await c.patch(
                    PODGROUPS, name, {"spec": {"queue": rng.choice(("q1", "q2"))}}, namespace
                )
            elif roll < 0.19 and self.groups:
                namespace, name = rng.choice(sorted(self.groups))
                await c.delete(PODGROUPS, name, namespace)
                self.groups.discard((namespace, name))
            elif roll < 0.55:
                namespace = rng.choice(NAMESPACES)
                name = self._name("p")
                bound = rng.choice(sorted(self.nodes)) if rng.random() < 0.6 else None
                groups = [g for ns, g in self.groups if ns == namespace]
                group = rng.choice(groups) if groups and rng.random() < 0.7 else None
                await c.create(PODS, pod(name, namespace, rng.randint(1, 4) * 250, bound, group))
                self.pods.add((namespace, name))
            elif roll < 0.80 and self.pods:
                namespace, name = rng.choice(sorted(self.pods))
                current = await c.get(PODS, name, namespace)
                if not current["spec"].get("nodeName") and self.nodes and rng.random() < 0.5:
                    await c.bind_pod(namespace, name, rng.choice(sorted(self.nodes)))
                else:
                    phase = rng.choice(("Running", "Succeeded", "Failed", "Pending"))
                    await c.patch(
                        PODS, name, {"status": {"phase": phase}}, namespace, subresource="status"
                    )
            elif self.pods:
                namespace, name = rng.choice(sorted(self.pods))
                await c.delete(PODS, name, namespace, grace_period=0)
                self.pods.discard((namespace, name))
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise

    async def run(self, steps: int, concurrency: int = 8) -> None:
        # Steps run in small concurrent batches: interleavings like a busy cluster's.
        for _ in range(steps // concurrency):
            await asyncio.gather(*(self.step() for _ in range(concurrency)))


def delete_some_directly(store: Store, fraction: float, seed: int) -> None:
    """Deletes made while the API server is down (another replica, same etcd)."""
    rng = random.Random(seed)
    pods = store.registry.get("", "v1", "pods")
    assert pods is not None
    for key in list(store.collection(pods).objects):
        if rng.random() < fraction:
            store.delete(pods, key[0], key[1], grace_period=0)


async def converged(client: KubeClient, cache: ClusterCache, timeout: float = 30.0) -> None:
    """Wait (on cache change events) until the cache equals a fresh list of every kind."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        fresh = {
            "nodes": {
                n["metadata"]["name"]: n["metadata"]["resourceVersion"]
                for n in (await client.list(NODES))["items"]
            },
            "pods": {
                f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"][
                    "resourceVersion"
                ]
                for p in (await client.list(PODS))["items"]
            },
            "podgroups": {
                f"{g['metadata']['namespace']}/{g['metadata']['name']}": g["metadata"][
                    "resourceVersion"
                ]
                for g in (await client.list(PODGROUPS))["items"]
            },
        }
        mine = {
            "nodes": {k: r.rv for k, r in cache.nodes.items()},
            "pods": {k: r.rv for k, r in cache.pods.items()},
            "podgroups": {k: r.rv for k, r in cache.podgroups.items()},
        }
        if mine == fresh:
            return
        remaining = deadline - loop.time()
        assert remaining > 0, "cache did not converge to the API server's state"
        cache.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(cache.changed.wait(), min(remaining, 1.0))


async def assert_accounting_exact(client: KubeClient, cache: ClusterCache) -> None:
    nodes, queues = cache.recompute()
    assert cache.node_requested == nodes
    assert cache.queue_allocated == queues
    # ...and equal to what a fresh list implies, computed independently of the cache.
    groups = {
        f"{g['metadata']['namespace']}/{g['metadata']['name']}": PodGroupRecord(g)
        for g in (await client.list(PODGROUPS))["items"]
    }
    namespace_queues = {
        n["metadata"]["name"]: q
        for n in (await client.list(NAMESPACE_RESOURCE))["items"]
        if (q := (n["metadata"].get("annotations") or {}).get("scheduling.volcano.sh/queue-name"))
    }
    expected_nodes: dict[str, ResourceVector] = {}
    expected_queues: dict[str, ResourceVector] = {}
    for raw in (await client.list(PODS))["items"]:
        record = PodRecord(raw)
        if record.node is None or record.phase in ("Succeeded", "Failed"):
            continue
        expected_nodes[record.node] = (
            expected_nodes.get(record.node, ResourceVector()) + record.requests
        )
        # A group's pods count against the group's queue; a pod outside any group against
        # its own queue annotation, else its namespace's, else `default`.
        if record.group is None:
            queue: str | None = (
                record.queue_annotation or namespace_queues.get(record.namespace) or "default"
            )
        else:
            group = groups.get(record.group)
            queue = group.queue if group is not None else None
        if queue is not None:
            expected_queues[queue] = expected_queues.get(queue, ResourceVector()) + record.requests
    assert cache.node_requested == expected_nodes
    assert cache.queue_allocated == expected_queues
    for name, record in cache.nodes.items():
        assert isinstance(record, NodeRecord)
        assert cache.node_free(name) == record.allocatable - expected_nodes.get(
            name, ResourceVector()
        )


async def test_cache_survives_churn_relists_and_restart(
    cluster: tuple[EmbeddedApiServer, KubeClient, ClusterCache],
) -> None:
    server, client, cache = cluster
    await client.create(NAMESPACE_RESOURCE, {"metadata": {"name": "team-a"}})
    for name in ("q1", "q2"):
        await client.create(
            QUEUES,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1},
            },
        )
    churn = Churn(client, seed=7)
    await churn.run(800)  # state that exists before the cache starts
    cache.start(client)
    await cache.wait_synced(timeout=30)
    await churn.run(4000)
    await converged(client, cache)
    await assert_accounting_exact(client, cache)

    # The pod informer is away while far more changes happen than the watch history keeps:
    # it resumes from its old resourceVersion, gets 410 Expired and relists.
    pod_informer = next(i for i in cache.informers if i.resource is PODS)
    pod_task = next(t for t in cache._tasks if t.get_name() == "informer-pods")
    pod_task.cancel()
    await asyncio.gather(pod_task, return_exceptions=True)
    relists = pod_informer.relists
    await churn.run(2400)
    cache._tasks.append(asyncio.create_task(pod_informer.run(), name="informer-pods"))
    await converged(client, cache)
    assert pod_informer.relists == relists + 1
    await assert_accounting_exact(client, cache)

    # The API server restarts, and pods are deleted while it is down.
    await server.restart(while_down=lambda store: delete_some_directly(store, 0.3, seed=3))
    await churn.run(2800)
    await converged(client, cache)
    await assert_accounting_exact(client, cache)
    assert pod_informer.relists >= relists + 2
