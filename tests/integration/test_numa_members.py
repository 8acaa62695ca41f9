"""A gang's members where nodes report NUMA cells (issue 50), against the embedded API server:
the planner gives each Guaranteed member a node whose cells can hold its cpus, and an elastic
member beyond minMember, which the extender's filter places itself, is refused where its cpus
cannot align though the node has the cpus (the numa-aware plugin in the conf)."""

from __future__ import annotations

from typing import Any

from core.api.nodeinfo import NODEINFO_API_VERSION
from core.cache import ClusterCache
from core.kube.client import NUMATOPOLOGIES, PODGROUPS, PODS, KubeClient
from core.numa import format_cpuset
from extender.binder import Binder
from extender.gangs import GangScheduler
from extender.ledger import GangLedger
from plugins.framework.config import DEFAULT_SCHEDULER_CONF, parse_scheduler_config
from plugins.framework.registry import build_policy
from tests.helpers import add_ready_node, member_filter, pod_info, until
from tests.integration.test_queue_scheduling import admit_until_stable


def topology(name: str, free: list[int]) -> dict[str, Any]:
    return {
        "apiVersion": NODEINFO_API_VERSION,
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {
                "CPUManagerPolicy": "static",
                "TopologyManagerPolicy": "single-numa-node",
            },
            "numares": {"cpu": {"allocatable": format_cpuset(free), "capacity": 32}},
            "cpuDetail": {
                str(c): {"numa": c // 16, "socket": c // 16, "core": c} for c in range(32)
            },
        },
    }


def member(index: int) -> dict[str, Any]:
    resources = {"cpu": "12", "memory": "1Gi"}
    return {
        "metadata": {
            "name": f"e-{index}",
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": "e"},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {"requests": resources, "limits": dict(resources)},
                }
            ]
        },
    }


async def test_an_elastic_member_goes_only_where_its_cpus_align(client: KubeClient) -> None:
    # `split`: 8 + 8 cpus free (16 in all); `open`: 16 + 4 free (20 in all).
    for name, free in (
        ("split", [*range(8), *range(16, 24)]),
        ("open", [*range(16), *range(16, 20)]),
    ):
        await add_ready_node(client, name, {"cpu": "32", "memory": "64Gi", "pods": "110"})
        await client.create(NUMATOPOLOGIES, topology(name, free))
    await client.create(
        PODGROUPS, {"metadata": {"name": "e", "namespace": "default"}, "spec": {"minMember": 1}}
    )
    for index in range(2):
        await client.create(PODS, member(index))
    cache = ClusterCache()
    cache.start(client)
    await cache.wait_synced(10)
    policy = build_policy(parse_scheduler_config(DEFAULT_SCHEDULER_CONF + "  - name: numa-aware\n"))
    gangs = GangScheduler(
        cache, GangLedger(cache.bump_node), client, Binder(client).bind, policy=policy
    )
    gangs.start(enqueue=False)
    try:
        await until(lambda: len(cache.pods) >= 2 and len(cache.numa) == 2)
        await admit_until_stable(client, gangs)
        placed = [cache.pods[f"default/e-{i}"].node for i in range(2)]
        # The planner put the gang's one required member in `open`'s 16-cpu cell.
        assert placed.count("open") == 1 and "split" not in placed, placed
        elastic = next(f"default/e-{i}" for i in range(2) if placed[i] is None)
        pod = await client.get(PODS, elastic.split("/")[1], "default")
        passed, _, unresolvable = member_filter(gangs, pod_info(pod), ["split", "open"])
        # `split` has 16 cpus free but no cell of 12; `open` 8 (4 + 4) once the first landed.
        assert passed == [] and set(unresolvable) == {"split", "open"}, unresolvable
        assert gangs.ledger.reservation_of(elastic) is None
    finally:
        await gangs.stop()
