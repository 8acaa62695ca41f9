"""vulcan in the cluster's own scheduler on a real control plane
(manifests/overlays/cluster-scheduler): one stock kube-scheduler v1.36 whose configuration
gains the install's `vulcan-kube-scheduler-extenders` stanza (a `volcano` profile and the two
extender entries, each called only for pods carrying its managedResources marker); the
controllers mark the pods of Volcano Jobs (--pod-resource-markers, set by the overlay)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import metric, wait_for
from tests.e2e.test_gang_e2e import GangWatch
from tests.real.conftest import RealCluster
from tests.real.grouping import controllers_paused, refused_waiting
from tests.real.test_second_scheduler_real import hold

pytestmark = pytest.mark.real

INSTALL_MODE = "cluster-scheduler"
NODE_PROFILES = ["count=4,cpu=8,memory=32Gi,nvidia.com/gpu=1"]
EXTENDER_FLAGS = ("--gang-backoff=1s",)
POD_DURATION = "2s"
MANIFESTS = Path(__file__).parent / "manifests"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
MARKERS = ("vulcan.sh/managed", "vulcan.sh/managed-bind")


def job_phase(cluster: RealCluster, name: str) -> str:
    job = cluster.get(f"{JOBS}/{name}") or {}
    return ((job.get("status") or {}).get("state") or {}).get("phase", "")


def test_two_competing_volcano_jobs_run_one_after_the_other_never_half_placed(
    cluster: RealCluster,
) -> None:
    manifest = MANIFESTS / "competing-jobs.yaml"
    cluster.apply_yaml(manifest)
    watch = GangWatch(cluster, {"tf-a": 4, "tf-b": 4})
    watch.until("both jobs' workers to finish", lambda: len(watch.done_at) == 2, timeout=150)
    first, second = sorted(watch.done_at, key=watch.done_at.__getitem__)
    assert watch.bound_at[second] >= watch.done_at[first] - 0.5
    wait_for(
        "both jobs to be Completed",
        lambda: all(job_phase(cluster, n) == "Completed" for n in ("tf-a", "tf-b")),
        60,
    )
    # The controllers marked every pod, so the cluster's scheduler sent each one to vulcan.
    for pod in cluster.pods(selector="job") + cluster.pods(selector="volcano.sh/job-name"):
        limits = pod["spec"]["containers"][0]["resources"].get("limits") or {}
        assert all(m in limits for m in MARKERS), (pod["metadata"]["name"], limits)
    assert metric(cluster.metrics(), "vulcan_gang_admission_duration_seconds_count") >= 2


def test_the_tensorflow_job_runs_to_completed(cluster: RealCluster) -> None:
    manifest = MANIFESTS / "tensorflow-benchmark.yaml"
    cluster.apply_yaml(manifest)
    name = "tensorflow-benchmark"
    wait_for(
        f"{name} to complete",
        lambda: job_phase(cluster, name) == "Completed",
        120,
    )


def test_a_pod_without_markers_is_scheduled_without_vulcan(cluster: RealCluster) -> None:
    """The cluster's other pods never reach the extender: a plain pod of the default scheduler
    runs while the extender's filter count stays where it was."""
    before = metric(cluster.metrics(), "vulcan_extender_requests_total", verb="filter")
    cluster.kubectl("run", "plain", "--image=busybox", "--restart=Never")
    wait_for(
        "the plain pod to succeed",
        lambda: (cluster.pod("plain") or {}).get("status", {}).get("phase") == "Succeeded",
        60,
    )
    assert metric(cluster.metrics(), "vulcan_extender_requests_total", verb="filter") == before


def test_the_extender_runs_without_the_false_bind_timeout_warning(cluster: RealCluster) -> None:
    """The install's Deployment tells the extender the bind timeout its kube-scheduler
    configuration sets (90 s, above the 60 s gang timeout): no warning that it is unset
    (issue 30 item 3)."""
    log = (cluster.control_plane.logs / "vulcan-extender.log").read_text()
    assert "vulcan extender listening on" in log
    assert "bind httpTimeout" not in log, log


def test_a_marked_deployment_gang_without_the_gate_binds_whole(cluster: RealCluster) -> None:
    """The cluster's kube-scheduler sends the marked pods to vulcan, which refuses each until
    the pg controller grouped it (paused here while kube-controller-manager makes them), then
    holds the gang of 3 out of 4 unplaced, and binds all 4 once the Deployment has them."""
    manifest = MANIFESTS / "deployment-gang-marked.yaml"
    with controllers_paused(cluster):
        cluster.apply_yaml(manifest)
        wait_for(
            "the ReplicaSet's 3 ungrouped pods to be refused, waiting for their PodGroup",
            lambda: (
                (pods := cluster.pods(selector="app=trainer"))
                and len(pods) == 3
                and all(refused_waiting(cluster, p["metadata"]["name"]) for p in pods)
            ),
            10,
        )

    def bound() -> list[str]:
        pods = cluster.pods(selector="app=trainer")
        return [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]

    def grouped() -> bool:
        pods = cluster.pods(selector="app=trainer")
        return len(pods) == 3 and all(
            (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
            for p in pods
        )

    assert not bound()
    wait_for("the 3 pods to be put in their PodGroup", grouped, 30)
    hold("no member of the incomplete gang to be bound", lambda: not bound(), 3.0)
    cluster.kubectl("scale", "deployment", "trainer", "--replicas=4")
    nodes = wait_for("the gang of 4 to be bound", lambda: len(n := bound()) == 4 and n, 90)
    assert len(set(nodes)) == 4, nodes
    cluster.kubectl("delete", "-f", str(manifest), "--wait=true")


def test_a_gang_opted_in_with_the_scheduling_marker_alone_is_refused_never_half_bound(
    cluster: RealCluster,
) -> None:
    """competing-gangs.yaml's tf-a with `vulcan.sh/managed` but not `vulcan.sh/managed-bind`:
    the stanza's bind entry takes only pods with the latter, so the cluster's kube-scheduler
    would bind each member itself, past the gang barrier. vulcan's filter refuses them on every
    node (the overlay's `--bind-marker`), naming the marker and the fix; none is bound."""
    docs = [
        d
        for d in yaml.safe_load_all((MANIFESTS / "competing-gangs.yaml").read_text())
        if d and "tf-b" not in d["metadata"]["name"]
    ]
    members = [d["metadata"]["name"] for d in docs if d["kind"] == "Pod"]
    for pod in docs:
        if pod["kind"] == "Pod":
            pod["spec"]["containers"][0]["resources"]["limits"][MARKERS[0]] = "1"
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def refusal(name: str) -> str:
        for condition in (cluster.pod(name) or {}).get("status", {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return str(condition.get("message", ""))
        return ""

    wait_for(
        "every member to be refused for want of the bind marker",
        lambda: all(f"lacks the bind marker {MARKERS[1]}" in refusal(n) for n in members),
        60,
    )
    said = refusal(members[0])
    assert "gang default/tf-a (minMember 4)" in said, said
    hold(
        "no member to be bound",
        lambda: not any((cluster.pod(n) or {}).get("spec", {}).get("nodeName") for n in members),
        3.0,
    )
