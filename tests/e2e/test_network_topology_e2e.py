"""Gangs placed within HyperNodes on `vulcan sim up` (a networkTopology, the conf naming
network-topology-aware): 16 nodes of 4 cpu in 4 tier-1 HyperNodes s0..s3 of 4 nodes, under 2
tier-2 spines (spine-a: s0, s1; spine-b: s2, s3)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from plugins.framework.config import DEFAULT_SCHEDULER_CONF
from tests.e2e.conftest import SimCluster, pod_manifest, start_cluster, wait_for

CONF = DEFAULT_SCHEDULER_CONF.rstrip() + "\n  - name: network-topology-aware\n"
LEAVES = {f"s{s}": [f"hollow-node-{4 * s + i}" for i in range(4)] for s in range(4)}
SPINES = {"spine-a": ["s0", "s1"], "spine-b": ["s2", "s3"]}
HARD_1 = {"mode": "hard", "highestTierAllowed": 1}


def hypernodes() -> list[dict[str, Any]]:
    def one(name: str, tier: int, kind: str, members: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {
                "tier": tier,
                "members": [
                    {"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members
                ],
            },
        }

    return [
        *(one(name, 1, "Node", nodes) for name, nodes in LEAVES.items()),
        *(one(name, 2, "HyperNode", leaves) for name, leaves in SPINES.items()),
    ]


def leaves_of(nodes: set[str]) -> set[str]:
    return {name for name, members in LEAVES.items() if nodes & set(members)}


def spines_of(nodes: set[str]) -> set[str]:
    leaves = leaves_of(nodes)
    return {name for name, members in SPINES.items() if leaves & set(members)}


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
    cluster.apply(hypernodes())
    try:
        yield cluster
    finally:
        clusters.close()


def podgroup_gang(
    cluster: SimCluster, name: str, members: int, cpu: str, topology: dict[str, Any]
) -> None:
    """A plain PodGroup with a networkTopology and pods naming it by annotation: what Kubeflow
    Trainer's podGroupPolicy.volcano makes."""
    cluster.apply(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {"minMember": members, "networkTopology": topology},
            },
            *(
                pod_manifest(
                    f"{name}-{i}",
                    cpu=cpu,
                    duration="forever",
                    labels={"job": name},
                    annotations={"scheduling.k8s.io/group-name": name},
                )
                for i in range(members)
            ),
        ]
    )


def bound_nodes(cluster: SimCluster, selector: str, count: int) -> set[str] | None:
    nodes = [p["spec"].get("nodeName") for p in cluster.pods(selector=selector)]
    return set(nodes) if len(nodes) == count and all(nodes) else None


def remove(cluster: SimCluster, *, podgroup: str = "", job: str = "", selector: str) -> None:
    if job:
        cluster.kubectl("delete", "vcjob", job, "--wait=false")
    if podgroup:
        cluster.kubectl("delete", "podgroup", podgroup, "--wait=false")
    cluster.kubectl("delete", "pods", "-l", selector, "--wait=false")
    wait_for(f"{selector} gone", lambda: not cluster.pods(selector=selector), 60)


def unschedulable(cluster: SimCluster, name: str) -> str | None:
    path = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/{name}"
    group = cluster.get(path) or {}
    for condition in (group.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Unschedulable" and "networkTopology" in (
            condition.get("message") or ""
        ):
            return condition["message"]
    return None


def test_a_hard_tier1_gang_of_4_lands_inside_one_tier1_hypernode(cluster: SimCluster) -> None:
    podgroup_gang(cluster, "hard4", 4, "2", HARD_1)
    nodes = wait_for("hard4 bound", lambda: bound_nodes(cluster, "job=hard4", 4), 60)
    assert len(leaves_of(nodes)) == 1, nodes
    remove(cluster, podgroup="hard4", selector="job=hard4")


def test_a_hard_tier1_gang_too_big_for_any_waits_with_the_reason(cluster: SimCluster) -> None:
    podgroup_gang(cluster, "hard6", 6, "3", HARD_1)
    message = wait_for("hard6's reason", lambda: unschedulable(cluster, "hard6"), 60)
    assert "networkTopology hard, highestTierAllowed 1: no HyperNode of tier <= 1" in message
    assert "the closest, s0 (tier 1, 4 nodes), has room for 4 of 6 required members" in message
    assert not any(p["spec"].get("nodeName") for p in cluster.pods(selector="job=hard6"))
    remove(cluster, podgroup="hard6", selector="job=hard6")


def test_a_soft_gang_of_6_spans_two_tier1_hypernodes_under_one_spine(
    cluster: SimCluster,
) -> None:
    podgroup_gang(cluster, "soft6", 6, "3", {"mode": "soft"})
    nodes = wait_for("soft6 bound", lambda: bound_nodes(cluster, "job=soft6", 6), 60)
    assert len(leaves_of(nodes)) == 2 and len(spines_of(nodes)) == 1, nodes
    remove(cluster, podgroup="soft6", selector="job=soft6")


def volcano_job(name: str, replicas: int, cpu: str, topology: dict[str, Any]) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
    }
    template = {
        "metadata": {"annotations": {"vulcan.sh/sim-duration": "forever"}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "networkTopology": topology,
            "tasks": [{"name": "worker", "replicas": replicas, "template": template}],
        },
    }


def test_a_volcano_job_with_a_network_topology_behaves_the_same(cluster: SimCluster) -> None:
    cluster.apply(volcano_job("vj4", 4, "2", HARD_1))
    selector = "volcano.sh/job-name=vj4"
    nodes = wait_for("vj4 bound", lambda: bound_nodes(cluster, selector, 4), 60)
    assert len(leaves_of(nodes)) == 1, nodes
    remove(cluster, job="vj4", selector=selector)
    cluster.apply(volcano_job("vj6", 6, "3", HARD_1))

    def reason() -> str | None:
        groups = cluster.get("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups")
        names = [g["metadata"]["name"] for g in groups["items"] if "vj6" in g["metadata"]["name"]]
        return unschedulable(cluster, names[0]) if names else None

    message = wait_for("vj6's reason", reason, 60)
    assert "no HyperNode of tier <= 1 can hold the gang" in message
    remove(cluster, job="vj6", selector="volcano.sh/job-name=vj6")
