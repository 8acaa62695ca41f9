"""The extender's gang scheduling against the embedded API server: admission into the ledger,
filter rejection and steering, the bind barrier creating all Bindings together (real HTTP to the
API server; the cache fed by informers)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from core.cache import ClusterCache
from core.kube.client import EVENTS, NODES, PODGROUPS, PODS, KubeClient
from extender.binder import Binder, BindError
from extender.gang_options import GangOptions
from extender.gang_verbs import GangVerbs
from extender.gangs import GangScheduler
from extender.ledger import GangLedger
from extender.metrics import GangMetrics
from extender.protocol import BindingArgs
from plugins.framework.config import default_config, parse_scheduler_config
from plugins.framework.registry import build_policy
from tests.helpers import add_ready_node, member_filter, pod_info, until

# Volcano's default conf without the gang plugin.
NO_GANG = parse_scheduler_config(
    'actions: "enqueue, allocate, backfill"\n'
    "tiers:\n- plugins:\n  - name: priority\n  - name: conformance\n"
    "- plugins:\n  - name: overcommit\n  - name: drf\n  - name: proportion\n"
)


async def add_gpu_node(client: KubeClient, name: str) -> None:
    await add_ready_node(
        client, name, {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1"}
    )


def worker(job: str, index: int, task: str = "worker") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{job}-{task}-{index}",
            "namespace": "default",
            "annotations": {
                "scheduling.k8s.io/group-name": job,
                "volcano.sh/task-spec": task,
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1"}},
                }
            ]
        },
    }


async def started(
    client: KubeClient,
    *,
    gang_enabled: bool = True,
    gang_metrics: GangMetrics | None = None,
    options: GangOptions | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[ClusterCache, GangScheduler]:
    cache = ClusterCache()
    cache.start(client)
    await cache.wait_synced(10)
    binder = Binder(client)
    gangs = GangScheduler(
        cache,
        GangLedger(cache.bump_node),
        client,
        binder.bind,
        options=options or GangOptions(gang_timeout=5),
        policy=build_policy(default_config() if gang_enabled else NO_GANG),
        metrics=gang_metrics,
        clock=clock,
    )
    gangs.start(enqueue=False)  # passes are driven by the test, one at a time
    return cache, gangs


async def test_two_gangs_on_four_gpus_one_is_admitted_whole(client: KubeClient) -> None:
    nodes = [f"gpu-{i}" for i in range(4)]
    for name in nodes:
        await add_gpu_node(client, name)
    for job in ("tf-a", "tf-b"):
        await client.create(
            PODGROUPS,
            {"metadata": {"name": job, "namespace": "default"}, "spec": {"minMember": 4}},
        )
    pods: dict[str, dict[str, Any]] = {}
    for index in range(4):
        for job in ("tf-a", "tf-b"):
            pod = await client.create(PODS, worker(job, index))
            pods[pod["metadata"]["name"]] = pod
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 8 and len(cache.podgroups) == 2)
        gangs.schedule_pass()
        # tf-a (first in order) holds all four GPUs in the ledger, tf-b waits with the reason.
        assert gangs.admitted == {"default/tf-a"}
        slots = {gangs.ledger.reservation_of(f"default/tf-a-worker-{i}").node for i in range(4)}
        assert slots == set(nodes)
        passing, failed, unresolvable = member_filter(gangs, pod_info(pods["tf-b-worker-0"]), nodes)
        assert passing == [] and failed == {}
        assert set(unresolvable) == set(nodes)
        assert "gang default/tf-b: waiting for admission" in unresolvable["gpu-0"]
        assert "nvidia.com/gpu" in unresolvable["gpu-0"]
        # An admitted member is steered to its own slot, the one node it passes; the others
        # are dropped without a reason (only a pod left with no node needs them).
        member = pods["tf-a-worker-2"]
        own = gangs.ledger.reservation_of("default/tf-a-worker-2").node
        assert member_filter(gangs, pod_info(member), nodes) == ([own], {}, {})
        # Binds are held until all four members ask, then all Bindings are created together.
        binds = []
        for i in range(3):
            name = f"tf-a-worker-{i}"
            node = gangs.ledger.reservation_of(f"default/{name}").node
            args = BindingArgs(name, "default", pods[name]["metadata"]["uid"], node)
            binds.append(asyncio.create_task(GangVerbs(gangs).bind(args)))
        await until(lambda: gangs.barrier.held("default/tf-a") == 3)
        for i in range(3):
            live = await client.get(PODS, f"tf-a-worker-{i}", "default")
            assert not live["spec"].get("nodeName")  # nothing bound before quorum
        last = pods["tf-a-worker-3"]
        node = gangs.ledger.reservation_of("default/tf-a-worker-3").node
        assert await GangVerbs(gangs).bind(
            BindingArgs(last["metadata"]["name"], "default", last["metadata"]["uid"], node)
        )
        assert all(await asyncio.gather(*binds))
        for i in range(4):
            live = await client.get(PODS, f"tf-a-worker-{i}", "default")
            assert live["spec"]["nodeName"] in nodes
        # The PodGroup reports what happened.
        await until(lambda: all(cache.pods[f"default/tf-a-worker-{i}"].node for i in range(4)))
        gangs.schedule_pass()
        await gangs.status_writer.flush()  # type: ignore[union-attr]
        group = await client.get(PODGROUPS, "tf-b", "default")
        conditions = group["status"]["conditions"]
        assert group["status"]["phase"] == "Pending"
        assert any(
            c["type"] == "Unschedulable" and "4/4 tasks in gang unschedulable" in c["message"]
            for c in conditions
        )
    finally:
        await gangs.stop()
        await cache.stop()


async def test_a_gang_whose_last_member_is_missing_is_not_admitted(client: KubeClient) -> None:
    for name in ("gpu-0", "gpu-1"):
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS, {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 3}}
    )
    created = [await client.create(PODS, worker("job", i)) for i in range(2)]
    registry = CollectorRegistry()
    cache, gangs = await started(client, gang_metrics=GangMetrics(registry))
    try:
        await until(lambda: len(cache.pods) == 2 and len(cache.podgroups) == 1)
        gangs.schedule_pass()
        assert gangs.admitted == set() and len(gangs.ledger) == 0  # capacity stays free
        _, _, unresolvable = member_filter(gangs, pod_info(created[0]), ["gpu-0", "gpu-1"])
        assert unresolvable["gpu-0"] == "gang default/job: 2/3 members created"
    finally:
        await gangs.stop()
        await cache.stop()


async def test_held_binds_time_out_together_and_release_the_reservation(
    client: KubeClient,
) -> None:
    for name in ("gpu-0", "gpu-1"):
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS,
        {
            "metadata": {
                "name": "job",
                "namespace": "default",
                "annotations": {"vulcan.sh/gang-timeout": "200ms"},
            },
            "spec": {"minMember": 2},
        },
    )
    created = [await client.create(PODS, worker("job", i)) for i in range(2)]
    registry = CollectorRegistry()
    cache, gangs = await started(client, gang_metrics=GangMetrics(registry))
    try:
        await until(lambda: len(cache.pods) == 2 and len(cache.podgroups) == 1)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/job"}
        pod = created[0]
        node = gangs.ledger.reservation_of("default/job-worker-0").node
        try:
            await GangVerbs(gangs).bind(
                BindingArgs(pod["metadata"]["name"], "default", pod["metadata"]["uid"], node)
            )
        except BindError as exc:
            assert "timed out" in str(exc)
        else:
            raise AssertionError("a lone member's bind must time out")
        assert gangs.admitted == set() and len(gangs.ledger) == 0
        assert gangs.barrier.backing_off("default/job") > 0
        # Counted for the "gangs past their timeout" alert, under the gang's queue.
        timeouts = registry.get_sample_value("vulcan_gang_timeouts_total", {"queue": "default"})
        assert timeouts == 1
        live = await client.get(PODS, "job-worker-0", "default")
        assert not live["spec"].get("nodeName")
    finally:
        await gangs.stop()
        await cache.stop()


async def test_a_restarted_extender_completes_a_gang_from_what_the_api_server_knows(
    client: KubeClient,
) -> None:
    """Held binds die with the extender (kube-scheduler's requests are cut; nothing was bound).
    A new extender rebuilds its view from the informers: the PodGroup is Inqueue, two members
    were bound before the crash, and the gang completes with the remaining two."""
    nodes = [f"gpu-{i}" for i in range(4)]
    for name in nodes:
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS, {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 4}}
    )
    pods = [await client.create(PODS, worker("job", i)) for i in range(4)]
    cache, first = await started(client)
    try:
        await until(lambda: len(cache.pods) == 4 and len(cache.podgroups) == 1)
        first.schedule_pass()
        assert first.admitted == {"default/job"}
        # Two members hold binds when the extender goes away.
        held = []
        for pod in pods[:2]:
            name = pod["metadata"]["name"]
            node = first.ledger.reservation_of(f"default/{name}").node
            held.append(
                asyncio.create_task(
                    GangVerbs(first).bind(
                        BindingArgs(name, "default", pod["metadata"]["uid"], node)
                    )
                )
            )
        await until(lambda: first.barrier.held("default/job") == 2)
        await first.status_writer.flush()  # type: ignore[union-attr]
        for task in held:
            task.cancel()  # the HTTP handlers are cancelled as the process stops
        await asyncio.gather(*held, return_exceptions=True)
    finally:
        await first.stop()
        await cache.stop()
    for pod in pods:
        live = await client.get(PODS, pod["metadata"]["name"], "default")
        assert not live["spec"].get("nodeName")  # nothing was bound
    group = await client.get(PODGROUPS, "job", "default")
    assert group["status"]["phase"] == "Inqueue"

    # Meanwhile kube-scheduler bound two members through another path (e.g. a retry that the
    # old extender answered just before dying): the new extender must count them.
    await client.bind_pod("default", "job-worker-0", "gpu-0", uid=pods[0]["metadata"]["uid"])
    await client.bind_pod("default", "job-worker-1", "gpu-1", uid=pods[1]["metadata"]["uid"])
    cache, second = await started(client)
    try:
        await until(lambda: len(cache.pods) == 4 and cache.pods["default/job-worker-1"].node)
        second.schedule_pass()
        assert second.admitted == {"default/job"}
        assert {second.ledger.reservation_of(f"default/job-worker-{i}").node for i in (2, 3)} == {
            "gpu-2",
            "gpu-3",
        }
        results = await asyncio.gather(
            *(
                GangVerbs(second).bind(
                    BindingArgs(
                        f"job-worker-{i}",
                        "default",
                        pods[i]["metadata"]["uid"],
                        second.ledger.reservation_of(f"default/job-worker-{i}").node,
                    )
                )
                for i in (2, 3)
            )
        )
        assert results == ["bound", "bound"]  # two holds + two bound members = quorum
        for i in range(4):
            live = await client.get(PODS, f"job-worker-{i}", "default")
            assert live["spec"]["nodeName"] == f"gpu-{i}"
    finally:
        await second.stop()
        await cache.stop()


async def test_a_stolen_slot_or_a_deleted_node_makes_the_member_replan(client: KubeClient) -> None:
    nodes = [f"gpu-{i}" for i in range(4)]
    for name in nodes:
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS, {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    pods = [await client.create(PODS, worker("job", i)) for i in range(2)]
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 2 and len(cache.podgroups) == 1)
        gangs.schedule_pass()
        slot0 = gangs.ledger.reservation_of("default/job-worker-0").node
        slot1 = gangs.ledger.reservation_of("default/job-worker-1").node
        # Another scheduler binds a plain GPU pod onto worker-0's reserved node.
        thief = await client.create(
            PODS,
            {
                "metadata": {"name": "thief", "namespace": "default"},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                },
            },
        )
        await client.bind_pod("default", "thief", slot0, uid=thief["metadata"]["uid"])
        await until(lambda: (p := cache.pods.get("default/thief")) is not None and p.node)
        passing, _, _ = member_filter(gangs, pod_info(pods[0]), nodes)
        assert len(passing) == 1 and passing[0] not in (slot0, slot1)  # re-planned
        assert gangs.ledger.reservation_of("default/job-worker-0").node == passing[0]
        # worker-1's node disappears: it is re-planned onto what is left.
        await client.delete(NODES, slot1)
        await until(lambda: slot1 not in cache.nodes)
        left = [n for n in nodes if n not in (slot0, slot1, passing[0])]
        passing1, _, _ = member_filter(gangs, pod_info(pods[1]), left)
        assert passing1 == left
        # Both bind together on their new nodes.
        results = await asyncio.gather(
            GangVerbs(gangs).bind(
                BindingArgs("job-worker-0", "default", pods[0]["metadata"]["uid"], passing[0])
            ),
            GangVerbs(gangs).bind(
                BindingArgs("job-worker-1", "default", pods[1]["metadata"]["uid"], passing1[0])
            ),
        )
        assert results == ["bound", "bound"]
    finally:
        await gangs.stop()
        await cache.stop()


async def test_admission_removes_the_queue_allocation_gate(client: KubeClient) -> None:
    await add_gpu_node(client, "gpu-0")
    await client.create(
        PODGROUPS, {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 1}}
    )
    gated = worker("job", 0)
    gated["spec"]["schedulingGates"] = [{"name": "scheduling.volcano.sh/queue-allocation-gate"}]
    await client.create(PODS, gated)
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 1 and len(cache.podgroups) == 1)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/job"}

        async def ungated() -> bool:
            live = await client.get(PODS, "job-worker-0", "default")
            return not live["spec"].get("schedulingGates") and bool(
                live["metadata"]["annotations"].get("vulcan.sh/gang-admitted")
            )

        async with asyncio.timeout(10):
            while not await ungated():
                await asyncio.sleep(0.02)
    finally:
        await gangs.stop()
        await cache.stop()


async def _ungated(client: KubeClient, name: str) -> None:
    async def done() -> bool:
        live = await client.get(PODS, name, "default")
        return not live["spec"].get("schedulingGates")

    async with asyncio.timeout(10):
        while not await done():
            await asyncio.sleep(0.02)


def _gated(job: str, index: int, task: str = "worker") -> dict[str, Any]:
    pod = worker(job, index, task)
    pod["spec"]["schedulingGates"] = [{"name": "scheduling.volcano.sh/queue-allocation-gate"}]
    return pod


async def test_a_gated_member_that_comes_after_admission_is_released(client: KubeClient) -> None:
    """A dependent task's pods, an elastic member or a replacement is made after its gang was
    admitted, behind the gate like every pod of its job: a member beyond the gang's minimum,
    it is placed by the pass when its queue has room (`plugins.actions.backfill`)."""
    for name in ("gpu-0", "gpu-1"):
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS, {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 1}}
    )
    await client.create(PODS, _gated("job", 0))
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 1 and len(cache.podgroups) == 1)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/job"}
        await _ungated(client, "job-worker-0")
        await client.create(PODS, _gated("job", 1, task="ps"))
        await until(lambda: "default/job-ps-1" in cache.pods)
        gangs.schedule_pass()
        await _ungated(client, "job-ps-1")
    finally:
        await gangs.stop()
        await cache.stop()


async def _placed_on_gpu_0(client: KubeClient, member: dict[str, Any]) -> None:
    """Two GPU nodes and a Running gang `job` of minMember 1 whose `member` is on gpu-0 (as a
    restarted extender finds it)."""
    for name in ("gpu-0", "gpu-1"):
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS,
        {
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {"minMember": 1},
            "status": {"phase": "Running"},
        },
    )
    member["spec"]["nodeName"] = "gpu-0"
    await client.create(PODS, member)


@pytest.mark.parametrize("gang_enabled", [True, False])
async def test_an_adopted_gangs_gated_members_are_released(
    client: KubeClient, gang_enabled: bool
) -> None:
    """After a restart a gang placed whole is adopted as admitted: a member still behind the
    gate (its write lost with the old process) is released by the new one, with the gang
    plugin as an elastic member, without it at once (`MemberRelease.release_late`)."""
    await _placed_on_gpu_0(client, worker("job", 0))
    await client.create(PODS, _gated("job", 1))
    cache, gangs = await started(client, gang_enabled=gang_enabled)
    try:
        await until(lambda: len(cache.pods) == 2 and len(cache.podgroups) == 1)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/job"}
        if gang_enabled:
            gangs.schedule_pass()  # the elastic member's pass
        await _ungated(client, "job-worker-1")
    finally:
        await gangs.stop()
        await cache.stop()


async def test_a_dependent_task_made_after_the_first_task_finished_is_released(
    client: KubeClient,
) -> None:
    """A job of minAvailable 1 whose first task ran to its end before the task that depends on
    it was made (Volcano's task-start-dependency): its PodGroup counts nothing allocated any
    more, and the new task's pods, behind the gate, must still be placed."""
    await _placed_on_gpu_0(client, worker("job", 0, task="first"))
    await client.patch(
        PODS, "job-first-0", {"status": {"phase": "Succeeded"}}, "default", subresource="status"
    )
    cache, gangs = await started(client)
    try:
        await until(
            lambda: (
                "default/job-first-0" in cache.pods
                and cache.pods["default/job-first-0"].terminal
                and len(cache.podgroups) == 1
            )
        )
        gangs.schedule_pass()
        for index in range(2):
            await client.create(PODS, _gated("job", index, task="second"))
        await until(lambda: len(cache.pods) == 3)
        for _ in range(3):  # one elastic member per pass
            gangs.schedule_pass()
        await _ungated(client, "job-second-0")
        await _ungated(client, "job-second-1")
    finally:
        await gangs.stop()
        await cache.stop()


async def test_a_member_made_again_under_its_reserved_name_is_released(
    client: KubeClient,
) -> None:
    """An admitted member deleted before it bound and made again by its job (same name, new
    pod, behind the gate): the gang, admitted and short of its minimum, needs it, so its gate
    goes without a new admission (filter places it, as before the gate)."""
    for name in ("gpu-0", "gpu-1"):
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS, {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    for index in range(2):
        await client.create(PODS, _gated("job", index))
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 2 and len(cache.podgroups) == 1)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/job"}
        await _ungated(client, "job-worker-0")
        old = cache.pods["default/job-worker-0"].uid
        await client.delete(PODS, "job-worker-0", "default")
        await client.create(PODS, _gated("job", 0))
        await until(
            lambda: (
                "default/job-worker-0" in cache.pods
                and cache.pods["default/job-worker-0"].uid != old
            )
        )
        gangs.schedule_pass()
        assert gangs.admitted == {"default/job"}
        await _ungated(client, "job-worker-0")
    finally:
        await gangs.stop()
        await cache.stop()


async def test_admission_stamps_only_the_members_kube_scheduler_parked(
    client: KubeClient,
) -> None:
    nodes = [f"gpu-{i}" for i in range(3)]
    for name in nodes:
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS, {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 3}}
    )
    refused = await client.create(PODS, worker("job", 0))
    earlier = await client.create(PODS, worker("job", 1))
    # Refused by an earlier extender process: kube-scheduler wrote PodScheduled False.
    await client.patch(
        PODS,
        "job-worker-1",
        {"status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}},
        "default",
        subresource="status",
    )
    cache, gangs = await started(client)
    try:
        await until(
            lambda: len(cache.pods) == 2 and cache.pods["default/job-worker-1"].unschedulable
        )
        # kube-scheduler tries worker-0 before the gang is whole: refused, so parked.
        _, _, unresolvable = member_filter(gangs, pod_info(refused), nodes)
        assert set(unresolvable) == set(nodes)
        untried = await client.create(PODS, worker("job", 2))
        await until(lambda: len(cache.pods) == 3)
        before = set(gangs._tasks)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/job"}
        stamps = [task for task in gangs._tasks if task not in before]
        assert len(stamps) == 2
        await asyncio.wait_for(asyncio.gather(*stamps), 10)
        live = {
            pod["metadata"]["name"]: pod["metadata"].get("annotations") or {}
            for pod in (await client.list(PODS, "default"))["items"]
        }
        assert "vulcan.sh/gang-admitted" in live[refused["metadata"]["name"]]
        assert "vulcan.sh/gang-admitted" in live[earlier["metadata"]["name"]]
        # Never refused: still in kube-scheduler's active queue, nothing to nudge.
        assert "vulcan.sh/gang-admitted" not in live[untried["metadata"]["name"]]
        # Every member is told, by an event.
        assert gangs.recorder is not None
        await asyncio.wait_for(gangs.recorder.flush(), 10)
        events = (await client.list(EVENTS, "default"))["items"]
        admitted = {e["regarding"]["name"] for e in events if e["reason"] == "GangAdmitted"}
        assert admitted == {"job-worker-0", "job-worker-1", "job-worker-2"}
    finally:
        await gangs.stop()
        await cache.stop()


async def test_min_resources_beyond_the_overcommitted_cluster_are_not_admitted(
    client: KubeClient,
) -> None:
    """Volcano's overcommit rule: 4 GPUs × 1.2 leave room for minResources of 4 GPUs, not 5."""
    for name in ("gpu-0", "gpu-1", "gpu-2", "gpu-3"):
        await add_gpu_node(client, name)
    for job, gpus in (("fits", 4), ("too-big", 5)):
        await client.create(
            PODGROUPS,
            {
                "metadata": {"name": job, "namespace": "default"},
                "spec": {"minMember": 1, "minResources": {"nvidia.com/gpu": str(gpus)}},
            },
        )
    await client.create(PODS, worker("fits", 0))
    await client.create(PODS, worker("too-big", 0))
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 2 and len(cache.podgroups) == 2)
        gangs.schedule_pass()
        # Each has one 1-GPU member that would fit; only minResources tells them apart.
        assert gangs.admitted == {"default/fits"}
        reason = gangs.reasons["default/too-big"]
        assert reason.startswith("gang default/too-big: waiting for admission: ")
        assert "nvidia.com/gpu" in reason
    finally:
        await gangs.stop()
        await cache.stop()


async def test_gang_latencies_are_observed_once_per_gang(client: KubeClient) -> None:
    """vulcan_gang_wait_duration_seconds at admission; vulcan_gang_admission_duration_seconds
    from minMember members existing to minMember bound, once."""
    registry = CollectorRegistry()
    for name in ("gpu-0", "gpu-1"):
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS, {"metadata": {"name": "pair", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    first = await client.create(PODS, worker("pair", 0))
    cache = ClusterCache()
    cache.start(client)
    await cache.wait_synced(10)
    gangs = GangScheduler(
        cache,
        GangLedger(cache.bump_node),
        client,
        Binder(client).bind,
        options=GangOptions(gang_timeout=5),
        metrics=GangMetrics(registry),
    )
    gangs.start(enqueue=False)

    def observed(metric: str) -> float:
        value = registry.get_sample_value(f"{metric}_count", {"queue": "default"})
        return value or 0.0

    try:
        await until(lambda: "default/pair-worker-0" in cache.pods)
        gangs.schedule_pass()  # one member of two: neither waited nor admitted yet
        assert observed("vulcan_gang_wait_duration_seconds") == 0
        second = await client.create(PODS, worker("pair", 1))
        await until(lambda: "default/pair-worker-1" in cache.pods)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/pair"}
        assert observed("vulcan_gang_wait_duration_seconds") == 1
        assert observed("vulcan_gang_admission_duration_seconds") == 0  # nothing bound yet
        binds = []
        for pod in (first, second):
            name = pod["metadata"]["name"]
            node = gangs.ledger.reservation_of(f"default/{name}").node
            args = BindingArgs(name, "default", pod["metadata"]["uid"], node)
            binds.append(asyncio.create_task(GangVerbs(gangs).bind(args)))
        assert all(await asyncio.gather(*binds))
        await until(lambda: all(cache.pods[f"default/pair-worker-{i}"].node for i in range(2)))
        gangs.schedule_pass()
        assert observed("vulcan_gang_admission_duration_seconds") == 1
        took = registry.get_sample_value(
            "vulcan_gang_admission_duration_seconds_sum", {"queue": "default"}
        )
        assert took is not None and 0 < took < 60
        # The members start running: the gang is decided again, and observes nothing more.
        for i in range(2):
            await client.patch(
                PODS,
                f"pair-worker-{i}",
                {"status": {"phase": "Running"}},
                "default",
                subresource="status",
            )
        await until(
            lambda: all(cache.pods[f"default/pair-worker-{i}"].phase == "Running" for i in range(2))
        )
        decided = []
        apply = gangs.applier.apply

        def noting(decision: Any, *args: Any) -> bool:
            decided.append(decision.key)
            return apply(decision, *args)

        gangs.applier.apply = noting  # type: ignore[method-assign]
        gangs.schedule_pass()
        assert decided == ["default/pair"]  # re-decided at this version
        assert observed("vulcan_gang_admission_duration_seconds") == 1
        assert observed("vulcan_gang_wait_duration_seconds") == 1
    finally:
        await gangs.stop()
        await cache.stop()


async def _stamped(client: KubeClient, name: str) -> bool:
    live = await client.get(PODS, name, "default")
    return bool((live["metadata"].get("annotations") or {}).get("vulcan.sh/gang-admitted"))


async def test_a_member_refused_before_its_podgroup_was_seen_is_released_on_admission(
    client: KubeClient,
) -> None:
    """Pods created with their PodGroup can reach filter before this cache sees the PodGroup:
    refused ("not found"), kube-scheduler parks them, and admission must stamp them."""
    await add_gpu_node(client, "gpu-0")
    member = await client.create(PODS, worker("job", 0))
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 1)
        _, _, unresolvable = member_filter(gangs, pod_info(member), ["gpu-0"])
        assert unresolvable == {"gpu-0": "podgroup default/job not found"}
        gangs.schedule_pass()  # the group is touched by its pod while it has no PodGroup
        await client.create(
            PODGROUPS,
            {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 1}},
        )
        await until(lambda: len(cache.podgroups) == 1)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/job"}
        async with asyncio.timeout(10):
            while not await _stamped(client, "job-worker-0"):
                await asyncio.sleep(0.02)
    finally:
        await gangs.stop()
        await cache.stop()


async def test_a_member_refused_while_its_slot_is_held_is_released_when_it_frees(
    client: KubeClient,
) -> None:
    """An admitted member refused because its slot is taken (here a pod bound without asking
    the extender) keeps the slot, says why, and is stamped the moment the slot is free."""
    await add_gpu_node(client, "gpu-0")
    await client.create(
        PODGROUPS, {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 1}}
    )
    member = await client.create(PODS, worker("job", 0))
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 1 and len(cache.podgroups) == 1)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/job"}
        assert gangs.ledger.reservation_of("default/job-worker-0").node == "gpu-0"
        squatter = worker("other", 0)
        squatter["metadata"]["annotations"] = {}
        squatter["spec"]["nodeName"] = "gpu-0"
        await client.create(PODS, squatter)
        await until(lambda: "default/other-worker-0" in cache.pods)
        _, _, unresolvable = member_filter(gangs, pod_info(member), ["gpu-0"])
        assert unresolvable == {
            "gpu-0": "gang default/job: no candidate node has room for this member "
            "(its reserved slot on gpu-0 is not free yet)"
        }
        assert gangs.ledger.reservation_of("default/job-worker-0").node == "gpu-0"  # kept
        gangs.schedule_pass()
        assert "default/job-worker-0" in gangs.slots  # still parked: the slot is taken
        assert not await _stamped(client, "job-worker-0")
        # The squatter terminates: its room is named while it does, then freed.
        await client.delete(PODS, "other-worker-0", "default")
        await until(lambda: cache.pods["default/other-worker-0"].deleting)
        _, _, unresolvable = member_filter(gangs, pod_info(member), ["gpu-0"])
        assert unresolvable["gpu-0"] == (
            "gang default/job: waiting for default/other-worker-0 to terminate on gpu-0"
        )
        await client.delete(PODS, "other-worker-0", "default", grace_period=0)
        await until(lambda: "default/other-worker-0" not in cache.pods)
        gangs.schedule_pass()
        async with asyncio.timeout(10):
            while not await _stamped(client, "job-worker-0"):
                await asyncio.sleep(0.02)
        assert "default/job-worker-0" not in gangs.slots
    finally:
        await gangs.stop()
        await cache.stop()


async def test_without_the_gang_plugin_groups_are_only_enqueued_and_members_go_one_by_one(
    client: KubeClient,
) -> None:
    """A conf without `gang`: both 4-GPU jobs are enqueued on 4 GPUs (no whole-gang placement),
    nothing is reserved, filter leaves every member to the plain path, and bind holds none:
    the jobs can end half placed each (why one keeps `gang` on)."""
    nodes = [f"gpu-{i}" for i in range(4)]
    for name in nodes:
        await add_gpu_node(client, name)
    for job in ("tf-a", "tf-b"):
        await client.create(
            PODGROUPS,
            {"metadata": {"name": job, "namespace": "default"}, "spec": {"minMember": 4}},
        )
    pods = {}
    for index in range(4):
        for job in ("tf-a", "tf-b"):
            pod = await client.create(PODS, worker(job, index))
            pods[pod["metadata"]["name"]] = pod
    cache, gangs = await started(client, gang_enabled=False)
    try:
        await until(lambda: len(cache.pods) == 8 and len(cache.podgroups) == 2)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/tf-a", "default/tf-b"}
        assert not gangs.ledger.by_node  # nothing reserved
        for name in ("tf-a-worker-0", "tf-b-worker-0"):
            assert (
                member_filter(gangs, pod_info(pods[name]), nodes) is None
            )  # the plain path decides
        member = pods["tf-a-worker-1"]
        args = BindingArgs(
            member["metadata"]["name"], "default", member["metadata"]["uid"], "gpu-1"
        )
        assert await GangVerbs(gangs).bind(args) is None  # not held: bound at once by the caller
    finally:
        await gangs.stop()
        await cache.stop()


async def test_a_vcjob_group_with_some_pods_already_is_still_enqueued(client: KubeClient) -> None:
    """A vcjob's PodGroup re-created around a restart may find one of its pods made already
    (for the group it replaces): Volcano's enqueue does not look at the pods (JobValid does not
    gate it), so the group goes Inqueue and the job controller creates the rest. Waiting for
    every member first would wait for ever: the controller creates them only once Inqueue."""
    await add_gpu_node(client, "gpu-0")
    await add_gpu_node(client, "gpu-1")
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "survivor",
        "uid": "0b7e5c7a-0000-4000-8000-000000000001",
        "controller": True,
    }
    await client.create(
        PODGROUPS,
        {
            "metadata": {"name": "survivor", "namespace": "default", "ownerReferences": [owner]},
            "spec": {"minMember": 2, "minTaskMember": {"worker": 2}},
        },
    )
    await client.create(PODS, worker("survivor", 1))
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 1 and len(cache.podgroups) == 1)
        gangs.schedule_pass()
        # The status write reaches the API server, and this cache through its watch.
        await until(lambda: cache.podgroups["default/survivor"].phase == "Inqueue")
        assert "default/survivor" not in gangs.admitted  # placed whole once its pods exist
        assert not gangs.ledger.by_node
    finally:
        await gangs.stop()
        await cache.stop()
