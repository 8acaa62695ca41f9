"""Subgroup gangs (a PodGroup's subGroupPolicy, a Job task's partitionPolicy): pods mapped to
subgroups as Volcano's scheduler maps them, and whole passes where each subgroup is placed
whole, within a HyperNode of its own networkTopology, and minSubGroups is enforced."""

from __future__ import annotations

from typing import Any

from core.cache import ClusterCache
from core.records import PodGroupRecord, PodRecord, QueueRecord
from plugins.framework.decisions import Admitted, Grown, Waiting
from plugins.model.subgroups import DEFAULT, subgroups_of
from tests.session_harness import run
from tests.unit.test_network_topology import PLAIN, POLICY, cluster, decide, domain_of

PARTITION = "volcano.sh/partition-id"
TASK = "volcano.sh/task-spec"


def pod(name: str, labels: dict[str, str], cpu: int = 3, group: str = "g") -> PodRecord:
    return PodRecord(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "labels": labels,
                "annotations": {"scheduling.k8s.io/group-name": group},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
            },
            "status": {"phase": "Pending"},
        }
    )


def _on(record: PodRecord, node: str) -> PodRecord:
    """`record` (made by `pod`) bound to `node` and running."""
    return PodRecord(
        {
            "metadata": {"name": record.name, "namespace": "ns", "uid": record.uid},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}],
            },
            "status": {"phase": "Running"},
        }
    )


def policy(**extra: Any) -> dict[str, Any]:
    return {
        "name": "worker",
        "subGroupSize": 4,
        "labelSelector": {"matchLabels": {TASK: "worker"}},
        "matchLabelKeys": [PARTITION],
        **extra,
    }


def test_pods_join_the_subgroup_of_their_partition_as_volcano_maps_them() -> None:
    pods = [
        pod("w0", {TASK: "worker", PARTITION: "0"}),
        pod("w1", {TASK: "worker", PARTITION: "1"}),
        pod("w2", {TASK: "worker", PARTITION: "0"}),
        pod("m", {TASK: "master", PARTITION: "0"}),  # the selector does not take it
        pod("x", {TASK: "worker"}),  # no partition label: no subgroup
    ]
    spec = {"subGroupPolicy": [policy(minSubGroups=2)]}
    found = subgroups_of(spec, pods)
    assert [(g.key, [p.name for p in g.members]) for g in found.groups] == [
        ("worker-0", ["w0", "w2"]),
        ("worker-1", ["w1"]),
        (DEFAULT, ["m", "x"]),
    ]
    assert found.groups[0].size == 4 and found.min_sub_groups == {"worker": 2}
    # A policy without matchLabelKeys forms no subgroup (Volcano's getSubJobMatchValues).
    bare = {"subGroupPolicy": [{"name": "all", "subGroupSize": 2}]}
    assert not subgroups_of(bare, pods).any


def partitioned(
    cache: ClusterCache, per: int, cpu: int, min_member: int | None = None, **extra: Any
) -> None:
    spec = {
        "minMember": 2 * per if min_member is None else min_member,
        "queue": "default",
        "subGroupPolicy": [policy(subGroupSize=per, **extra)],
    }
    meta = {"name": "g", "namespace": "ns", "uid": "uid-g"}
    cache.on_podgroup_add(PodGroupRecord({"metadata": meta, "spec": spec, "status": {}}))
    for part in range(2):
        for i in range(per):
            labels = {TASK: "worker", PARTITION: str(part)}
            cache.on_pod_add(pod(f"g-{part}-{i}", labels, cpu))


def test_two_subgroups_of_4_each_land_in_a_tier1_hypernode_of_their_own() -> None:
    cache = cluster()
    # n1 busy: s0 has three free nodes, so a partition placed anywhere would straddle s0, s1.
    busy = pod("busy", {}, 3, group="other")
    cache.on_pod_add(_on(busy, "n1"))
    partitioned(
        cache, 4, 3, minSubGroups=2, networkTopology={"mode": "hard", "highestTierAllowed": 1}
    )
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Admitted)
    assert "n1" not in decision.slots.values()
    leaves = [
        domain_of(cache, {decision.slots[f"ns/g-{part}-{i}"] for i in range(4)}, 1)
        for part in range(2)
    ]
    assert all(len(found) == 1 for found in leaves) and leaves[0] != leaves[1], leaves


def test_a_subgroup_too_big_for_any_hypernode_keeps_the_whole_gang_waiting() -> None:
    cache = cluster()
    partitioned(
        cache, 5, 3, minSubGroups=2, networkTopology={"mode": "hard", "highestTierAllowed": 1}
    )
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Waiting)
    assert "subgroup worker-0: networkTopology hard, highestTierAllowed 1" in decision.reason
    # Without network-topology-aware each subgroup is still whole, anywhere.
    assert isinstance(decide(cache, "ns/g", PLAIN), Admitted)


def test_min_sub_groups_needs_that_many_whole_subgroups() -> None:
    cache = cluster()
    partitioned(cache, 4, 1, 7, minSubGroups=2)
    cache.on_pod_delete(cache.pods["ns/g-1-3"])  # partition 1 has 3 of its 4 members
    decision = decide(cache, "ns/g", POLICY)
    assert isinstance(decision, Waiting)
    assert "subgroup worker-1: only 3 of its 4 missing members pending" in decision.reason
    # minSubGroups 1: the whole partition 0 is enough, and the 3 of partition 1 stay out.
    cache = cluster()
    partitioned(cache, 4, 1, 4, minSubGroups=1)
    cache.on_pod_delete(cache.pods["ns/g-1-3"])
    decision = decide(cache, "ns/g", POLICY)
    assert isinstance(decision, Admitted)
    assert sorted(decision.slots) == [f"ns/g-0-{i}" for i in range(4)]


def test_a_queue_that_cannot_take_a_whole_subgroup_takes_none_of_it() -> None:
    """Capability 6 cpu: the subgroup minSubGroups needs (2 x 2 cpu) and one member of the
    other would fit; a subgroup is whole or not at all, so only the first is placed."""
    cache = cluster()
    capped = {"metadata": {"name": "default", "uid": "q"}, "spec": {"capability": {"cpu": "6"}}}
    cache.on_queue_update(cache.queues["default"], QueueRecord(capped))
    partitioned(cache, 2, 2, 2, minSubGroups=1)
    decision = decide(cache, "ns/g", POLICY)
    assert isinstance(decision, Admitted)
    assert sorted(decision.slots) == ["ns/g-0-0", "ns/g-0-1"]


def test_backfill_never_grows_a_subgroup_member_alone() -> None:
    """An admitted gang's member of a subgroup waiting for a node is not placed one by one
    (its subgroup would be half placed); a member of no subgroup is."""
    cache = cluster()
    partitioned(cache, 2, 1, 2, minSubGroups=1)
    cache.on_pod_add(pod("g-x", {}, 1))  # in no subgroup: the default one
    waiting = {"ns/g": {"ns/g-1-0", "ns/g-x"}}
    result = run(POLICY, cache.live_view(), admitted={"ns/g"}, elastic_waiting=waiting)
    grown = [d.pod for d in result.decisions if isinstance(d, Grown)]
    assert grown == ["ns/g-x"]


def test_backfill_replaces_the_one_member_a_subgroup_misses_inside_its_hypernode() -> None:
    """Partition 1 runs 3 of its 4 members in s3 (the gang above its minimum): its 4th, the
    only one it misses, grows alone, within s3 (its subgroup's tier-1 HyperNode)."""
    cache = cluster()
    hard = {"mode": "hard", "highestTierAllowed": 1}
    partitioned(cache, 4, 3, 4, minSubGroups=1, networkTopology=hard)
    for i, node in enumerate(["n0", "n1", "n2", "n3"]):
        cache.on_pod_update(cache.pods[f"ns/g-0-{i}"], _running(f"g-0-{i}", "0", node))
    for i, node in enumerate(["n12", "n13", "n14"]):
        cache.on_pod_update(cache.pods[f"ns/g-1-{i}"], _running(f"g-1-{i}", "1", node))
    waiting = {"ns/g": {"ns/g-1-3"}}
    result = run(POLICY, cache.live_view(), admitted={"ns/g"}, elastic_waiting=waiting)
    [grown] = [d for d in result.decisions if isinstance(d, Grown)]
    assert grown.pod == "ns/g-1-3" and grown.node == "n15"


def _running(name: str, part: str, node: str) -> PodRecord:
    return PodRecord(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "labels": {TASK: "worker", PARTITION: part},
                "annotations": {"scheduling.k8s.io/group-name": "g"},
            },
            "spec": {
                "schedulerName": "volcano",
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}],
            },
            "status": {"phase": "Running"},
        }
    )


def test_backfill_grows_a_subgroup_missing_several_members_whole() -> None:
    """Partition 0 runs in s0, partition 1 lost 3 of its 4 members (one left, on n12): the
    3 grow together, within s3, or not at all."""
    cache = cluster()
    hard = {"mode": "hard", "highestTierAllowed": 1}
    partitioned(cache, 4, 3, 4, minSubGroups=1, networkTopology=hard)
    for i, node in enumerate(["n0", "n1", "n2", "n3"]):
        cache.on_pod_update(cache.pods[f"ns/g-0-{i}"], _running(f"g-0-{i}", "0", node))
    cache.on_pod_update(cache.pods["ns/g-1-0"], _running("g-1-0", "1", "n12"))
    waiting = {"ns/g": {"ns/g-1-1", "ns/g-1-2", "ns/g-1-3"}}
    result = run(POLICY, cache.live_view(), admitted={"ns/g"}, elastic_waiting=waiting)
    grown = {d.pod: d.node for d in result.decisions if isinstance(d, Grown)}
    assert sorted(grown) == ["ns/g-1-1", "ns/g-1-2", "ns/g-1-3"]
    assert set(grown.values()) == {"n13", "n14", "n15"}
    # Only two of the three exist (the third not made again yet): none grows.
    cache.on_pod_delete(cache.pods["ns/g-1-3"])
    fewer = {"ns/g": {"ns/g-1-1", "ns/g-1-2"}}
    result = run(POLICY, cache.live_view(), admitted={"ns/g"}, elastic_waiting=fewer)
    assert not [d for d in result.decisions if isinstance(d, Grown)]
