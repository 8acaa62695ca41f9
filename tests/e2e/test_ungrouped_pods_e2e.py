"""A pod of vulcan's scheduler (`schedulerName: volcano`) that the PodGroup controller has not
grouped yet is never bound: Volcano's scheduler has no job for such a pod until its pg
controller annotates it, and vulcan's extender refuses it until then (unresolvable, with the
reason). Users write Volcano's Deployment shape with no scheduling gate; the ReplicaSet
controller (sim.controllers, as kube-controller-manager's) makes the pods.

The `vulcan controllers` process is paused (SIGSTOP) while the Deployment's pods are made, so
the race the real cluster showed (kube-scheduler placing the pods before the pg controller
grouped them) is lost by the scheduler every time, not by chance.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.conftest import (
    SimCluster,
    phase,
    pod_manifest,
    scheduled_condition,
    start_cluster,
    wait_for,
)

GROUP_KEY = "scheduling.k8s.io/group-name"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
WAITING = "waiting for its PodGroup"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-ungrouped"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=8,memory=32Gi",
        "--with-extender",
        "--with-controllers",
        "--gang-backoff",
        "1s",
    )


def deployment(name: str, replicas: int, min_member: int) -> dict[str, Any]:
    """Volcano's example shape: the annotation and `schedulerName: volcano`, no gate."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "annotations": {"scheduling.volcano.sh/group-min-member": str(min_member)},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {"vulcan.sh/sim-duration": "forever"},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "7"}, "limits": {"cpu": "7"}},
                        }
                    ],
                },
            },
        },
    }


def hold(what: str, predicate: Callable[[], bool], seconds: float) -> None:
    """`predicate` holds at every look for `seconds` (a thing that must NOT happen)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate(), f"{what} stopped holding"
        time.sleep(0.05)


def bound(cluster: SimCluster, app: str) -> list[str]:
    return [
        p["spec"]["nodeName"]
        for p in cluster.pods(selector=f"app={app}")
        if p["spec"].get("nodeName")
    ]


def test_a_deployment_gang_without_the_gate_is_never_bound_before_it_is_grouped(
    cluster: SimCluster,
) -> None:
    controllers = cluster.component_pid("controllers")
    os.kill(controllers, signal.SIGSTOP)
    try:
        cluster.apply(deployment("trainer", replicas=3, min_member=4))
        wait_for("the ReplicaSet's 3 pods", lambda: len(cluster.pods(selector="app=trainer")) == 3)
        hold("no ungrouped pod to be bound", lambda: not bound(cluster, "trainer"), 2.0)
        # kube-scheduler tried them and vulcan refused, saying why.
        wait_for(
            "the ungrouped pods to be refused with the reason",
            lambda: all(
                WAITING in scheduled_condition(p).get("message", "")
                for p in cluster.pods(selector="app=trainer")
            ),
        )
    finally:
        os.kill(controllers, signal.SIGCONT)

    def grouped() -> list[dict[str, Any]]:
        pods = cluster.pods(selector="app=trainer")
        ok = len(pods) == 3 and all(p["metadata"]["annotations"].get(GROUP_KEY) for p in pods)
        return pods if ok else []

    pods = wait_for("the 3 pods to be put in their PodGroup", grouped)
    group = pods[0]["metadata"]["annotations"][GROUP_KEY]
    assert group == f"podgroup-{pods[0]['metadata']['ownerReferences'][0]['uid']}"
    assert cluster.get(f"{PODGROUPS}/{group}")["spec"]["minMember"] == 4
    # 3 of 4: the gang is not admitted, so still nothing is bound.
    hold("no member of the incomplete gang to be bound", lambda: not bound(cluster, "trainer"), 2.0)
    cluster.kubectl("scale", "deployment", "trainer", "--replicas=4")
    nodes = wait_for(
        "the gang of 4 to be bound",
        lambda: (n := bound(cluster, "trainer")) and len(n) == 4 and n,
        60,
    )
    assert len(set(nodes)) == 4, nodes  # 7 cpu each: one per node
    cluster.kubectl("delete", "deployment", "trainer", "--wait=true")


def test_an_ungrouped_pod_runs_once_grouped_and_other_schedulers_pods_are_unaffected(
    cluster: SimCluster,
) -> None:
    """A bare volcano pod waits only until the pg controller gives it its own group
    (minMember 1), then is retried at once (its update re-queues it); a default-scheduler pod
    is no concern of the rule."""
    cluster.apply(
        [
            pod_manifest("lone", cpu="1", duration="forever", schedulerName="volcano"),
            pod_manifest("plain", cpu="1", duration="forever"),
        ]
    )
    wait_for(
        "both pods to run",
        lambda: all(phase(cluster.pod(n)) == "Running" for n in ("lone", "plain")),
    )
    lone = cluster.pod("lone")
    assert lone is not None
    assert lone["metadata"]["annotations"][GROUP_KEY] == f"podgroup-{lone['metadata']['uid']}"
    plain = cluster.pod("plain")
    assert plain is not None and GROUP_KEY not in (plain["metadata"].get("annotations") or {})
    cluster.kubectl("delete", "pod", "lone", "plain", "--wait=false")
