"""Volcano's e2e case "preempt: not enough even with victims", against the embedded API server.

One 16-cpu node holds a pod of another scheduler (3 cpu, no PodGroup, bound by it) and a
low-priority gang of vulcan's (8 x 1 cpu). A high-priority gang of 14 x 1 cpu fits only if the
other scheduler's pod went too: vulcan must never take that pod, so nothing is evicted and the
gang waits. The same gang at 10 cpu evicts the low gang alone."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from core.cache import ClusterCache
from core.kube.client import PODGROUPS, PODS, PRIORITY_CLASSES, ApiError, KubeClient
from core.served import ServedPods
from extender.binder import Binder
from extender.gang_options import GangOptions
from extender.gangs import GangScheduler
from extender.ledger import GangLedger
from tests.helpers import add_ready_node, until

OWNER = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "name": "high",
    "uid": "uid-high",
    "controller": True,
}


def pod_body(
    name: str, cpu: int, *, group: str | None, priority: int, scheduler: str, node: str | None
) -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "priority": priority,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": spec,
    }


async def add_group(
    client: KubeClient,
    name: str,
    members: int,
    cpu: int,
    *,
    owned: bool = False,
    priority_class: str = "",
    phase: str | None = None,
) -> None:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if owned:
        metadata["ownerReferences"] = [OWNER]
    body: dict[str, Any] = {
        "metadata": metadata,
        "spec": {
            "minMember": members,
            "queue": "default",
            "minResources": {"cpu": str(cpu * members)},
            "priorityClassName": priority_class,
        },
    }
    if phase is not None:  # as a restarted extender finds a running gang
        body["status"] = {"phase": phase}
    await client.create(PODGROUPS, body)


async def cluster(client: KubeClient) -> GangScheduler:
    await add_ready_node(client, "node-0", {"cpu": "16", "memory": "64Gi", "pods": "110"})
    # Bound by the default scheduler: vulcan never saw it.
    await client.create(
        PODS,
        pod_body("web", 3, group=None, priority=0, scheduler="default-scheduler", node="node-0"),
    )
    await client.create(PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 100})
    await add_group(client, "low", 8, 1, phase="Running")
    for index in range(8):
        await client.create(
            PODS,
            pod_body(
                f"low-{index}", 1, group="low", priority=1, scheduler="volcano", node="node-0"
            ),
        )
    cache = ClusterCache()
    cache.start(client)
    await cache.wait_synced(10)
    gangs = GangScheduler(
        cache,
        GangLedger(cache.bump_node),
        client,
        Binder(client).bind,
        options=GangOptions(served=ServedPods.of(["volcano"])),
    )
    gangs.start(enqueue=False)
    await until(lambda: len(cache.pods) == 9 and cache.podgroups["default/low"].phase == "Running")
    return gangs


async def add_high(client: KubeClient, gangs: GangScheduler, members: int, owned: bool) -> str:
    await add_group(client, "high", members, 1, owned=owned, priority_class="high")
    if not owned:
        for index in range(members):
            await client.create(
                PODS,
                pod_body(
                    f"high-{index}", 1, group="high", priority=100, scheduler="volcano", node=None
                ),
            )
    await until(lambda: "default/high" in gangs.cache.podgroups)
    await until(
        lambda: len(gangs.cache.pods_by_group.get("default/high", ())) == members * (not owned)
    )
    return "default/high"


@pytest.mark.parametrize("owned", [False, True], ids=["gang-with-pods", "job-owned-group"])
async def test_not_enough_even_with_victims_evicts_nothing(client: KubeClient, owned: bool) -> None:
    gangs = await cluster(client)
    key = await add_high(client, gangs, 14, owned)
    for _ in range(3):
        gangs.schedule_pass()
    assert gangs.evictor.evictions == 0
    assert not gangs.evictor.releasing
    assert key not in gangs.admitted and key not in gangs.promises
    assert key in gangs.reasons
    pods = await client.list(PODS, "default")
    assert {
        p["metadata"]["name"] for p in pods["items"] if not p["metadata"].get("deletionTimestamp")
    } >= {
        "web",
        *(f"low-{i}" for i in range(8)),
    }
    await gangs.stop()


@pytest.mark.parametrize("owned", [False, True], ids=["gang-with-pods", "job-owned-group"])
async def test_enough_with_the_low_gang_evicts_it_and_never_the_other_schedulers_pod(
    client: KubeClient, owned: bool
) -> None:
    gangs = await cluster(client)
    key = await add_high(client, gangs, 10, owned)
    gangs.schedule_pass()
    if owned:
        # Enqueued on the promise of evicting the low gang; its job makes the pods now.
        assert gangs.promises.get(key, "").count("low") >= 1
        for index in range(10):
            await client.create(
                PODS,
                pod_body(
                    f"high-{index}", 1, group="high", priority=100, scheduler="volcano", node=None
                ),
            )
        await until(lambda: len(gangs.cache.pods_by_group.get(key, ())) == 10)
        gangs.schedule_pass()
    assert key in gangs.admitted
    evicted = set(gangs.evictor.notes)
    assert evicted == {f"default/low-{i}" for i in range(8)}
    assert "default/web" not in gangs.evictor.releasing
    await gangs.stop()


async def test_a_gang_of_no_controller_evicted_whole_is_not_enqueued_again_until_a_pod_exists(
    client: KubeClient,
) -> None:
    """Nothing makes a bare gang's pods again: enqueued on its minResources it would hold its
    queue's room for nobody. It waits, saying why, until one of its pods is created."""
    gangs = await cluster(client)
    await add_high(client, gangs, 10, owned=False)
    gangs.schedule_pass()
    assert set(gangs.evictor.notes) == {f"default/low-{i}" for i in range(8)}
    low = "default/low"
    await until(lambda: all(p.deleting for p in gangs.cache.pods.values() if p.group == low))
    for index in range(8):  # their kubelet (none here) ends them
        with contextlib.suppress(ApiError):
            await client.delete(PODS, f"low-{index}", "default", grace_period=0)
    await until(lambda: not gangs.cache.pods_by_group.get(low))
    for _ in range(3):
        gangs.schedule_pass()
        await gangs.status_writer.flush()
    status = (await client.get(PODGROUPS, "low", "default"))["status"]
    assert status["phase"] == "Pending"
    [condition] = status["conditions"]
    for why in (gangs.reasons[low], condition["message"]):
        assert "its pods were evicted (preempted (whole) by gang default/high" in why
        assert "enqueued again once one of its pods is created" in why
    # One of its pods again: it is enqueued as any PodGroup (its queue has no room left, so
    # it waits for that instead).
    await client.create(
        PODS, pod_body("low-0", 1, group="low", priority=1, scheduler="volcano", node=None)
    )
    await until(lambda: bool(gangs.cache.pods_by_group.get(low)))
    gangs.schedule_pass()
    assert low not in gangs.reach.backoffs()
    assert "its pods were evicted" not in gangs.reasons.get(low, "")
    await gangs.stop()
