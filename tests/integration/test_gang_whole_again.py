"""The extender's gang scheduler against the embedded API server (issue 31 item 1): a running gang
whose members are deleted and made again under the same names is admitted again as a whole —
no slots for single members, its new binds held until quorum — and the PodGroup and the pods
say what happened (GangBroken)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

from core.kube.client import EVENTS, PODGROUPS, PODS, KubeClient, Resource
from core.records import PodGroupRecord, PodRecord
from core.resources import ResourceVector
from extender.binder import BindError
from extender.gang_verbs import GangVerbs
from extender.gangs import GangScheduler
from extender.protocol import BindingArgs
from plugins.model.victims import VictimUnit
from tests.helpers import member_filter, pod_info, until
from tests.integration.test_gang_scheduler import add_gpu_node, started, worker

GROUP = "default/tf"
PDBS = Resource("policy", "v1", "poddisruptionbudgets", True, "PodDisruptionBudget")


async def bind(gangs: Any, pod: dict[str, Any], node: str) -> bool:
    meta = pod["metadata"]
    return await GangVerbs(gangs).bind(BindingArgs(meta["name"], "default", meta["uid"], node))


async def test_a_gang_that_loses_its_members_is_admitted_whole_again(client: KubeClient) -> None:
    nodes = [f"gpu-{i}" for i in range(4)]
    for name in nodes:
        await add_gpu_node(client, name)
    await client.create(
        PODGROUPS, {"metadata": {"name": "tf", "namespace": "default"}, "spec": {"minMember": 4}}
    )
    pods = [await client.create(PODS, worker("tf", i)) for i in range(4)]
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 4 and GROUP in cache.podgroups)
        gangs.schedule_pass()
        assert GROUP in gangs.admitted
        slots = [gangs.ledger.reservation_of(f"default/tf-worker-{i}").node for i in range(4)]
        assert all(
            await asyncio.gather(*(bind(gangs, p, n) for p, n in zip(pods, slots, strict=True)))
        )
        await until(lambda: all(cache.pods[f"default/tf-worker-{i}"].node for i in range(4)))
        assert gangs.barrier.committed(GROUP)

        # Its pods are deleted (an eviction, a restart of its task, a user) and made again.
        for i in range(4):
            await client.delete(PODS, f"tf-worker-{i}", "default", grace_period=0)
        await until(lambda: not gangs.barrier.committed(GROUP))
        assert GROUP not in gangs.admitted
        assert gangs.ledger.of_group(GROUP) == []
        # A plain pod takes two of the four GPUs meanwhile.
        for name in ("gpu-0", "gpu-1"):
            squatter = worker("squat", 0)
            squatter["metadata"] = {"name": f"squat-{name}", "namespace": "default"}
            squatter["spec"]["nodeName"] = name
            await client.create(PODS, squatter)
        again = [await client.create(PODS, worker("tf", i)) for i in range(4)]
        await until(lambda: len(cache.pods_by_group.get(GROUP, ())) == 4 and len(cache.pods) == 6)
        gangs.schedule_pass()
        # Two members would fit: none is let through, each is refused with the gang's reason.
        assert GROUP not in gangs.admitted
        passing, _failed, unresolvable = member_filter(gangs, pod_info(again[0]), nodes)
        assert passing == []
        assert "gang default/tf: waiting for admission" in unresolvable["gpu-2"]
        assert gangs.ledger.of_group(GROUP) == []

        # The GPUs come back: the gang is admitted whole (four slots) and binds together.
        for name in ("gpu-0", "gpu-1"):
            await client.delete(PODS, f"squat-{name}", "default", grace_period=0)
        await until(lambda: len(cache.pods) == 4)
        gangs.schedule_pass()
        assert GROUP in gangs.admitted
        assert len(gangs.ledger.of_group(GROUP)) == 4
        slots = [gangs.ledger.reservation_of(f"default/tf-worker-{i}").node for i in range(4)]
        first = asyncio.create_task(bind(gangs, again[0], slots[0]))
        await until(lambda: gangs.barrier.held(GROUP) == 1)  # held, not bound at once
        assert not (await client.get(PODS, "tf-worker-0", "default"))["spec"].get("nodeName")
        rest = [bind(gangs, p, n) for p, n in zip(again[1:], slots[1:], strict=True)]
        assert all(await asyncio.gather(first, *rest))

        await gangs.recorder.flush()  # type: ignore[union-attr]
        events = (await client.list(EVENTS, "default"))["items"]
        broken = [e for e in events if e.get("reason") == "GangBroken"]
        on_group = [e for e in broken if e["regarding"]["kind"] == "PodGroup"]
        assert len(on_group) == 1, broken
        assert on_group[0]["type"] == "Warning"
        assert on_group[0]["note"].startswith("gang default/tf is no longer whole: ")
        assert on_group[0]["note"].endswith("its next placement is all-or-nothing again")
        # The members still there when it broke say it too (the first one was gone already).
        assert {e["regarding"]["name"] for e in broken if e["regarding"]["kind"] == "Pod"} == {
            f"tf-worker-{i}" for i in range(1, 4)
        }
    finally:
        await gangs.stop()
        await cache.stop()


async def running_gang(client: KubeClient, members: int) -> tuple[Any, GangScheduler, list[str]]:
    """Four GPU nodes and gang tf of `members` (its minMember), admitted and bound whole as
    kube-scheduler would bind it: (cache, gang scheduler, the nodes of its members)."""
    for index in range(4):
        await add_gpu_node(client, f"gpu-{index}")
    await client.create(
        PODGROUPS,
        {"metadata": {"name": "tf", "namespace": "default"}, "spec": {"minMember": members}},
    )
    pods = [await client.create(PODS, worker("tf", i)) for i in range(members)]
    cache, gangs = await started(client)
    keys = [f"default/tf-worker-{i}" for i in range(members)]
    await until(lambda: len(cache.pods) == members and GROUP in cache.podgroups)
    gangs.schedule_pass()
    slots = [gangs.ledger.reservation_of(key).node for key in keys]
    assert all(await asyncio.gather(*(bind(gangs, p, n) for p, n in zip(pods, slots, strict=True))))
    await until(lambda: all(cache.pods[key].node for key in keys))
    return cache, gangs, slots


def _unit(pods: tuple[str, ...], group: str | None) -> VictimUnit:
    """Priority-0 `pods` of queue default as one victim: a whole gang when `group` is set."""
    return VictimUnit(
        group=group,
        queue="default",
        priority=0,
        pods=pods,
        freed=ResourceVector(),
        preemptable=True,
        critical=False,
        breaks_gang=group is not None,
        creation="",
    )


def evicted_whole(cache: Any, gangs: GangScheduler, pods: tuple[str, ...]) -> VictimUnit:
    """A higher-priority gang's admission evicts `pods` of gang tf whole, as
    `DecisionApplier` applies it; the API server has not answered yet."""
    victims = _unit(pods, GROUP)
    snapshot = cache.live_view()
    gangs.evictor.evict_units(snapshot, snapshot.podgroups[GROUP], 1000, "preempt", [victims])
    gangs.applier.evicted_whole([victims], "preempted whole for gang default/hi")
    return victims


async def test_a_member_binding_just_after_its_gang_is_evicted_whole_is_held(
    client: KubeClient,
) -> None:
    """The eviction is asked, the cache still shows the victims bound and live (the DELETEs are
    in flight), and a member that passed filter while the gang was admitted asks to bind: its
    victims must not count towards its new quorum (the issue-31 soak, seed 2026: gang-88 bound
    one member of three a few milliseconds after it was preempted whole, and stayed so)."""
    cache, gangs, slots = await running_gang(client, 3)
    try:
        extra = await client.create(PODS, worker("tf", 3))  # an elastic member, still pending
        await until(lambda: "default/tf-worker-3" in cache.pods)
        assert gangs.barrier.committed(GROUP)
        free = next(f"gpu-{i}" for i in range(4) if f"gpu-{i}" not in slots)
        evicted_whole(cache, gangs, tuple(f"default/tf-worker-{i}" for i in range(3)))
        late = asyncio.create_task(bind(gangs, extra, free))
        await until(lambda: gangs.barrier.held(GROUP) == 1 or late.done())
        assert not late.done(), "the elastic member bound alone on its evicted peers' strength"
        assert not (await client.get(PODS, "tf-worker-3", "default"))["spec"].get("nodeName")
        gangs.barrier.release(GROUP, "test over")
        with contextlib.suppress(BindError):
            await late
    finally:
        await gangs.stop()
        await cache.stop()


async def test_a_gang_evicted_whole_is_not_admitted_again_on_its_victims(
    client: KubeClient,
) -> None:
    """The next pass comes before the API server's word on the evictions (a busy control
    plane): the victims are Releasing from the moment their eviction is asked, as in Volcano's
    cache, so the gang is not admitted again on the strength of its own victims (issue-31
    soak: gang-1191 "its 2 bound members hold what it needs" 0.3 s after its preemption)."""
    cache, gangs, _ = await running_gang(client, 2)
    try:
        gangs.schedule_pass()
        assert GROUP in gangs.admitted
        keys = ("default/tf-worker-0", "default/tf-worker-1")
        versions = {k: cache.pods[k].rv for k in keys}
        evicted_whole(cache, gangs, keys)
        gangs.schedule_pass()  # before any watch event of the evictions
        assert GROUP not in gangs.admitted, gangs.reasons.get(GROUP)
        assert all(cache.pods[k].deleting for k in keys)
        # The API server's own word (a deletionTimestamp: no kubelet here to finish the pods)
        # replaces the assumption, and says the same.
        await until(lambda: all(cache.pods[k].rv != versions[k] for k in keys))
        assert all(cache.pods[k].deleting for k in keys)
        gangs.schedule_pass()
        assert GROUP not in gangs.admitted
    finally:
        await gangs.stop()
        await cache.stop()


async def test_a_status_write_before_the_deletion_does_not_make_an_evicted_gang_whole(
    client: KubeClient,
) -> None:
    """The API server's Eviction writes the pod's DisruptionTarget condition, then deletes it:
    two watch events. The first (or any status write on its way) used to replace the cache's
    assumption that the victim is being deleted, so the next pass saw the gang evicted whole
    placed whole again, adopted and committed it, and its elastic member bound at once; the
    deletions then left it half placed (issue 31's soak, gang-1041: 2 of its 4 bound). The
    victims stay Releasing until the API server shows them deleted."""
    cache, gangs, _ = await running_gang(client, 2)
    try:
        await client.create(PODS, worker("tf", 2))  # an elastic member, pending
        await until(lambda: "default/tf-worker-2" in cache.pods)
        gangs.schedule_pass()
        assert GROUP in gangs.admitted and gangs.barrier.committed(GROUP)
        keys = ("default/tf-worker-0", "default/tf-worker-1")
        disrupted = {}
        for key in keys:
            obj = await client.get(PODS, key.split("/")[1], "default")
            status = obj.setdefault("status", {})
            status["phase"] = "Running"
            status["conditions"] = [
                *status.get("conditions", ()),
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"},
            ]
            disrupted[key] = PodRecord(obj)
        evicted_whole(cache, gangs, keys)
        # The informer delivers the condition before the deletion (no await in between: the
        # evictions' own events cannot come first).
        for key in keys:
            cache.on_pod_update(cache.pods[key], disrupted[key])
            assert cache.pods[key].deleting
        gangs.schedule_pass()
        assert GROUP not in gangs.admitted, gangs.reasons.get(GROUP)
        assert not gangs.barrier.committed(GROUP)
        await until(lambda: all(k not in cache.pods or cache.pods[k].deleting for k in keys))
        gangs.schedule_pass()
        assert GROUP not in gangs.admitted
        assert not gangs.barrier.committed(GROUP)
    finally:
        await gangs.stop()
        await cache.stop()


async def test_a_refused_eviction_gives_the_pod_back_as_the_api_server_shows_it(
    client: KubeClient,
) -> None:
    """A disruption budget refuses the eviction: the pod assumed Releasing is live again."""
    await add_gpu_node(client, "gpu-0")
    guarded = worker("db", 0)
    guarded["metadata"]["labels"] = {"app": "db"}
    guarded["spec"]["nodeName"] = "gpu-0"
    await client.create(PODS, guarded)
    await client.patch(
        PODS,
        "db-worker-0",
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        "default",
        subresource="status",
    )
    await client.create(
        PDBS,
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
    )
    # A refusal is retried as a 429 (as kubectl drain does): once here, to be quick.
    client.options = dataclasses.replace(client.options, max_retries=1, retry_initial=0.01)
    cache, gangs = await started(client)
    key = "default/db-worker-0"
    try:
        await until(lambda: key in cache.pods and cache.pods[key].phase == "Running")
        victim = _unit((key,), None)
        snapshot = cache.live_view()
        group = PodGroupRecord({"metadata": {"name": "hi", "namespace": "default"}, "spec": {}})
        gangs.evictor.evict_units(snapshot, group, 1000, "preempt", [victim])
        assert cache.pods[key].deleting  # assumed at once
        await until(lambda: not cache.pods[key].deleting)  # refused: as the API server shows it
        assert key not in gangs.evictor.releasing
        assert cache.pods[key].node == "gpu-0"
    finally:
        await gangs.stop()
        await cache.stop()
