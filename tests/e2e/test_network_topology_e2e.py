"""Gangs placed within HyperNodes on `vulcan sim up` (a networkTopology, the conf naming
network-topology-aware): the scenarios of `tests.e2e.topology` on 16 hollow nodes of 4 cpu."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import SimCluster, start_cluster, wait_for
from tests.e2e.test_explain_e2e import explain
from tests.e2e.topology import (
    CONF,
    HARD_1,
    blocker,
    bound_nodes,
    hypernodes,
    leaves,
    leaves_of,
    partitioned_job,
    partitions_of,
    podgroup_gang,
    remove,
    spines_of,
    unschedulable,
    volcano_job,
)

LEAVES = leaves([f"hollow-node-{i}" for i in range(16)])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    state = tmp_path_factory.mktemp("sim-topology")
    conf = state / "topology.conf"
    conf.write_text(CONF)
    clusters = start_cluster(
        state / "cluster",
        "--nodes",
        "16",
        "--node-profile",
        "cpu=4,memory=16Gi",
        "--with-extender",
        "--with-controllers",
        "--extender-config",
        str(conf),
    )
    cluster = next(clusters)
    cluster.apply(hypernodes(LEAVES))
    try:
        yield cluster
    finally:
        clusters.close()


def test_a_hard_tier1_gang_of_4_lands_inside_one_tier1_hypernode(cluster: SimCluster) -> None:
    podgroup_gang(cluster, "hard4", 4, "2", HARD_1)
    nodes = wait_for("hard4 bound", lambda: bound_nodes(cluster, "job=hard4", 4), 60)
    assert len(leaves_of(nodes, LEAVES)) == 1, nodes
    remove(cluster, podgroup="hard4", selector="job=hard4")


def test_a_hard_tier1_gang_too_big_for_any_waits_with_the_reason(cluster: SimCluster) -> None:
    podgroup_gang(cluster, "hard6", 6, "3", HARD_1)
    message = wait_for("hard6's reason", lambda: unschedulable(cluster, "hard6"), 60)
    assert "networkTopology hard, highestTierAllowed 1: no HyperNode of tier <= 1" in message
    assert "the closest, s0 (tier 1, 4 nodes), has room for 4 of 6 required members" in message
    assert not any(p["spec"].get("nodeName") for p in cluster.pods(selector="job=hard6"))
    told = explain(cluster, "podgroup", "hard6").splitlines()
    assert told[0].startswith("podgroup default/hard6 is Inqueue: waits for one HyperNode domain:")
    assert "networkTopology hard, highestTierAllowed 1" in told[0], told[0]
    assert any("highestTierAllowed, now 1" in line for line in told), told
    remove(cluster, podgroup="hard6", selector="job=hard6")


def test_a_soft_gang_of_6_spans_two_tier1_hypernodes_under_one_spine(
    cluster: SimCluster,
) -> None:
    podgroup_gang(cluster, "soft6", 6, "3", {"mode": "soft"})
    nodes = wait_for("soft6 bound", lambda: bound_nodes(cluster, "job=soft6", 6), 60)
    assert len(leaves_of(nodes, LEAVES)) == 2 and len(spines_of(nodes, LEAVES)) == 1, nodes
    remove(cluster, podgroup="soft6", selector="job=soft6")


def test_a_volcano_job_with_a_network_topology_behaves_the_same(cluster: SimCluster) -> None:
    cluster.apply(volcano_job("vj4", 4, "2", HARD_1))
    selector = "volcano.sh/job-name=vj4"
    nodes = wait_for("vj4 bound", lambda: bound_nodes(cluster, selector, 4), 60)
    assert len(leaves_of(nodes, LEAVES)) == 1, nodes
    remove(cluster, job="vj4", selector=selector)
    cluster.apply(volcano_job("vj6", 6, "3", HARD_1))

    def reason() -> str | None:
        groups = cluster.get("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups")
        names = [g["metadata"]["name"] for g in groups["items"] if "vj6" in g["metadata"]["name"]]
        return unschedulable(cluster, names[0]) if names else None

    message = wait_for("vj6's reason", reason, 60)
    assert "no HyperNode of tier <= 1 can hold the gang" in message
    remove(cluster, job="vj6", selector="volcano.sh/job-name=vj6")


def test_two_partitions_of_4_each_land_in_a_tier1_hypernode_of_their_own(
    cluster: SimCluster,
) -> None:
    cluster.apply(blocker(LEAVES["s0"][1]))
    cluster.apply(partitioned_job("parts", "3", HARD_1))
    selector = "volcano.sh/job-name=parts"
    found = wait_for("parts bound", lambda: partitions_of(cluster, selector), 60)
    leaves = [leaves_of(nodes, LEAVES) for nodes in found.values()]
    assert len(found) == 2 and all(len(f) == 1 for f in leaves), found
    assert leaves[0] != leaves[1], found
    assert all(not (nodes & {LEAVES["s0"][1]}) for nodes in found.values())
    remove(cluster, job="parts", selector=selector)
    remove(cluster, selector="job=blocker")
