"""The networkTopology scenarios of the embedded and the real tier: 16 nodes in 4 tier-1
HyperNodes s0..s3 of 4 nodes, under 2 tier-2 spines (spine-a: s0, s1; spine-b: s2, s3), and
the gangs placed on them, as a user writes them."""

from __future__ import annotations

from typing import Any

from bench.soak_topology import hypernode_manifest
from plugins.framework.config import DEFAULT_SCHEDULER_CONF
from tests.e2e.conftest import SimCluster, pod_manifest, wait_for

CONF = DEFAULT_SCHEDULER_CONF.rstrip() + "\n  - name: network-topology-aware\n"
SPINES = {"spine-a": ["s0", "s1"], "spine-b": ["s2", "s3"]}
HARD_1 = {"mode": "hard", "highestTierAllowed": 1}


def leaves(nodes: list[str]) -> dict[str, list[str]]:
    """s0..s3: the 16 nodes, 4 by 4 in the order given."""
    assert len(nodes) == 16, nodes
    return {f"s{s}": nodes[4 * s : 4 * s + 4] for s in range(4)}


def hypernodes(leaves: dict[str, list[str]]) -> list[dict[str, Any]]:
    return [
        *(hypernode_manifest(name, 1, nodes) for name, nodes in leaves.items()),
        *(hypernode_manifest(name, 2, leaves, kind="HyperNode") for name, leaves in SPINES.items()),
    ]


def leaves_of(nodes: set[str], leaves: dict[str, list[str]]) -> set[str]:
    return {name for name, members in leaves.items() if nodes & set(members)}


def spines_of(nodes: set[str], leaves: dict[str, list[str]]) -> set[str]:
    found = leaves_of(nodes, leaves)
    return {name for name, members in SPINES.items() if found & set(members)}


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
                    schedulerName="volcano",
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


def partitioned_job(name: str, cpu: str, topology: dict[str, Any]) -> dict[str, Any]:
    """A Volcano Job of 8 workers in 2 partitions of 4 (both needed), each partition placed
    within a HyperNode of `topology` (the job controller writes the PodGroup's subGroupPolicy,
    its pods carry `volcano.sh/partition-id`)."""
    job = volcano_job(name, 8, cpu, {"mode": "soft"})
    del job["spec"]["networkTopology"]
    job["spec"]["tasks"][0]["partitionPolicy"] = {
        "totalPartitions": 2,
        "partitionSize": 4,
        "minPartitions": 2,
        "networkTopology": topology,
    }
    return job


def partitions_of(cluster: SimCluster, selector: str) -> dict[str, set[str]] | None:
    """partition id -> the nodes its pods are bound to, once all 8 are bound."""
    pods = cluster.pods(selector=selector)
    if len(pods) != 8 or not all(p["spec"].get("nodeName") for p in pods):
        return None
    out: dict[str, set[str]] = {}
    for p in pods:
        part = p["metadata"]["labels"]["volcano.sh/partition-id"]
        out.setdefault(part, set()).add(p["spec"]["nodeName"])
    return out


def blocker(node: str) -> dict[str, Any]:
    """A 3-cpu pod bound to `node` by name: its tier-1 HyperNode keeps three free nodes, so a
    partition of 4 placed anywhere would straddle two HyperNodes."""
    pod = pod_manifest("blocker", cpu="3", duration="forever", labels={"job": "blocker"})
    pod["spec"]["nodeName"] = node
    return pod
