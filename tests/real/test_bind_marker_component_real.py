"""The second-scheduler install with the opt-in component manifests/components/bind-marker on a
real control plane: kube-scheduler v1.36 sends vulcan only the binds of pods carrying
vulcan.sh/managed-bind and binds every other pod itself. A plain pod binds without vulcan's
bind; a Volcano Job's pods get the marker from the job controller and bind whole through
vulcan; a user's own gang without the marker is refused, naming it, and never half bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from core.api.keys import BINDING_MARKER
from tests.e2e.conftest import metric, pod_manifest, wait_for
from tests.real.conftest import RealCluster
from tests.real.test_second_scheduler_real import hold

pytestmark = pytest.mark.real

INSTALL_MODE = "second-scheduler"
INSTALL_COMPONENTS = ("bind-marker",)
NODE_PROFILES = ["count=4,cpu=8,memory=32Gi,nvidia.com/gpu=1"]
EXTENDER_FLAGS = ("--gang-backoff=1s",)
POD_DURATION = "2s"
MANIFESTS = Path(__file__).parent / "manifests"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"


def calls(cluster: RealCluster, verb: str) -> float:
    return metric(cluster.metrics(), "vulcan_extender_requests_total", verb=verb)


def succeeded(cluster: RealCluster, name: str) -> bool:
    return (cluster.pod(name) or {}).get("status", {}).get("phase") == "Succeeded"


def refusal(cluster: RealCluster, name: str) -> str:
    for condition in (cluster.pod(name) or {}).get("status", {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message", ""))
    return ""


def test_a_plain_pod_of_the_volcano_scheduler_binds_without_vulcans_bind(
    cluster: RealCluster,
) -> None:
    binds = calls(cluster, "bind")
    cluster.apply(pod_manifest("plain", cpu="1", schedulerName="volcano"))
    wait_for("the plain pod to succeed", lambda: succeeded(cluster, "plain"), 60)
    assert calls(cluster, "bind") == binds


def test_a_volcano_jobs_pods_carry_the_marker_and_bind_whole_through_vulcan(
    cluster: RealCluster,
) -> None:
    binds = calls(cluster, "bind")
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "marked"},
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 3,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "2"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
    cluster.apply(job)

    def completed() -> bool:
        found = cluster.get(f"{JOBS}/marked") or {}
        return (found.get("status") or {}).get("state", {}).get("phase") == "Completed"

    wait_for("the job to complete", completed, 120)
    pods = cluster.pods(selector="volcano.sh/job-name=marked")
    assert len(pods) == 3
    for pod in pods:
        assert pod["spec"]["containers"][0]["resources"]["limits"][BINDING_MARKER] == "1"
    assert calls(cluster, "bind") >= binds + 3  # through the gang barrier


def test_a_users_gang_without_the_marker_is_refused_and_binds_whole_once_marked(
    cluster: RealCluster,
) -> None:
    """competing-gangs.yaml's tf-a as users write it (no marker): kube-scheduler would bind
    its members itself, so vulcan's filter refuses them on every node, naming the marker and the
    fix; made again with the marker, the gang binds whole."""
    docs = [
        d
        for d in yaml.safe_load_all((MANIFESTS / "competing-gangs.yaml").read_text())
        if d and "tf-b" not in d["metadata"]["name"]
    ]
    members = [d["metadata"]["name"] for d in docs if d["kind"] == "Pod"]
    assert len(members) == 4
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    wait_for(
        "every member to be refused for want of the bind marker",
        lambda: all(
            f"lacks the bind marker {BINDING_MARKER}" in refusal(cluster, n) for n in members
        ),
        60,
    )
    said = refusal(cluster, members[0])
    assert "gang default/tf-a (minMember 4)" in said, said
    assert f"resources.limits {{{BINDING_MARKER}: 1}}" in said, said
    hold(
        "no member to be bound",
        lambda: not any((cluster.pod(n) or {}).get("spec", {}).get("nodeName") for n in members),
        3.0,
    )

    cluster.kubectl("delete", "pod", *members, "--wait=true")
    pods: list[dict[str, Any]] = [d for d in docs if d["kind"] == "Pod"]
    for pod in pods:
        pod["spec"]["containers"][0]["resources"]["limits"][BINDING_MARKER] = "1"
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(pods))
    wait_for("the marked gang to run", lambda: all(succeeded(cluster, n) for n in members), 90)
    nodes = {cluster.pod(n)["spec"]["nodeName"] for n in members}
    assert len(nodes) == 4, nodes
