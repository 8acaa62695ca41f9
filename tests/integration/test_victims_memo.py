"""What reclaim and preempt may evict is built once per state of the cluster
(`GangScheduler.victims_for`) and is never stale: a change the cache hears of, or an eviction
vulcan asked for, is seen by the next question."""

from __future__ import annotations

from core.kube.client import PODS, KubeClient
from tests.helpers import until
from tests.integration.test_gang_scheduler import worker
from tests.integration.test_gang_whole_again import GROUP, evicted_whole, running_gang


async def test_the_victims_follow_the_cluster_and_vulcans_own_evictions(
    client: KubeClient,
) -> None:
    cache, gangs, slots = await running_gang(client, 2)
    try:
        asked_by = "default/other"
        units = gangs.victims_for(cache.live_view(), asked_by)
        assert [u.group for u in units] == [GROUP]
        assert gangs.victims_for(cache.live_view(), GROUP) == []  # never its own members
        # A pod of no gang bound meanwhile is a unit of its own.
        plain = worker("solo", 0)
        plain["metadata"]["annotations"] = {}
        plain["spec"]["nodeName"] = slots[0]
        await client.create(PODS, plain)
        await until(lambda: "default/solo-worker-0" in cache.pods)
        units = gangs.victims_for(cache.live_view(), asked_by)
        assert sorted(tuple(sorted(u.pods)) for u in units) == [
            ("default/solo-worker-0",),
            ("default/tf-worker-0", "default/tf-worker-1"),
        ]
        # Evicted by vulcan (the API server has not answered): no longer a victim.
        evicted_whole(cache, gangs, ("default/tf-worker-0", "default/tf-worker-1"))
        units = gangs.victims_for(cache.live_view(), asked_by)
        assert [u.pods for u in units] == [("default/solo-worker-0",)]
    finally:
        await gangs.stop()
        await cache.stop()
