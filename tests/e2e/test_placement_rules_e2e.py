"""A gang's placement agrees with kube-scheduler's filters (issue 32), end to end:
`vulcan sim up --with-extender`, nodes tainted and PodGroups / pods created with kubectl.

The embedded kube-scheduler stand-in has NodeUnschedulable, TaintToleration, NodeAffinity and
NodeResourcesFit, not (yet) NodePorts or InterPodAffinity: for host ports and anti-affinity
the scenarios assert vulcan's placement (the nodes the pods were bound to), which its filter
narrows each member to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import SimCluster, phase, pod_manifest, start_cluster, wait_for

GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
HOST = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-placement"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=8,memory=32Gi,nvidia.com/gpu=1",
        "--with-extender",
        "--pod-duration",
        "1s",
        "--gang-backoff",
        "1s",
    )


def podgroup(cluster: SimCluster, name: str, min_member: int) -> None:
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": min_member},
        }
    )


def member(job: str, index: int, *, gpu: bool = False, **spec: Any) -> dict[str, Any]:
    manifest = pod_manifest(
        f"{job}-{index}",
        cpu="1",
        duration="1s",
        labels={"job": job},
        annotations={"scheduling.k8s.io/group-name": job},
        **spec,
    )
    if gpu:
        manifest["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    return manifest


def bound_nodes(cluster: SimCluster, job: str, count: int) -> list[str]:
    """The nodes the gang's `count` pods were bound to, once they all are."""

    def probe() -> list[str] | None:
        pods = cluster.pods(selector=f"job={job}")
        nodes = [p["spec"].get("nodeName") for p in pods]
        return nodes if len(nodes) == count and all(nodes) else None

    return wait_for(f"the {count} pods of {job} to be bound", probe, timeout=60)


def group_condition(
    cluster: SimCluster, name: str, kind: str, saying: str = ""
) -> dict[str, Any] | None:
    """The PodGroup's condition of type `kind`, once its message says `saying` (a group
    waiting for its members says so first)."""
    path = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/{name}"
    for condition in ((cluster.get(path) or {}).get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition if saying in (condition.get("message") or "") else None
    return None


def test_a_gpu_gang_tolerating_the_taint_of_every_gpu_node_runs(cluster: SimCluster) -> None:
    """What managed Kubernetes does to GPU nodes: every node tainted
    nvidia.com/gpu=present:NoSchedule. The tolerating gang is placed and completes; a gang
    that does not tolerate it waits, and its PodGroup and pods say why in kube-scheduler's
    words."""
    cluster.kubectl("taint", "nodes", "--all", GPU_TAINT)
    try:
        podgroup(cluster, "gpu-ok", 4)
        cluster.apply([member("gpu-ok", i, gpu=True, tolerations=TOLERATE_GPU) for i in range(4)])
        assert len(set(bound_nodes(cluster, "gpu-ok", 4))) == 4
        wait_for(
            "the tolerating gang to complete",
            lambda: all(phase(p) == "Succeeded" for p in cluster.pods(selector="job=gpu-ok")),
            timeout=60,
        )
        podgroup(cluster, "gpu-no", 2)
        cluster.apply([member("gpu-no", i, gpu=True) for i in range(2)])
        condition = wait_for(
            "the intolerant gang's Unschedulable condition",
            lambda: group_condition(
                cluster, "gpu-no", "Unschedulable", "untolerated taint {nvidia.com/gpu: present}"
            ),
        )
        assert "untolerated taint {nvidia.com/gpu: present}" in condition["message"]
        assert all(not p["spec"].get("nodeName") for p in cluster.pods(selector="job=gpu-no"))
        event = wait_for(
            "a FailedScheduling event on a member naming the gang and the taint",
            lambda: [
                e
                for e in cluster.events("gpu-no-0")
                if e.get("reason") == "FailedScheduling"
                and "default/gpu-no" in e.get("note", "")
                and "untolerated taint" in e.get("note", "")
            ],
        )
        assert event
    finally:
        cluster.kubectl("delete", "pods", "-l", "job=gpu-no", "--wait=false", check=False)
        cluster.kubectl("delete", "podgroup", "gpu-no", "--wait=false", check=False)
        cluster.kubectl("taint", "nodes", "--all", "nvidia.com/gpu-")


def test_host_port_members_land_on_distinct_nodes(cluster: SimCluster) -> None:
    port = {"containerPort": 8080, "hostPort": 8080}
    podgroup(cluster, "ports", 4)
    pods = [member("ports", i) for i in range(4)]
    for pod in pods:
        pod["spec"]["containers"][0]["ports"] = [port]
    cluster.apply(pods)
    nodes = bound_nodes(cluster, "ports", 4)
    assert len(set(nodes)) == 4, nodes


def test_anti_affinity_members_land_on_distinct_nodes(cluster: SimCluster) -> None:
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"job": "apart"}}, "topologyKey": HOST}
            ]
        }
    }
    podgroup(cluster, "apart", 3)
    cluster.apply([member("apart", i, affinity=apart) for i in range(3)])
    nodes = bound_nodes(cluster, "apart", 3)
    assert len(set(nodes)) == 3, nodes


def test_a_node_affinity_gang_lands_where_pinned(cluster: SimCluster) -> None:
    pinned = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": HOST, "operator": "In", "values": ["hollow-node-1"]}
                        ]
                    }
                ]
            }
        }
    }
    podgroup(cluster, "pinned", 3)
    cluster.apply([member("pinned", i, affinity=pinned) for i in range(3)])
    assert set(bound_nodes(cluster, "pinned", 3)) == {"hollow-node-1"}


def test_a_gated_gang_does_not_block_its_queue_and_runs_once_ungated(cluster: SimCluster) -> None:
    """Queue `gates` holds 2 cpu. Gang `held` (2 x 1 cpu) comes first, its pods gated by the
    user: they cannot be scheduled, so they neither count for its quorum nor hold the queue's
    room, and gang `free`, created after it, runs. Once the gates are removed `held` runs."""
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "gates"},
            "spec": {"weight": 1, "capability": {"cpu": "2"}},
        }
    )
    for name in ("held", "free"):
        cluster.apply(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {"minMember": 2, "queue": "gates"},
            }
        )
    gate = [{"name": "example.com/wait-for-data"}]
    cluster.apply([member("held", i, schedulingGates=gate) for i in range(2)])
    condition = wait_for(
        "the gated gang to say it waits for its gated members",
        lambda: group_condition(cluster, "held", "Unschedulable", "2 SchedulingGated"),
    )
    assert "2 SchedulingGated" in condition["message"]
    cluster.apply([member("free", i) for i in range(2)])
    bound_nodes(cluster, "free", 2)
    assert all(not p["spec"].get("nodeName") for p in cluster.pods(selector="job=held"))
    wait_for(
        "the free gang to complete",
        lambda: all(phase(p) == "Succeeded" for p in cluster.pods(selector="job=free")),
        timeout=60,
    )
    for i in range(2):
        cluster.kubectl(
            "patch",
            "pod",
            f"held-{i}",
            "--type=json",
            "-p",
            '[{"op": "remove", "path": "/spec/schedulingGates"}]',
        )
    bound_nodes(cluster, "held", 2)
    wait_for(
        "the ungated gang to complete",
        lambda: all(phase(p) == "Succeeded" for p in cluster.pods(selector="job=held")),
        timeout=60,
    )
