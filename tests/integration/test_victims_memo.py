"""What reclaim and preempt may evict is built once per state of the cluster (the scheduling
memo's victims) and is never stale: a change the cache hears of, or an eviction vulcan asked
for, is seen by the next question."""

from __future__ import annotations

from core.kube.client import PODS, KubeClient
from extender.gangs import GangScheduler
from plugins.model.victims import VictimUnit
from tests.helpers import until
from tests.integration.test_gang_scheduler import worker
from tests.integration.test_gang_whole_again import GROUP, evicted_whole, running_gang


def victims_for(gangs: GangScheduler, key: str) -> list[VictimUnit]:
    """What a session would offer reclaim and preempt for gang `key` now."""
    units_of = gangs.runner.memo.victims(gangs.pass_input())
    queues = sorted(gangs.cache.bound_by_queue)
    return [u for queue in queues for u in units_of(queue) if u.group != key]


async def test_the_victims_follow_the_cluster_and_vulcans_own_evictions(
    client: KubeClient,
) -> None:
    cache, gangs, slots = await running_gang(client, 2)
    try:
        asked_by = "default/other"
        units = victims_for(gangs, asked_by)
        assert [u.group for u in units] == [GROUP]
        assert victims_for(gangs, GROUP) == []  # never its own members
        # A pod of no gang bound meanwhile is a unit of its own.
        plain = worker("solo", 0)
        plain["metadata"]["annotations"] = {}
        plain["spec"]["nodeName"] = slots[0]
        await client.create(PODS, plain)
        await until(lambda: "default/solo-worker-0" in cache.pods)
        units = victims_for(gangs, asked_by)
        assert sorted(tuple(sorted(u.pods)) for u in units) == [
            ("default/solo-worker-0",),
            ("default/tf-worker-0", "default/tf-worker-1"),
        ]
        # Evicted by vulcan (the API server has not answered): no longer a victim.
        evicted_whole(cache, gangs, ("default/tf-worker-0", "default/tf-worker-1"))
        units = victims_for(gangs, asked_by)
        assert [u.pods for u in units] == [("default/solo-worker-0",)]
    finally:
        await gangs.stop()
        await cache.stop()
