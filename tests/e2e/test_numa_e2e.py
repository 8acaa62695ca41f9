"""NUMA-aware placement end to end (issue 50): `vulcan sim up --with-extender` with hollow nodes
of two 16-cpu NUMA cells (`--node-profile numa=2x16,tm-policy=...`), which publish their
Numatopology as Volcano's resource-exporter does, and a conf naming Volcano's `numa-aware`
plugin. A Guaranteed pod of 24 cpus is refused on the single-numa-node nodes with the plugin's
reason in its PodScheduled condition, and placed on the best-effort one; a gang's Guaranteed
members take one cell each, and a gang that would need a cell split waits with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from plugins.framework.config import DEFAULT_SCHEDULER_CONF
from tests.e2e.conftest import (
    SimCluster,
    pod_manifest,
    scheduled_condition,
    start_cluster,
    wait_for,
)

NUMA_REFUSAL = (
    "2 node(s) had NUMA topology affinity errors "
    "(container main cannot be assigned by numa under single-numa-node)"
)
TOPOLOGIES = "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    tmp = tmp_path_factory.mktemp("sim-numa")
    conf = tmp / "volcano-scheduler.conf"
    conf.write_text(CONF)
    profiles = [arg for profile in NODE_PROFILES for arg in ("--node-profile", profile)]
    yield from start_cluster(
        tmp / "state",
        *profiles,
        "--with-extender",
        "--extender-config",
        str(conf),
        "--gang-backoff",
        "1s",
    )


# The node profiles of the scenario (the real tier's module uses them too).
NODE_PROFILES = [
    "count=2,numa=2x16,tm-policy=single-numa-node,memory=64Gi,label.numa=single",
    "count=1,numa=2x16,tm-policy=best-effort,memory=64Gi,label.numa=best",
]
CONF = DEFAULT_SCHEDULER_CONF + "  - name: numa-aware\n    arguments: {weight: 2}\n"


def guaranteed(name: str, cpus: int, scheduler: str | None = None, **spec: Any) -> dict[str, Any]:
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    manifest = pod_manifest(name, cpu=str(cpus), duration="forever", **spec)
    resources = manifest["spec"]["containers"][0]["resources"]
    resources["requests"]["memory"] = resources["limits"]["memory"] = "1Gi"
    return manifest


def topology(cluster: SimCluster, node: str) -> dict[str, Any]:
    return cluster.get(f"{TOPOLOGIES}/{node}") or {}


def free_cpus(cluster: SimCluster, node: str) -> str:
    return (
        topology(cluster, node)
        .get("spec", {})
        .get("numares", {})
        .get("cpu", {})
        .get("allocatable", "")
    )


def nodes_labelled(cluster: SimCluster, value: str) -> list[str]:
    found = cluster.get(f"/api/v1/nodes?labelSelector=numa%3D{value}")["items"]
    return sorted(n["metadata"]["name"] for n in found)


def test_each_hollow_node_publishes_its_numatopology(cluster: SimCluster) -> None:
    published_topologies(cluster)


def published_topologies(cluster: SimCluster) -> None:
    (best,) = nodes_labelled(cluster, "best")
    spec = wait_for("the best-effort node's Numatopology", lambda: topology(cluster, best))["spec"]
    assert spec["policies"] == {
        "CPUManagerPolicy": "static",
        "TopologyManagerPolicy": "best-effort",
    }
    assert spec["numares"]["cpu"]["capacity"] == 32
    assert {d["numa"] for d in spec["cpuDetail"].values()} == {0, 1}
    assert sum(1 for d in spec["cpuDetail"].values() if d["numa"] == 1) == 16
    for node in nodes_labelled(cluster, "single"):
        policies = topology(cluster, node)["spec"]["policies"]
        assert policies["TopologyManagerPolicy"] == "single-numa-node"


def test_24_cpus_are_refused_under_single_numa_node_and_placed_under_best_effort(
    cluster: SimCluster,
) -> None:
    wide_pods(cluster)


def wide_pods(cluster: SimCluster, scheduler: str | None = None) -> None:
    """The issue's scenario: 24 cpus refused under single-numa-node, placed under best-effort
    (pods of `scheduler`, the cluster's default when None)."""
    cluster.apply(guaranteed("wide-single", 24, scheduler, nodeSelector={"numa": "single"}))
    # (A pod of vulcan's scheduler is first refused until the podgroup controller groups it,
    # where one runs: the NUMA refusal follows.)
    condition = wait_for(
        "the refused pod's PodScheduled condition naming NUMA",
        lambda: (
            (c := scheduled_condition(cluster.pod("wide-single"))).get("status") == "False"
            and "NUMA topology" in c.get("message", "")
            and c
        ),
        timeout=60,
    )
    assert condition["reason"] == "Unschedulable"
    assert NUMA_REFUSAL in condition["message"], condition["message"]
    assert condition["message"].startswith("0/3 nodes are available:")

    (best,) = nodes_labelled(cluster, "best")
    cluster.apply(guaranteed("wide-best", 24, scheduler, nodeSelector={"numa": "best"}))
    pod = wait_for(
        "the best-effort pod bound",
        lambda: (p := cluster.pod("wide-best"))["spec"].get("nodeName") and p,
    )
    assert pod["spec"]["nodeName"] == best
    # The exporter reports the pod's 24 cpus pinned (16 of cell 0, 8 of cell 1).
    assert wait_for("the exporter's update", lambda: free_cpus(cluster, best) == "24-31")
    (allocation,) = topology(cluster, best)["spec"]["podAllocations"]
    assert allocation["name"] == "wide-best"
    assert allocation["containerAllocations"][0]["allocations"]["cpu"] == "0-23"
    # Still refused where no single cell holds 24 cpus.
    assert not (cluster.pod("wide-single") or {})["spec"].get("nodeName")
    cluster.kubectl("delete", "pod", "wide-single", "wide-best", "--wait=false")
    wait_for("the best-effort node's cpus free again", lambda: free_cpus(cluster, best) == "0-31")


def podgroup(name: str, members: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": members},
    }


def member(job: str, index: int, scheduler: str | None = None) -> dict[str, Any]:
    manifest = guaranteed(f"{job}-{index}", 12, scheduler, nodeSelector={"numa": "single"})
    manifest["metadata"]["labels"] = {"job": job}
    manifest["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = job
    return manifest


def test_gang_members_take_a_cell_each_and_a_gang_needing_a_split_cell_waits(
    cluster: SimCluster,
) -> None:
    """Two single-numa-node nodes: four cells of 16 cpus. Three members of 12 cpus take a cell
    each; two more need two cells but only one is left (28 cpus free in all: room enough
    without NUMA), so that gang waits, and its PodGroup says why."""
    gangs_by_cell(cluster)


def gangs_by_cell(cluster: SimCluster, scheduler: str | None = None) -> None:
    cluster.apply([podgroup("three", 3), *(member("three", i, scheduler) for i in range(3))])

    def bound() -> list[str] | None:
        nodes = [p["spec"].get("nodeName") for p in cluster.pods(selector="job=three")]
        return nodes if len(nodes) == 3 and all(nodes) else None

    nodes = wait_for("the 3 members bound", bound, timeout=60)
    assert sorted(nodes.count(n) for n in set(nodes)) == [1, 2]
    cluster.apply([podgroup("two", 2), *(member("two", i, scheduler) for i in range(2))])
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/two"

    def waiting() -> str | None:
        for c in (cluster.get(path) or {}).get("status", {}).get("conditions") or ():
            if c.get("type") == "Unschedulable" and "NUMA topology" in (c.get("message") or ""):
                return str(c["message"])
        return None

    message = wait_for("the second gang's Unschedulable condition", waiting, timeout=60)
    assert "cannot be assigned by numa under single-numa-node" in message
    assert all(not p["spec"].get("nodeName") for p in cluster.pods(selector="job=two"))
