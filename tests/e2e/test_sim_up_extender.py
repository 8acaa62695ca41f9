"""`vulcan sim up --with-extender`: pods go through vulcan's extender and behave as on a real
cluster (scheduling, running, finishing, taints, nodeSelector, priority, node failure)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    SimCluster,
    metric,
    phase,
    pod_manifest,
    scheduled_condition,
    start_cluster,
    wait_for,
)

NODES = ["hollow-node-0", "hollow-node-1", "hollow-node-2"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-extender"),
        "--nodes",
        "3",
        "--node-profile",
        "cpu=4,memory=8Gi",
        "--with-extender",
        "--pod-duration",
        "forever",
        "--pod-eviction-timeout",
        "1",
    )


def test_the_cluster_announces_how_to_use_it(cluster: SimCluster) -> None:
    assert any(line.startswith("kubeconfig: ") for line in cluster.lines)
    assert any("export KUBECONFIG=" in line for line in cluster.lines)
    out = cluster.kubectl("get", "nodes", "-o", "name")
    assert sorted(out.split()) == [f"node/{n}" for n in NODES]
    for name in NODES:
        node = cluster.node(name)
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
        # The not-ready taint of registration is gone once the node is Ready.
        assert not any(
            t["key"] == "node.kubernetes.io/not-ready" for t in node["spec"].get("taints") or ()
        )


def test_plain_pods_are_bound_by_the_extender_run_and_succeed(cluster: SimCluster) -> None:
    binds_before = metric(cluster.metrics(), "vulcan_extender_binds_total")
    filters_before = metric(cluster.metrics(), "vulcan_extender_requests_total", verb="filter")
    cluster.apply([pod_manifest(f"plain-{i}", duration="0.3s") for i in range(3)])
    cluster.apply(pod_manifest("failing", duration="0.2s", exit_code=3))
    for i in range(3):
        done = wait_for(
            f"plain-{i} Succeeded",
            lambda i=i: (
                phase(cluster.pod(f"plain-{i}")) == "Succeeded" and cluster.pod(f"plain-{i}")
            ),
        )
        assert done["spec"]["nodeName"] in NODES
    failed = wait_for(
        "failing Failed",
        lambda: phase(cluster.pod("failing")) == "Failed" and cluster.pod("failing"),
    )
    state = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == 3
    metrics = cluster.metrics()
    assert metric(metrics, "vulcan_extender_binds_total") >= binds_before + 4
    assert metric(metrics, "vulcan_extender_requests_total", verb="filter") >= filters_before + 4
    events = cluster.events("plain-0")
    assert any(
        e["reason"] == "Scheduled" and "Successfully assigned default/plain-0" in e["note"]
        for e in events
    )


def test_a_pod_too_large_for_any_node_stays_pending_with_kube_scheduler_text(
    cluster: SimCluster,
) -> None:
    cluster.apply(pod_manifest("huge", cpu="64"))
    condition = wait_for("FailedScheduling", lambda: scheduled_condition(cluster.pod("huge")))
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert condition["message"].startswith("0/3 nodes are available: 3 Insufficient cpu.")
    assert "preemption: 0/3 nodes are available" in condition["message"]
    event = wait_for(
        "the event",
        lambda: [e for e in cluster.events("huge") if e["reason"] == "FailedScheduling"],
    )
    assert event[0]["type"] == "Warning" and event[0]["note"] == condition["message"]
    assert phase(cluster.pod("huge")) == "Pending" and not cluster.pod("huge")["spec"].get(
        "nodeName"
    )
    cluster.kubectl("delete", "pod", "huge", "--wait=false")


def test_taints_and_tolerations(cluster: SimCluster) -> None:
    cluster.kubectl("taint", "node", "hollow-node-0", "dedicated=gpu:NoSchedule")
    try:
        pinned = {"nodeSelector": {"kubernetes.io/hostname": "hollow-node-0"}}
        cluster.apply(pod_manifest("untolerated", **pinned))
        condition = wait_for(
            "untolerated rejected", lambda: scheduled_condition(cluster.pod("untolerated"))
        )
        assert "1 node(s) had untolerated taint {dedicated: gpu}" in condition["message"]
        assert "2 node(s) didn't match Pod's node affinity/selector" in condition["message"]
        toleration = [
            {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
        ]
        cluster.apply(pod_manifest("tolerated", tolerations=toleration, **pinned))
        pod = wait_for(
            "tolerated bound",
            lambda: (cluster.pod("tolerated") or {}).get("spec", {}).get("nodeName"),
        )
        assert pod == "hollow-node-0"
    finally:
        cluster.kubectl("taint", "node", "hollow-node-0", "dedicated=gpu:NoSchedule-")
    # Removing the taint is a cluster event: the waiting pod is retried and placed.
    assert (
        wait_for(
            "untolerated bound after the taint went",
            lambda: (cluster.pod("untolerated") or {}).get("spec", {}).get("nodeName"),
        )
        == "hollow-node-0"
    )
    cluster.kubectl("delete", "pod", "untolerated", "tolerated", "--wait=false")


def test_node_selector(cluster: SimCluster) -> None:
    cluster.kubectl("label", "node", "hollow-node-1", "disk=ssd")
    cluster.apply([pod_manifest(f"ssd-{i}", nodeSelector={"disk": "ssd"}) for i in range(3)])
    for i in range(3):
        node = wait_for(
            f"ssd-{i} bound",
            lambda i=i: (cluster.pod(f"ssd-{i}") or {}).get("spec", {}).get("nodeName"),
        )
        assert node == "hollow-node-1"
    cluster.kubectl("delete", "pod", "ssd-0", "ssd-1", "ssd-2", "--wait=false")


def test_priority_orders_the_queue(cluster: SimCluster) -> None:
    cluster.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "urgent-no-preempt"},
            "value": 1000,
            "preemptionPolicy": "Never",
        }
    )
    cluster.kubectl("label", "node", "hollow-node-2", "lane=prio")
    lane = {"nodeSelector": {"lane": "prio"}}
    # Both pods must be waiting in the queue at once for the order to show (otherwise the first
    # one created is simply scheduled first, or backoff timers decide, as on a real cluster):
    # the scheduler is paused (SIGSTOP) while a low-priority pod and then a high-priority one are
    # created, each alone filling the one node of the lane.
    scheduler = cluster.component_pid("scheduler")
    os.kill(scheduler, signal.SIGSTOP)
    try:
        cluster.apply(pod_manifest("low", cpu="4", duration=None, **lane))
        cluster.apply(
            pod_manifest(
                "high", cpu="4", duration=None, priorityClassName="urgent-no-preempt", **lane
            )
        )
        wait_for("both created", lambda: cluster.pod("low") and cluster.pod("high"))
    finally:
        os.kill(scheduler, signal.SIGCONT)
    node = wait_for(
        "high bound", lambda: (cluster.pod("high") or {}).get("spec", {}).get("nodeName")
    )
    assert node == "hollow-node-2"
    condition = wait_for("low unschedulable", lambda: scheduled_condition(cluster.pod("low")))
    assert not (cluster.pod("low") or {}).get("spec", {}).get("nodeName")
    assert condition["reason"] == "Unschedulable"
    cluster.kubectl("delete", "pod", "low", "high", "--wait=false")
    wait_for(
        "lane empty",
        lambda: (
            not [
                p
                for p in cluster.pods()
                if p["spec"].get("nodeName") == "hollow-node-2"
                and phase(p) in ("Pending", "Running")
            ]
        ),
    )


def test_preemption_evicts_a_lower_priority_pod(cluster: SimCluster) -> None:
    cluster.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "urgent"},
            "value": 2000,
        }
    )
    lane = {"nodeSelector": {"lane": "prio"}}
    cluster.apply(pod_manifest("victim", cpu="4", duration=None, **lane))
    wait_for("victim running", lambda: phase(cluster.pod("victim")) == "Running")
    cluster.apply(
        pod_manifest("preemptor", cpu="4", duration=None, priorityClassName="urgent", **lane)
    )
    node = wait_for(
        "preemptor bound",
        lambda: (cluster.pod("preemptor") or {}).get("spec", {}).get("nodeName"),
        timeout=60,
    )
    assert node == "hollow-node-2"
    assert cluster.pod("victim") is None  # evicted, and its kubelet confirmed the deletion
    cluster.kubectl("delete", "pod", "preemptor", "--wait=false")


def test_failing_a_node_evicts_its_pods(cluster: SimCluster) -> None:
    pinned = {"nodeSelector": {"kubernetes.io/hostname": "hollow-node-1"}}
    cluster.apply(pod_manifest("doomed", duration=None, **pinned))
    wait_for("doomed running", lambda: phase(cluster.pod("doomed")) == "Running")
    cluster.kubectl("annotate", "node", "hollow-node-1", "vulcan.sh/sim-node-state=failed")
    try:
        wait_for(
            "node NotReady",
            lambda: any(
                c["type"] == "Ready" and c["status"] != "True"
                for c in cluster.node("hollow-node-1")["status"]["conditions"]
            ),
        )
        # Evicted by the node's NoExecute taint: terminating, as on a real cluster, until the
        # node is back and its kubelet confirms it gone.
        pod = wait_for(
            "doomed evicted",
            lambda: (
                (found := cluster.pod("doomed"))
                and found["metadata"].get("deletionTimestamp")
                and found
            ),
        )
        assert any(
            c["type"] == "DisruptionTarget" and c["reason"] == "DeletionByTaintManager"
            for c in pod["status"]["conditions"]
        )
        # New pods are kept off the NotReady node by its taint.
        cluster.apply(pod_manifest("after", duration=None, **pinned))
        condition = wait_for("after rejected", lambda: scheduled_condition(cluster.pod("after")))
        assert "untolerated taint {node.kubernetes.io/not-ready: }" in condition["message"]
    finally:
        cluster.kubectl("annotate", "node", "hollow-node-1", "vulcan.sh/sim-node-state-")
    wait_for(
        "after bound once the node is back",
        lambda: (cluster.pod("after") or {}).get("spec", {}).get("nodeName"),
    )


def test_stopping_is_clean(tmp_path: Path) -> None:
    # A second, tiny cluster: Ctrl-C ends it with exit code 0 (asserted by start_cluster).
    for cluster in start_cluster(tmp_path, "--nodes", "1"):
        assert cluster.kubectl("get", "nodes", "-o", "name").split() == ["node/hollow-node-0"]
