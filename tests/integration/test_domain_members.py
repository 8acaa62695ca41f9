"""A gang member the extender's filter places itself (an elastic member beyond minMember, or one
whose slot is not usable) stays within the HyperNode of the gang's other members (issue 50's
soak: such members landed on any candidate with room, splitting a `hard` gang across its
domain), and within its subgroup's; a soft gang's may go anywhere. Against the embedded API
server, with network-topology-aware in the conf."""

from __future__ import annotations

from typing import Any

from bench.soak_topology import hypernode_manifest
from core.cache import ClusterCache
from core.kube.client import HYPERNODES, PODGROUPS, PODS, KubeClient
from extender.binder import Binder
from extender.gangs import GangScheduler
from extender.ledger import GangLedger
from plugins.framework.config import DEFAULT_SCHEDULER_CONF, parse_scheduler_config
from plugins.framework.registry import build_policy
from tests.helpers import add_ready_node, member_filter, pod_info, until
from tests.integration.test_queue_scheduling import admit_until_stable

NODES = ["n0", "n1", "n2", "n3"]
CONF = DEFAULT_SCHEDULER_CONF + "  - name: network-topology-aware\n"


def member(group: str, index: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "1Gi"}
    return {
        "metadata": {
            "name": f"{group}-{index}",
            "namespace": "default",
            "labels": labels or {},
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "containers": [{"name": "main", "image": "x", "resources": {"requests": resources}}]
        },
    }


async def started(client: KubeClient, pods: int) -> GangScheduler:
    """4 nodes of 16 cpu, a tier-1 HyperNode each, tier-2 ones of two (t0: n0 n1; t1: n2 n3)."""
    for name in NODES:
        await add_ready_node(client, name, {"cpu": "16", "memory": "64Gi", "pods": "110"})
        await client.create(HYPERNODES, hypernode_manifest(f"leaf-{name}", 1, [name]))
    await client.create(
        HYPERNODES, hypernode_manifest("t0", 2, ["leaf-n0", "leaf-n1"], kind="HyperNode")
    )
    await client.create(
        HYPERNODES, hypernode_manifest("t1", 2, ["leaf-n2", "leaf-n3"], kind="HyperNode")
    )
    cache = ClusterCache()
    cache.start(client)
    await cache.wait_synced(10)
    policy = build_policy(parse_scheduler_config(CONF))
    gangs = GangScheduler(
        cache, GangLedger(cache.bump_node), client, Binder(client).bind, policy=policy
    )
    gangs.start(enqueue=False)
    await until(lambda: len(cache.pods) >= pods and len(cache.topology.tree().domains) == 6)
    return gangs


async def elastic_filter(
    gangs: GangScheduler, client: KubeClient, group: str
) -> tuple[set[str], Any]:
    """The filter's answer for the member the passes left unbound (beyond minMember, a
    nodeSelector no node matched then: no slot), offered every node with the bound members'
    nodes last (a filter taking the first node with room would leave them)."""
    await admit_until_stable(client, gangs)
    nodes = {i: gangs.cache.pods[f"default/{group}-{i}"].node for i in range(3)}
    assert nodes[2] is None and None not in (nodes[0], nodes[1]), nodes
    used = {nodes[0], nodes[1]}
    candidates = [n for n in NODES if n not in used] + sorted(used)  # type: ignore[arg-type]
    pod = await client.get(PODS, f"{group}-2", "default")
    return used, member_filter(gangs, pod_info(pod), candidates)  # type: ignore[return-value]


async def members(client: KubeClient, group: str, labels: dict[str, str] | None = None) -> None:
    for index in range(3):
        pod = member(group, index, labels)
        if index == 2:
            pod["spec"]["nodeSelector"] = {"zone": "later"}
        await client.create(PODS, pod)


async def test_an_elastic_member_of_a_hard_gang_stays_in_its_hypernode(client: KubeClient) -> None:
    spec = {"minMember": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    await client.create(
        PODGROUPS, {"metadata": {"name": "h", "namespace": "default"}, "spec": spec}
    )
    await members(client, "h")
    gangs = await started(client, 3)
    try:
        used, (passed, _, _) = await elastic_filter(gangs, client, "h")
        assert len(used) == 1 and passed == sorted(used), (used, passed)
    finally:
        await gangs.stop()


async def test_an_elastic_member_of_a_soft_gang_goes_anywhere(client: KubeClient) -> None:
    spec = {"minMember": 2, "networkTopology": {"mode": "soft"}}
    await client.create(
        PODGROUPS, {"metadata": {"name": "s", "namespace": "default"}, "spec": spec}
    )
    await members(client, "s")
    gangs = await started(client, 3)
    try:
        used, (passed, _, _) = await elastic_filter(gangs, client, "s")
        assert passed and passed[0] not in used, (used, passed)
    finally:
        await gangs.stop()


async def test_a_member_of_a_subgroup_stays_in_its_subgroups_hypernode(
    client: KubeClient,
) -> None:
    # Subgroups of 2 within a tier-1 HyperNode each; the gang needs one whole subgroup
    # (minMember 2), so the other subgroup's members are elastic.
    policy = {
        "name": "p",
        "subGroupSize": 1,
        "matchLabelKeys": ["part"],
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    spec = {"minMember": 2, "subGroupPolicy": [policy]}
    await client.create(
        PODGROUPS, {"metadata": {"name": "g", "namespace": "default"}, "spec": spec}
    )
    await members(client, "g", {"part": "0"})
    gangs = await started(client, 3)
    try:
        used, (passed, _, _) = await elastic_filter(gangs, client, "g")
        assert len(used) == 1 and passed == sorted(used), (used, passed)
    finally:
        await gangs.stop()


async def test_a_member_not_offered_its_slot_trades_for_one_in_its_domain(
    client: KubeClient,
) -> None:
    # kube-scheduler offers a sample of the nodes; a hard gang's offered domain nodes are full
    # of its own slots. A member offered only such a node takes the slot of a member that
    # kube-scheduler was not steered to yet, which gets the member's slot in exchange.
    spec = {"minMember": 8, "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}
    await client.create(
        PODGROUPS, {"metadata": {"name": "t", "namespace": "default"}, "spec": spec}
    )
    for index in range(8):
        await client.create(PODS, member("t", index))
    gangs = await started(client, 8)
    try:
        gangs.schedule_pass()
        ledger = gangs.ledger
        slots = {f"default/t-{i}": ledger.slot_of(f"default/t-{i}") for i in range(8)}
        home, other = sorted(set(slots.values()))  # 32 cpu: both nodes of one tier-2 domain
        outside = [n for n in NODES if n not in (home, other)]
        on_home = sorted(k for k, n in slots.items() if n == home)
        on_other = sorted(k for k, n in slots.items() if n == other)
        assert len(on_home) == len(on_other) == 4

        async def offer(pod_key: str, nodes: list[str]) -> Any:
            pod = await client.get(PODS, pod_key.split("/")[1], "default")
            return member_filter(gangs, pod_info(pod), nodes)

        for pod_key in on_other[:3]:  # steered onto their own slots
            assert (await offer(pod_key, [other]))[0] == [other]
        traded = on_home[0]
        passed, _, _ = await offer(traded, [*outside, other])
        assert passed == [other]
        assert ledger.slot_of(traded) == other and ledger.slot_of(on_other[3]) == home
        # Every slot on `other` is now steered: nothing is left to trade.
        passed, _, refused = await offer(on_home[1], [*outside, other])
        assert passed == [] and "within the HyperNode" in refused[other], refused
        assert ledger.slot_of(on_home[1]) == home
        # The member that gave its slot away passes on the one it was given.
        assert (await offer(on_other[3], [home]))[0] == [home]
    finally:
        await gangs.stop()


async def test_no_trade_with_a_member_whose_constraints_differ(client: KubeClient) -> None:
    # t-7 tolerates a taint the others do not: a slot it could take another may not.
    spec = {"minMember": 8, "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}
    await client.create(
        PODGROUPS, {"metadata": {"name": "t", "namespace": "default"}, "spec": spec}
    )
    for index in range(8):
        pod = member("t", index)
        if index == 7:
            pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        await client.create(PODS, pod)
    gangs = await started(client, 8)
    try:
        gangs.schedule_pass()
        ledger = gangs.ledger
        slots = {f"default/t-{i}": ledger.slot_of(f"default/t-{i}") for i in range(8)}
        odd = "default/t-7"
        other = next(n for n in set(slots.values()) if n != slots[odd])
        home = slots[odd]
        outside = [n for n in NODES if n not in (home, other)]

        async def offer(pod_key: str, nodes: list[str]) -> Any:
            pod = await client.get(PODS, pod_key.split("/")[1], "default")
            return member_filter(gangs, pod_info(pod), nodes)

        on_other = sorted(k for k, n in slots.items() if n == other)
        for pod_key in on_other[:-1]:  # every slot on `other` but one steered
            assert (await offer(pod_key, [other]))[0] == [other]
        passed, _, _ = await offer(odd, [*outside, other])
        assert passed == [] and ledger.slot_of(odd) == home
        plain = next(k for k, n in slots.items() if n == home and k != odd)
        assert (await offer(plain, [*outside, other]))[0] == [other]  # alike: traded
    finally:
        await gangs.stop()
