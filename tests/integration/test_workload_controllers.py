"""The embedded cluster's Deployment and ReplicaSet controllers (sim.controllers) against the
embedded API server over HTTP: a Deployment gets a ReplicaSet per pod-template hash carrying its
annotations, the ReplicaSet makes and removes pods with controller references, and both report
status as kube-controller-manager does. No kubelets here: pods are marked Ready by hand."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from core.kube.client import PODS, KubeClient, Resource
from sim.controllers import WorkloadControllers, parse_controllers
from sim.controllers.pod_template import POD_TEMPLATE_HASH, equal_ignoring_hash, template_hash

DEPLOYMENTS = Resource("apps", "v1", "deployments", True, "Deployment")
REPLICASETS = Resource("apps", "v1", "replicasets", True, "ReplicaSet")
NS = "default"


@pytest_asyncio.fixture
async def cluster(client: KubeClient) -> AsyncIterator[KubeClient]:
    controllers = WorkloadControllers(client, ["deployment", "replicaset"])
    await controllers.start()
    yield client
    await controllers.stop()


def deployment(name: str, replicas: int, image: str = "nginx:1.27", **annotations: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"note": "kept"}},
                "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": image}]},
            },
        },
    }


async def items(client: KubeClient, resource: Resource, **query: Any) -> list[dict[str, Any]]:
    return (await client.list(resource, NS, **query))["items"]


async def wait_items(
    client: KubeClient, resource: Resource, count: int, **query: Any
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    async def probe() -> bool:
        nonlocal found
        found = [
            o
            for o in await items(client, resource, **query)
            if not o["metadata"].get("deletionTimestamp")
        ]
        return len(found) == count

    await _until_async(probe)
    return found


async def _until_async(probe: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Await an API state: ask `probe` every 50 ms, fail after `timeout`."""
    async with asyncio.timeout(timeout):
        while not await probe():
            await asyncio.sleep(0.05)


async def mark_ready(client: KubeClient, pod: dict[str, Any]) -> None:
    await client.patch(
        PODS,
        pod["metadata"]["name"],
        {
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            }
        },
        NS,
        subresource="status",
    )


async def test_a_deployment_runs_its_pods_through_a_replicaset(cluster: KubeClient) -> None:
    created = await cluster.create(
        DEPLOYMENTS,
        deployment("web", 3, **{"scheduling.volcano.sh/group-min-member": "3"}),
        NS,
    )
    (rs,) = await wait_items(cluster, REPLICASETS, 1)
    hash_ = rs["metadata"]["labels"][POD_TEMPLATE_HASH]
    assert rs["metadata"]["name"] == f"web-{hash_}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", POD_TEMPLATE_HASH: hash_}
    assert rs["spec"]["template"]["metadata"]["labels"] == {"app": "web", POD_TEMPLATE_HASH: hash_}
    assert rs["spec"]["replicas"] == 3
    # The Deployment's annotations reach the ReplicaSet (Volcano's PodGroup controller reads
    # group-min-member there), with the revision.
    annotations = rs["metadata"]["annotations"]
    assert annotations["scheduling.volcano.sh/group-min-member"] == "3"
    assert annotations["deployment.kubernetes.io/revision"] == "1"
    (ref,) = rs["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "Deployment",
        "web",
        created["metadata"]["uid"],
        True,
    )

    pods = await wait_items(cluster, PODS, 3, labelSelector="app=web")
    for pod in pods:
        meta = pod["metadata"]
        assert meta["name"].startswith(f"web-{hash_}-")
        assert meta["labels"] == {"app": "web", POD_TEMPLATE_HASH: hash_}
        assert meta["annotations"] == {"note": "kept"}
        (owner,) = meta["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            "ReplicaSet",
            rs["metadata"]["uid"],
            True,
        )
        assert pod["spec"]["schedulerName"] == "volcano"

    for pod in pods[:2]:
        await mark_ready(cluster, pod)

    async def two_ready() -> bool:
        status = (await cluster.get(DEPLOYMENTS, "web", NS)).get("status") or {}
        return status.get("readyReplicas") == 2

    await _until_async(two_ready)
    status = (await cluster.get(DEPLOYMENTS, "web", NS))["status"]
    assert status["replicas"] == 3 and status["updatedReplicas"] == 3
    assert status["availableReplicas"] == 2 and status["unavailableReplicas"] == 1
    assert status["observedGeneration"] == 1
    conditions = {c["type"]: c for c in status["conditions"]}
    # 25% of 3 rounded down: no pod may be unavailable, so the Deployment is not yet available.
    assert conditions["Available"]["status"] == "False"
    assert conditions["Progressing"]["reason"] == "ReplicaSetUpdated"
    rs_status = (await cluster.get(REPLICASETS, rs["metadata"]["name"], NS))["status"]
    assert rs_status["readyReplicas"] == 2 and rs_status["availableReplicas"] == 2

    await mark_ready(cluster, pods[2])

    async def complete() -> bool:
        status = (await cluster.get(DEPLOYMENTS, "web", NS)).get("status") or {}
        kinds = {c["type"]: c["reason"] for c in status.get("conditions") or ()}
        return kinds == {
            "Available": "MinimumReplicasAvailable",
            "Progressing": "NewReplicaSetAvailable",
        }

    await _until_async(complete)


async def test_scaling_down_deletes_the_pending_pods_first(cluster: KubeClient) -> None:
    await cluster.create(DEPLOYMENTS, deployment("api", 3), NS)
    pods = await wait_items(cluster, PODS, 3, labelSelector="app=api")
    ready = pods[1]
    await mark_ready(cluster, ready)
    await cluster.patch(DEPLOYMENTS, "api", {"spec": {"replicas": 1}}, NS)
    (left,) = await wait_items(cluster, PODS, 1, labelSelector="app=api")
    assert left["metadata"]["name"] == ready["metadata"]["name"]
    (rs,) = await items(cluster, REPLICASETS)
    assert rs["spec"]["replicas"] == 1

    async def observed() -> bool:
        status = (await cluster.get(DEPLOYMENTS, "api", NS)).get("status") or {}
        return status.get("observedGeneration") == 2 and status.get("replicas") == 1

    await _until_async(observed)


async def test_a_new_template_gets_a_new_replicaset_and_the_old_one_goes_to_zero(
    cluster: KubeClient,
) -> None:
    recreate = deployment("app", 2)
    recreate["spec"]["strategy"] = {"type": "Recreate"}
    await cluster.create(DEPLOYMENTS, recreate, NS)
    (first,) = await wait_items(cluster, REPLICASETS, 1)
    await wait_items(cluster, PODS, 2, labelSelector="app=app")
    await cluster.patch(
        DEPLOYMENTS,
        "app",
        {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.28"}]}}}},
        NS,
    )
    sets = await wait_items(cluster, REPLICASETS, 2)
    (second,) = [r for r in sets if r["metadata"]["name"] != first["metadata"]["name"]]
    assert second["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"

    async def rolled() -> bool:
        pods = await items(cluster, PODS, labelSelector="app=app")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        images = {p["spec"]["containers"][0]["image"] for p in live}
        return len(live) == 2 and images == {"nginx:1.28"}

    await _until_async(rolled)
    old = await cluster.get(REPLICASETS, first["metadata"]["name"], NS)
    assert old["spec"]["replicas"] == 0
    revision = (await cluster.get(DEPLOYMENTS, "app", NS))["metadata"]["annotations"]
    assert revision["deployment.kubernetes.io/revision"] == "2"


async def test_a_rolling_update_keeps_within_max_surge_and_max_unavailable(
    cluster: KubeClient,
) -> None:
    """3 replicas, maxSurge 1, maxUnavailable 0: never more than 4 pods, never fewer than 3
    ready, until all 3 run the new image (the test marks pods ready, as a kubelet would)."""
    body = deployment("roll", 3)
    body["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    await cluster.create(DEPLOYMENTS, body, NS)
    most_live, fewest_ready = 0, 3
    rolling = False

    async def step() -> bool:
        nonlocal most_live, fewest_ready
        pods = await items(cluster, PODS, labelSelector="app=roll")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        for pod in live:
            if (pod.get("status") or {}).get("phase") != "Running":
                await mark_ready(cluster, pod)
        ready = [p for p in live if (p.get("status") or {}).get("phase") == "Running"]
        if rolling:
            most_live = max(most_live, len(live))
            fewest_ready = min(fewest_ready, len(ready))
        images = {p["spec"]["containers"][0]["image"] for p in ready}
        target = "nginx:1.28" if rolling else "nginx:1.27"
        return len(ready) == 3 and len(live) == 3 and images == {target}

    await _until_async(step)
    rolling = True
    await cluster.patch(
        DEPLOYMENTS,
        "roll",
        {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.28"}]}}}},
        NS,
    )
    await _until_async(step, timeout=20)
    assert most_live <= 4
    assert fewest_ready >= 3
    sets = await items(cluster, REPLICASETS)
    assert sorted(r["spec"]["replicas"] for r in sets) == [0, 3]


async def test_a_replicaset_replaces_a_failed_pod(cluster: KubeClient) -> None:
    body = deployment("solo", 1)
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "solo"},
        "spec": {**body["spec"]},
    }
    await cluster.create(REPLICASETS, rs, NS)
    (pod,) = await wait_items(cluster, PODS, 1, labelSelector="app=solo")
    await cluster.patch(
        PODS, pod["metadata"]["name"], {"status": {"phase": "Failed"}}, NS, subresource="status"
    )

    async def replaced() -> bool:
        pods = await items(cluster, PODS, labelSelector="app=solo")
        return len(pods) == 2 and any(p["status"].get("phase") != "Failed" for p in pods)

    await _until_async(replaced)


def test_the_template_hash_is_stable_and_ignores_itself() -> None:
    template = deployment("web", 1)["spec"]["template"]
    value = template_hash(template)
    assert value == template_hash(dict(reversed(list(template.items()))))  # key order
    assert set(value) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert template_hash(template, 1) != value  # a collision count gives another name
    labelled = {**template, "metadata": {"labels": {"app": "web", POD_TEMPLATE_HASH: value}}}
    labelled["metadata"]["annotations"] = template["metadata"]["annotations"]
    assert equal_ignoring_hash(labelled, template)


def test_controller_names_are_checked() -> None:
    assert parse_controllers("none") == []
    assert parse_controllers("*") == ["deployment", "replicaset", "statefulset", "daemonset", "job"]
    with pytest.raises(ValueError, match="unknown workload controller 'cronjob'"):
        parse_controllers("replicaset,cronjob")
