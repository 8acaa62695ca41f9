"""The cluster-scheduler install on the embedded cluster (`vulcan sim up --install-mode
cluster-scheduler`): the scheduler runs the overlay's stanza, so it calls vulcan's extender only
for pods with vulcan's markers. A Volcano Job's pods get them from the controllers and are
gang-scheduled by vulcan; a pod without them never reaches the extender."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from core.api.keys import BINDING_MARKER, SCHEDULING_MARKER
from tests.e2e.conftest import SimCluster, metric, phase, pod_manifest, start_cluster, wait_for

VCJOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-cluster-mode"),
        "--nodes",
        "3",
        "--node-profile",
        "cpu=8,memory=32Gi",
        "--with-extender",
        "--with-controllers",
        "--install-mode",
        "cluster-scheduler",
    )


def extender_calls(cluster: SimCluster) -> dict[str, float]:
    text = cluster.metrics()
    return {
        verb: metric(text, "vulcan_extender_requests_total", verb=verb)
        for verb in ("filter", "bind")
    }


def job(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": {"vulcan.sh/sim-duration": "1s"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "2"}},
                                }
                            ],
                            "restartPolicy": "Never",
                        },
                    },
                }
            ],
        },
    }


def test_a_volcano_job_is_marked_and_scheduled_through_vulcan(cluster: SimCluster) -> None:
    before = extender_calls(cluster)
    cluster.request(VCJOBS, job("marked", 3))

    def completed() -> bool:
        found = cluster.get(f"{VCJOBS}/marked") or {}
        return (found.get("status") or {}).get("state", {}).get("phase") == "Completed"

    wait_for("the marked job to complete", completed, 90)
    pods = cluster.pods(selector="volcano.sh/job-name=marked")
    assert len(pods) == 3
    for pod in pods:
        resources = pod["spec"]["containers"][0]["resources"]
        assert resources["limits"][SCHEDULING_MARKER] == "1"
        assert resources["requests"][BINDING_MARKER] == "1"
    after = extender_calls(cluster)
    assert after["filter"] >= before["filter"] + 3
    assert after["bind"] >= before["bind"] + 3  # vulcan bound them (the gang's barrier)


def test_a_pod_without_markers_never_reaches_the_extender(cluster: SimCluster) -> None:
    before = extender_calls(cluster)
    cluster.request(
        "/api/v1/namespaces/default/pods",
        pod_manifest("unmarked", cpu="1", duration="forever", schedulerName="volcano"),
    )
    wait_for("the unmarked pod to run", lambda: phase(cluster.pod("unmarked")) == "Running", 30)
    assert extender_calls(cluster) == before
    cluster.kubectl("delete", "pod", "unmarked", "--wait=false")


def test_a_plain_gang_opts_in_with_the_markers(cluster: SimCluster) -> None:
    """A PodGroup's members that request both markers are admitted together by vulcan."""
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "opted-in"},
            "spec": {"minMember": 2},
        }
    )
    for index in range(2):
        pod = pod_manifest(
            f"opted-in-{index}",
            cpu="1",
            duration="forever",
            annotations={"scheduling.k8s.io/group-name": "opted-in"},
            schedulerName="volcano",
        )
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        for marker in (SCHEDULING_MARKER, BINDING_MARKER):
            limits[marker] = requests[marker] = "1"
        cluster.request("/api/v1/namespaces/default/pods", pod)
    wait_for(
        "the opted-in gang to run",
        lambda: all(phase(cluster.pod(f"opted-in-{i}")) == "Running" for i in range(2)),
        60,
    )
    events = {e["reason"] for e in cluster.events("opted-in-0")}
    assert "GangCommitted" in events, events


def test_a_gang_member_with_the_scheduling_marker_alone_is_refused_not_bound_by_halves(
    cluster: SimCluster,
) -> None:
    """With `vulcan.sh/managed` but not `vulcan.sh/managed-bind`, kube-scheduler would bind the
    member itself (the bind entry takes only pods with its marker), past the gang barrier: the
    extender (`--bind-marker`, as the overlay runs it) refuses it on every node, saying so."""
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "half-opted"},
            "spec": {"minMember": 2},
        }
    )
    # The extender has seen the group (it says it waits for its members) before the pods
    # come: a member refused as "podgroup not found" is retried only when its gang is admitted,
    # which this one never is (a separate race, noted on issue 48).
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/half-opted"
    wait_for(
        "the extender to see the PodGroup",
        lambda: ((cluster.get(path) or {}).get("status") or {}).get("conditions"),
        30,
    )
    members = [f"half-opted-{index}" for index in range(2)]
    for name in members:
        pod = pod_manifest(
            name,
            cpu="1",
            duration="forever",
            annotations={"scheduling.k8s.io/group-name": "half-opted"},
            schedulerName="volcano",
        )
        pod["spec"]["containers"][0]["resources"]["limits"][SCHEDULING_MARKER] = "1"
        cluster.request("/api/v1/namespaces/default/pods", pod)

    def refused(name: str) -> bool:
        conditions = ((cluster.pod(name) or {}).get("status") or {}).get("conditions") or ()
        return any(
            c.get("type") == "PodScheduled"
            and f"lacks the bind marker {BINDING_MARKER}" in str(c.get("message"))
            for c in conditions
        )

    wait_for(
        "both members to be refused, naming the marker", lambda: all(map(refused, members)), 60
    )
    assert not any((cluster.pod(n) or {}).get("spec", {}).get("nodeName") for n in members)
    cluster.kubectl("delete", "pod", *members, "--wait=false")
