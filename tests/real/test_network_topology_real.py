"""Gangs placed within HyperNodes on a real control plane (the second-scheduler install, its
extender's conf naming network-topology-aware): the scenarios of `tests.e2e.topology` on 16
hollow nodes of 4 cpu in 4 tier-1 HyperNodes under 2 spines, written with kubectl; and a Job
of two partitions, each a subgroup gang within a tier-1 HyperNode of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.framework.config import parse_scheduler_config
from tests.e2e.conftest import wait_for
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
    spines_of,
    unschedulable,
    volcano_job,
)
from tests.real.conftest import RealCluster

pytestmark = pytest.mark.real

INSTALL_MODE = "second-scheduler"
NODE_PROFILES = ["count=16,cpu=4,memory=16Gi"]
CONF_FILE = Path(__file__).parent / "fixtures" / "network-topology-conf.yaml"
EXTENDER_FLAGS = (f"--config={CONF_FILE}",)  # after the Deployment's --config: the one kept


@pytest.fixture(scope="module")
def topology(cluster: RealCluster) -> dict[str, list[str]]:
    found = leaves(sorted(cluster.nodes))
    cluster.apply(hypernodes(found))
    return found


def test_the_conf_file_is_the_scenarios_conf() -> None:
    assert parse_scheduler_config(CONF_FILE.read_text()) == parse_scheduler_config(CONF)


def test_a_hard_tier1_gang_of_4_lands_inside_one_tier1_hypernode(
    cluster: RealCluster, topology: dict[str, list[str]]
) -> None:
    podgroup_gang(cluster, "hard4", 4, "2", HARD_1)
    nodes = wait_for("hard4 bound", lambda: bound_nodes(cluster, "job=hard4", 4), 120)
    assert len(leaves_of(nodes, topology)) == 1, nodes


def test_a_hard_tier1_gang_too_big_for_any_waits_with_the_reason(
    cluster: RealCluster, topology: dict[str, list[str]]
) -> None:
    podgroup_gang(cluster, "hard6", 6, "3", HARD_1)
    message = wait_for("hard6's reason", lambda: unschedulable(cluster, "hard6"), 120)
    assert "networkTopology hard, highestTierAllowed 1: no HyperNode of tier <= 1" in message
    assert "the closest, s0 (tier 1, 4 nodes), has room for 4 of 6 required members" in message
    assert not any(p["spec"].get("nodeName") for p in cluster.pods(selector="job=hard6"))


def test_a_soft_gang_of_6_spans_two_tier1_hypernodes_under_one_spine(
    cluster: RealCluster, topology: dict[str, list[str]]
) -> None:
    podgroup_gang(cluster, "soft6", 6, "3", {"mode": "soft"})
    nodes = wait_for("soft6 bound", lambda: bound_nodes(cluster, "job=soft6", 6), 120)
    assert len(leaves_of(nodes, topology)) == 2, nodes
    assert len(spines_of(nodes, topology)) == 1, nodes


def test_a_volcano_job_with_a_hard_network_topology_lands_inside_one(
    cluster: RealCluster, topology: dict[str, list[str]]
) -> None:
    cluster.apply(volcano_job("vj4", 4, "2", HARD_1))
    selector = "volcano.sh/job-name=vj4"
    nodes = wait_for("vj4 bound", lambda: bound_nodes(cluster, selector, 4), 120)
    assert len(leaves_of(nodes, topology)) == 1, nodes


def test_two_partitions_of_4_each_land_in_a_tier1_hypernode_of_their_own(
    cluster: RealCluster, topology: dict[str, list[str]]
) -> None:
    cluster.apply(blocker(topology["s0"][1]))
    cluster.apply(partitioned_job("parts", "3", HARD_1))
    selector = "volcano.sh/job-name=parts"
    found = wait_for("parts bound", lambda: partitions_of(cluster, selector), 120)
    leaves = [leaves_of(nodes, topology) for nodes in found.values()]
    assert len(found) == 2 and all(len(f) == 1 for f in leaves), found
    assert leaves[0] != leaves[1], found
    assert all(topology["s0"][1] not in nodes for nodes in found.values())
