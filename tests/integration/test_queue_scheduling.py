"""Queues in the extender's scheduling passes against the embedded API server: weighted fair
share at admission, capability, closed queues, reclaim of borrowed room (whole gangs, through
the Eviction API), guarantees, the filter's per-queue check for plain pods, Queue status.

Passes are driven one at a time; binding is done the way kube-scheduler would after filter
steered each admitted member to its slot (a Binding per member)."""

from __future__ import annotations

from typing import Any

from core.cache import ClusterCache
from core.kube.client import PODGROUPS, PODS, QUEUES, KubeClient
from extender.binder import Binder
from extender.gang_verbs import GangVerbs
from extender.gangs import GangScheduler
from extender.ledger import GangLedger
from tests.helpers import add_ready_node, pod_info, until

NODE_CPU = 4


async def add_nodes(client: KubeClient, count: int) -> list[str]:
    names = [f"node-{index}" for index in range(count)]
    for name in names:
        await add_ready_node(client, name, {"cpu": str(NODE_CPU), "memory": "16Gi", "pods": "110"})
    return names


async def add_queue(client: KubeClient, name: str, **spec: Any) -> None:
    await client.create(QUEUES, {"metadata": {"name": name}, "spec": {"weight": 1, **spec}})


async def add_gang(
    client: KubeClient,
    name: str,
    queue: str,
    members: int = 1,
    cpu: int = 1,
    *,
    priority: int = 0,
    preemptable: bool = True,
) -> list[dict[str, Any]]:
    await client.create(
        PODGROUPS,
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "minMember": members,
                "queue": queue,
                "minResources": {"cpu": str(cpu * members)},
            },
        },
    )
    pods = []
    for index in range(members):
        annotations = {"scheduling.k8s.io/group-name": name}
        if not preemptable:
            annotations["volcano.sh/preemptable"] = "false"
        pods.append(
            await client.create(PODS, pod_body(f"{name}-{index}", annotations, cpu, priority))
        )
    return pods


def pod_body(name: str, annotations: dict[str, str], cpu: int, priority: int) -> dict[str, Any]:
    """A pod of `default` asking `cpu` cores and 1Gi."""
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "priority": priority,
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}},
                }
            ],
        },
    }


async def started(client: KubeClient, expect_pods: int, expect_groups: int) -> GangScheduler:
    cache = ClusterCache()
    cache.start(client)
    await cache.wait_synced(10)
    gangs = GangScheduler(cache, GangLedger(cache.bump_node), client, Binder(client).bind)
    gangs.start(enqueue=False)
    await until(lambda: len(cache.pods) >= expect_pods and len(cache.podgroups) >= expect_groups)
    return gangs


async def bind_reserved(client: KubeClient, gangs: GangScheduler) -> int:
    """Bind every member holding a reservation to its slot (kube-scheduler's part)."""
    bound = 0
    for key in gangs.ledger.pod_keys():
        reservation = gangs.ledger.reservation_of(key)
        assert reservation is not None
        namespace, name = key.split("/")
        await client.bind_pod(namespace, name, reservation.node)
        bound += 1
    expected = set(gangs.ledger.pod_keys())
    await until(
        lambda: all(gangs.cache.pods[k].node is not None for k in expected if k in gangs.cache.pods)
    )
    return bound


async def admit_until_stable(client: KubeClient, gangs: GangScheduler) -> None:
    for _ in range(40):
        gangs.schedule_pass()
        if await bind_reserved(client, gangs) == 0:
            return
    raise AssertionError("admission did not settle")


def cpu_of(gangs: GangScheduler, queue: str) -> int:
    allocated = gangs.cache.queue_allocated.get(queue)
    return allocated.cpu if allocated is not None else 0


async def test_two_saturated_queues_converge_to_their_weights(client: KubeClient) -> None:
    await add_nodes(client, 4)  # 16 cpu
    await add_queue(client, "research", weight=3)
    await add_queue(client, "prod", weight=1)
    for index in range(20):
        await add_gang(client, f"r-{index:02d}", "research")
        await add_gang(client, f"p-{index:02d}", "prod")
    gangs = await started(client, 40, 40)
    await admit_until_stable(client, gangs)
    # 3:1 of 16 cpu: 12 and 4 (each gang is one 1-cpu pod).
    assert cpu_of(gangs, "research") == 12_000
    assert cpu_of(gangs, "prod") == 4_000
    waiting = [gangs.reasons[k] for k in gangs.reasons if k.startswith("default/p-")]
    assert len(waiting) == 16
    # What the queue holds now (4), what it would hold with the gang (5), what it deserves (4).
    said = "queue prod over its share: holds cpu 4, would hold 5 with this gang, deserves 4"
    assert all(said in w for w in waiting)
    assert gangs.queue_pass is not None
    assert gangs.queue_pass.model.shares["research"].deserved.cpu == 12_000
    # The Queue status carries what the queue holds and its PodGroup counts.
    assert gangs.status_writer is not None
    await gangs.status_writer.flush()
    research = await client.get(QUEUES, "research")
    assert research["status"]["allocated"]["cpu"] == "12"
    assert research["status"]["pending"] == 8
    await gangs.stop()


async def test_capability_caps_a_queue_and_a_closed_queue_admits_nothing(
    client: KubeClient,
) -> None:
    await add_nodes(client, 4)
    await add_queue(client, "capped", capability={"cpu": "3"})
    await client.create(
        QUEUES,
        {"metadata": {"name": "shut"}, "spec": {"weight": 1}, "status": {"state": "Closed"}},
    )
    await client.patch(QUEUES, "shut", {"status": {"state": "Closed"}}, subresource="status")
    for index in range(6):
        await add_gang(client, f"c-{index}", "capped")
    await add_gang(client, "s-0", "shut")
    gangs = await started(client, 7, 7)
    await until(lambda: gangs.cache.queues.get("shut") is not None)
    await until(lambda: gangs.cache.queues["shut"].state == "Closed")
    await admit_until_stable(client, gangs)
    assert cpu_of(gangs, "capped") == 3_000  # never beyond its capability
    assert cpu_of(gangs, "shut") == 0
    assert "queue shut is Closed" in gangs.reasons["default/s-0"]
    await gangs.stop()


async def test_a_borrowed_share_is_reclaimed_whole_gangs_and_never_below_guarantee(
    client: KubeClient,
) -> None:
    await add_nodes(client, 4)  # 16 cpu
    await add_queue(client, "research", weight=3)
    await add_queue(client, "prod", weight=1)
    await add_queue(client, "keeper", weight=1, guarantee={"resource": {"cpu": "4"}})
    # keeper uses exactly its guarantee; research borrows everything else (prod is idle).
    await add_gang(client, "k-0", "keeper", members=2, cpu=2)
    for index in range(6):
        await add_gang(client, f"r-{index}", "research", members=2, cpu=1)
    gangs = await started(client, 14, 7)
    await admit_until_stable(client, gangs)
    assert cpu_of(gangs, "research") == 12_000 and cpu_of(gangs, "keeper") == 4_000
    # prod gets work: a 2-cpu gang that cannot fit anywhere without reclaim. Deserved now
    # (16 cpu by weights 3:1:1, keeper floored at its guarantee): research 9.6, prod 3.2.
    await add_gang(client, "p-0", "prod", members=2, cpu=1)
    await until(lambda: len(gangs.cache.pods) == 16)
    gangs.schedule_pass()
    assert "default/p-0" in gangs.admitted
    # Evicted through the Eviction API: the pods terminate (no kubelet here to finish them).
    await until(lambda: any(p.deleting for p in gangs.cache.pods.values()))
    evicted = {p.name for p in gangs.cache.pods.values() if p.deleting}
    groups = {name.rsplit("-", 1)[0] for name in evicted}
    # One whole gang of the over-share queue: both its members, never keeper's pods (at its
    # guarantee) — just enough to make room for 2 cpu.
    assert len(groups) == 1 and next(iter(groups)).startswith("r-")
    assert evicted == {f"{g}-{i}" for g in groups for i in range(2)}
    assert gangs.queue_pass is not None and gangs.queue_pass.model.overused("research")
    await gangs.stop()


async def test_a_stuck_head_of_line_gang_does_not_stop_other_queues(client: KubeClient) -> None:
    await add_nodes(client, 2)  # 8 cpu
    await add_queue(client, "research", weight=1)
    await add_queue(client, "prod", weight=1)
    await add_gang(client, "huge", "research", members=4, cpu=3)  # 12 cpu: never fits
    await add_gang(client, "small", "research", members=1, cpu=1)
    await add_gang(client, "p-0", "prod", members=2, cpu=1)
    gangs = await started(client, 7, 3)
    await admit_until_stable(client, gangs)
    assert "default/huge" not in gangs.admitted
    assert {"default/small", "default/p-0"} <= gangs.admitted
    await gangs.stop()


async def test_filter_refuses_a_plain_pod_of_a_queue_over_its_share(client: KubeClient) -> None:
    nodes = await add_nodes(client, 2)  # 8 cpu
    await add_queue(client, "research", weight=1)
    await add_queue(client, "prod", weight=1)
    # research holds 6 cpu (three 2-cpu gangs); prod waits with a gang of its own.
    for index in range(3):
        await add_gang(client, f"r-{index}", "research", members=1, cpu=2)
    gangs = await started(client, 3, 3)
    await admit_until_stable(client, gangs)
    await add_gang(client, "p-0", "prod", members=2, cpu=2)
    plain = await client.create(
        PODS,
        {
            "metadata": {
                "name": "plain",
                "namespace": "default",
                "annotations": {"scheduling.volcano.sh/queue-name": "research"},
            },
            "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
            },
        },
    )
    await until(lambda: len(gangs.cache.pods) == 6)
    gangs.schedule_pass()
    assert GangVerbs(gangs).queues_contended()
    decision = GangVerbs(gangs).queue_gate(pod_info(plain), nodes)
    assert decision is not None
    assert decision.code == "UnschedulableAndUnresolvable" and decision.plugin == "proportion"
    passing, _failed, unresolvable = decision.split(nodes)
    assert passing == []
    assert unresolvable["node-0"] == (
        "queue research over its share: holds cpu 6, would hold 7 with this pod, deserves 4"
    )
    await gangs.stop()
