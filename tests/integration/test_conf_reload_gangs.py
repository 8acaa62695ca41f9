"""A conf reloaded under a running gang scheduler (`GangScheduler.use_conf`, what the extender's
conf watcher applies) changes the next pass's decisions and keeps what is in flight: the gang
ledger's reservations, the admitted gangs and the binds held at the barrier."""

from __future__ import annotations

import asyncio
from typing import Any

from core.cache import ClusterCache
from core.kube.client import PODGROUPS, PODS, KubeClient
from extender.binder import Binder
from extender.conf_reload import build_conf
from extender.gang_options import GangOptions
from extender.gang_verbs import GangVerbs
from extender.gangs import GangScheduler
from extender.ledger import GangLedger
from extender.protocol import BindingArgs
from plugins.framework.config import DEFAULT_SCHEDULER_CONF
from tests.helpers import add_ready_node, until

# Volcano's default conf without the gang plugin: admission is enqueue alone.
NO_GANG = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: proportion
"""


def worker(job: str, index: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{job}-worker-{index}",
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": job, "volcano.sh/task-spec": "w"},
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ]
        },
    }


async def test_a_reloaded_conf_decides_the_next_pass_and_keeps_held_binds(
    client: KubeClient,
) -> None:
    nodes = [f"gpu-{i}" for i in range(4)]
    for name in nodes:
        await add_ready_node(
            client, name, {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1"}
        )
    pods: dict[str, dict[str, Any]] = {}
    for job in ("tf-a", "tf-b"):
        await client.create(
            PODGROUPS,
            {"metadata": {"name": job, "namespace": "default"}, "spec": {"minMember": 4}},
        )
        for index in range(4):
            pod = await client.create(PODS, worker(job, index))
            pods[pod["metadata"]["name"]] = pod
    cache = ClusterCache()
    cache.start(client)
    await cache.wait_synced(10)
    start = build_conf(DEFAULT_SCHEDULER_CONF)
    gangs = GangScheduler(
        cache,
        GangLedger(cache.bump_node),
        client,
        Binder(client).bind,
        options=GangOptions(gang_timeout=30),
        policy=start.policy,
        placement=start.framework.gang_placement,
    )
    gangs.start(enqueue=False)
    try:
        await until(lambda: len(cache.pods) == 8 and len(cache.podgroups) == 2)
        gangs.schedule_pass()
        assert gangs.admitted == {"default/tf-a"}  # the GPUs hold one gang of four
        slots = {
            f"tf-a-worker-{i}": gangs.ledger.reservation_of(f"default/tf-a-worker-{i}")
            for i in range(4)
        }
        binds = []
        for i in range(3):
            name = f"tf-a-worker-{i}"
            args = BindingArgs(name, "default", pods[name]["metadata"]["uid"], slots[name].node)
            binds.append(asyncio.create_task(GangVerbs(gangs).bind(args)))
        await until(lambda: gangs.barrier.held("default/tf-a") == 3)

        new = build_conf(NO_GANG)
        gangs.use_conf(new.policy, new.framework.gang_placement)
        gangs.schedule_pass()
        # Without gang, tf-b is admitted on enqueue alone (its members then placed one by
        # one); under the old conf it waited for four free GPUs.
        assert gangs.admitted == {"default/tf-a", "default/tf-b"}
        # tf-a's reservations and its held binds survived the switch ...
        for name, slot in slots.items():
            assert gangs.ledger.reservation_of(f"default/{name}") == slot
        assert gangs.barrier.held("default/tf-a") == 3
        for i in range(3):
            live = await client.get(PODS, f"tf-a-worker-{i}", "default")
            assert not live["spec"].get("nodeName")
        # ... and it still binds whole: the fourth member releases all four together.
        last = "tf-a-worker-3"
        assert await GangVerbs(gangs).bind(
            BindingArgs(last, "default", pods[last]["metadata"]["uid"], slots[last].node)
        )
        assert all(await asyncio.gather(*binds))
        for i in range(4):
            live = await client.get(PODS, f"tf-a-worker-{i}", "default")
            assert live["spec"]["nodeName"] == slots[f"tf-a-worker-{i}"].node
    finally:
        await gangs.stop()
        await cache.stop()
