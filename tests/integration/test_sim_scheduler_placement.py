"""The kube-scheduler stand-in's NodePorts, InterPodAffinity and PodTopologySpread plugins, alone
(no extender), against the embedded API server: pods created as a user would, placed by the
stand-in's informers and cycle, refused with kube-scheduler's FailedScheduling reasons."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from core.kube.client import NODES, PODS, KubeClient, Resource
from sim.scheduler.config import parse_config, sim_config
from sim.scheduler.scheduler import Scheduler
from tests.helpers import add_ready_node


@pytest_asyncio.fixture
async def scheduler(client: KubeClient) -> AsyncIterator[Scheduler]:
    for i, zone in enumerate(("a", "a", "b")):
        await add_ready_node(client, f"n{i}", {"cpu": "8", "memory": "16Gi", "pods": "110"})
        labels = {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": zone}
        await client.patch(NODES, f"n{i}", {"metadata": {"labels": labels}})
    config = parse_config(sim_config(None))
    stand_in = Scheduler(client, config, seed=1, max_unschedulable=1.0)
    await stand_in.start()
    yield stand_in
    await stand_in.stop()


def web_pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "nginx"}
    if "ports" in spec:
        container["ports"] = spec.pop("ports")
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "web"}},
        "spec": {"containers": [container], **spec},
    }


async def placements(client: KubeClient, names: list[str]) -> dict[str, str | None]:
    found = {}
    for name in names:
        pod = await client.get(PODS, name, "default")
        found[name] = pod["spec"].get("nodeName")
    return found


async def settle(client: KubeClient, names: list[str], bound: int) -> dict[str, str | None]:
    where: dict[str, str | None] = {}

    async def count() -> int:
        nonlocal where
        where = await placements(client, names)
        return sum(1 for node in where.values() if node)

    async with asyncio.timeout(15):
        while await count() < bound:
            await asyncio.sleep(0.05)
    return where


async def failed_scheduling(client: KubeClient, name: str) -> str:
    async with asyncio.timeout(15):
        while True:
            pod = await client.get(PODS, name, "default")
            for condition in (pod.get("status") or {}).get("conditions") or ():
                if condition["type"] == "PodScheduled" and condition["status"] == "False":
                    return str(condition.get("message", ""))
            await asyncio.sleep(0.05)


async def test_host_port_pods_land_on_three_nodes(client: KubeClient, scheduler: Scheduler) -> None:
    ports = [{"containerPort": 80, "hostPort": 8080}]
    names = [f"hp-{i}" for i in range(4)]
    for name in names:
        await client.create(PODS, web_pod(name, ports=ports), "default")
    where = await settle(client, names, 3)
    assert sorted(n for n in where.values() if n) == ["n0", "n1", "n2"]
    pending = next(name for name, node in where.items() if node is None)
    message = await failed_scheduling(client, pending)
    assert message.startswith(
        "0/3 nodes are available: 3 node(s) didn't have free ports for the requested pod ports."
    )
    # Another protocol on the same port fits.
    udp = [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]
    await client.create(PODS, web_pod("udp", ports=udp), "default")
    assert (await settle(client, ["udp"], 1))["udp"]


async def test_required_anti_affinity_spreads(client: KubeClient, scheduler: Scheduler) -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    names = [f"anti-{i}" for i in range(4)]
    for name in names:
        await client.create(PODS, web_pod(name, affinity=anti), "default")
    where = await settle(client, names, 3)
    assert sorted(n for n in where.values() if n) == ["n0", "n1", "n2"]
    pending = next(name for name, node in where.items() if node is None)
    assert (await failed_scheduling(client, pending)).startswith(
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    )
    # A pod without the rule but matched by the others' rules is kept out by theirs.
    await client.create(PODS, web_pod("plain"), "default")
    assert (await failed_scheduling(client, "plain")).startswith(
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules."
    )
    # Removing one frees its node for the pending one.
    placed = next(name for name, node in where.items() if node)
    await client.delete(PODS, placed, "default", grace_period=0)
    await client.delete(PODS, "plain", "default", grace_period=0)
    assert (await settle(client, [pending], 1))[pending] == where[placed]


async def test_required_affinity_follows_its_peer(client: KubeClient, scheduler: Scheduler) -> None:
    with_db = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "topology.kubernetes.io/zone",
                }
            ]
        }
    }
    await client.create(PODS, web_pod("cache", affinity=with_db), "default")
    assert (await failed_scheduling(client, "cache")).startswith(
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."
    )
    await client.create(PODS, web_pod("db", {"app": "db"}, nodeName="n2"), "default")
    # The db pod's arrival moves the waiting pod back; zone b holds only n2.
    assert (await settle(client, ["cache"], 1))["cache"] == "n2"


async def test_topology_spread_max_skew_one_holds(client: KubeClient, scheduler: Scheduler) -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    # Two pods already on n0 (bound by hand, as a kubelet-started pod would be).
    for i in range(2):
        await client.create(PODS, web_pod(f"pre-{i}", nodeName="n0"), "default")
    names = [f"sp-{i}" for i in range(4)]
    for name in names:
        await client.create(PODS, web_pod(name, topologySpreadConstraints=spread), "default")
    where = await settle(client, names, 4)
    counts = Counter(where.values())
    counts["n0"] += 2
    assert sorted(counts.values()) == [2, 2, 2]
    # A constraint on a key no node has is refused as unresolvable, with its own reason.
    missing = [{**spread[0], "topologyKey": "example.com/rack"}]
    await client.create(PODS, web_pod("rackless", topologySpreadConstraints=missing), "default")
    assert (await failed_scheduling(client, "rackless")).startswith(
        "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints "
        "(missing required label)."
    )


PVS = Resource("", "v1", "persistentvolumes", False, "PersistentVolume")
PVCS = Resource("", "v1", "persistentvolumeclaims", True, "PersistentVolumeClaim")


async def bound_claim(
    client: KubeClient, name: str, *, node: str | None = None, zone: str | None = None
) -> None:
    """A PersistentVolume (local to `node`, or labelled with `zone`) and a claim bound to it."""
    volume: dict[str, Any] = {
        "metadata": {"name": f"pv-{name}", "labels": {}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]},
    }
    if node:
        volume["spec"]["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                        ]
                    }
                ]
            }
        }
    if zone:
        volume["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
    await client.create(PVS, volume)
    claim = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "volumeName": f"pv-{name}",
        },
    }
    await client.create(PVCS, claim, "default")


def mounting(name: str, claim: str) -> dict[str, Any]:
    return web_pod(name, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])


async def test_bound_claims_pin_pods_to_their_volumes_nodes(
    client: KubeClient, scheduler: Scheduler
) -> None:
    await bound_claim(client, "local", node="n1")
    await bound_claim(client, "zonal", zone="b")
    for name, claim in (("uses-local", "local"), ("uses-zonal", "zonal")):
        await client.create(PODS, mounting(name, claim), "default")
    where = await settle(client, ["uses-local", "uses-zonal"], 2)
    assert where == {"uses-local": "n1", "uses-zonal": "n2"}  # n2 is zone b's only node
    # A claim that does not exist keeps the pod off every node (VolumeBinding's PreFilter).
    await client.create(PODS, mounting("orphan", "nope"), "default")
    assert (await failed_scheduling(client, "orphan")).startswith(
        '0/3 nodes are available: persistentvolumeclaim "nope" not found.'
    )
    # Unbound, with no class that waits for a consumer: kube-scheduler's immediate-binding text.
    unbound = {
        "metadata": {"name": "pending", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    await client.create(PVCS, unbound, "default")
    await client.create(PODS, mounting("waits", "pending"), "default")
    assert (await failed_scheduling(client, "waits")).startswith(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )
    # The claim arriving later is an event that retries the pod.
    await bound_claim(client, "nope", node="n0")
    assert (await settle(client, ["orphan"], 1))["orphan"] == "n0"
