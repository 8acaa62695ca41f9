"""`vulcan sim up --with-extender --with-controllers`, driven with kubectl: Volcano-annotated
workloads become gangs without a hand-written PodGroup, and queues follow Commands.

The workloads' pods carry Volcano's queue-allocation scheduling gate, as Volcano's pod webhook
adds it (SchedulingGatesQueueAdmission): the gate holds them until the gang is admitted (the
extender removes it then). Without it the extender refuses a pod until the PodGroup controller
has grouped it (tests/e2e/test_ungrouped_pods_e2e.py).
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import SimCluster, metric, start_cluster, wait_for

PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
GATE = "scheduling.volcano.sh/queue-allocation-gate"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-controllers"),
        "--nodes",
        "3",
        "--node-profile",
        "cpu=2,memory=8Gi",
        "--with-extender",
        "--with-controllers",
        "--gang-backoff",
        "1s",
        # The tests make the workloads' pods themselves, gated as Volcano's pod webhook gates
        # them (the embedded cluster has no such webhook): no ReplicaSet controller to add more.
        "--workload-controllers",
        "none",
    )


def controllers_url(cluster: SimCluster) -> str:
    line = next(x for x in cluster.lines if x.startswith("vulcan controllers:"))
    return line.split()[2]


def replicaset(name: str, replicas: int, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "annotations": {"scheduling.volcano.sh/group-min-member": str(min_member)},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }


def member(name: str, owner: dict[str, Any], app: str, cpu: str = "2") -> dict[str, Any]:
    """A pod as the ReplicaSet controller would make it from the template, plus what Volcano's
    pod webhook adds (the gate); `schedulerName: volcano`, as Volcano workloads ask for."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": app},
            "annotations": {GATE: "true", "vulcan.sh/sim-duration": "forever"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "volcano",
            "schedulingGates": [{"name": GATE}],
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
                }
            ],
        },
    }


def bound(cluster: SimCluster, app: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in cluster.pods(selector=f"app={app}")
        if p["spec"].get("nodeName")
    ]


def test_three_annotated_pods_run_as_a_gang(cluster: SimCluster) -> None:
    cluster.apply(replicaset("trainer", 3, 3))
    rs = cluster.get("/apis/apps/v1/namespaces/default/replicasets/trainer")
    group = f"podgroup-{rs['metadata']['uid']}"
    cluster.apply([member(f"trainer-{i}", rs, "trainer") for i in range(2)])

    def grouped(names: list[str]) -> bool:
        pods = [cluster.pod(n) for n in names]
        return all(
            p
            and (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
            == group
            for p in pods
        )

    wait_for("the first two pods to be grouped", lambda: grouped(["trainer-0", "trainer-1"]))
    pg = cluster.get(f"{PODGROUPS}/{group}")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "default"
    assert pg["spec"]["minResources"]["cpu"] == "6"
    assert pg["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    # Two of three members: the gang is not admitted, so nothing is placed. Watched a while
    # (the extender re-examines waiting gangs every second).
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert not bound(cluster, "trainer"), "a member was bound before the gang was complete"
        time.sleep(0.1)
    cluster.apply(member("trainer-2", rs, "trainer"))
    # From the first member bound to the last: never left partially bound for long.
    first_bound = None
    deadline = time.monotonic() + 60
    while len(names := bound(cluster, "trainer")) < 3:
        assert time.monotonic() < deadline, f"gang not bound: {names}"
        if names and first_bound is None:
            first_bound = time.monotonic()
        assert first_bound is None or time.monotonic() - first_bound < 10, names
        time.sleep(0.05)
    assert grouped(["trainer-0", "trainer-1", "trainer-2"])
    # Each member sits on its own 2-CPU node: the whole gang was placed at once.
    nodes = {cluster.pod(f"trainer-{i}")["spec"]["nodeName"] for i in range(3)}
    assert len(nodes) == 3
    # The owner goes, and with it the group (and the pods).
    cluster.kubectl("delete", "replicaset", "trainer", "--wait=false")
    wait_for("the PodGroup to be collected", lambda: cluster.get(f"{PODGROUPS}/{group}") is None)


def test_queue_commands_and_metrics(cluster: SimCluster) -> None:
    wait_for(
        "the built-in queues",
        lambda: (
            {"root", "default"} <= {q["metadata"]["name"] for q in cluster.get(QUEUES)["items"]}
        ),
    )
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "night"},
            "spec": {"weight": 2},
        }
    )
    queue = wait_for("the queue to open", lambda: _in_state(cluster, "night", "Open"))
    assert queue["spec"]["parent"] == "root"
    cluster.apply(
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": "night-closequeue"},
            "action": "CloseQueue",
            "target": {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "name": "night",
                "uid": queue["metadata"]["uid"],
            },
        }
    )
    wait_for("the queue to close", lambda: _in_state(cluster, "night", "Closed"))
    assert "night-closequeue" not in cluster.kubectl("get", "commands.bus.volcano.sh", "-o", "name")
    assert "Closed" in cluster.kubectl("get", "queue", "night", "-o", "jsonpath={.status.state}")
    # What a user types first: the state and weight are columns.
    header, row = cluster.kubectl("get", "queue", "night").splitlines()
    assert header.split()[:3] == ["NAME", "STATE", "WEIGHT"], header
    assert row.split()[:2] == ["night", "Closed"], row
    text = _metrics(cluster)
    assert metric(text, "vulcan_controller_leader") == 1.0
    assert "volcano_queue_pod_group_pending_count" in text


def _in_state(cluster: SimCluster, name: str, state: str) -> Any:
    queue = cluster.get(f"{QUEUES}/{name}")
    return queue if queue and (queue.get("status") or {}).get("state") == state else None


def _metrics(cluster: SimCluster) -> str:
    with urllib.request.urlopen(controllers_url(cluster) + "/metrics", timeout=10) as response:
        return response.read().decode()


@pytest.mark.parametrize("flags", [("--server-side",), ()], ids=["server-side", "client-side"])
def test_reapplying_an_unchanged_job_and_jobflow_changes_nothing(
    cluster: SimCluster, flags: tuple[str, ...]
) -> None:
    """GitOps tools re-apply constantly. The Job manifest lacks the task defaults the mutating
    webhook added at create (maxRetry, minAvailable); the webhook adds them again on update, so
    the validating webhook sees no change and the spec stays as stored, while the controllers
    run the job."""
    mode = "ssa" if flags else "csa"
    manifest = yaml.safe_dump_all(
        [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": f"again-{mode}"},
                "spec": {
                    "tasks": [
                        {
                            "name": "worker",
                            "replicas": 1,
                            "template": {
                                "metadata": {"annotations": {"vulcan.sh/sim-duration": "1h"}},
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "w",
                                            "image": "busybox",
                                            "resources": {"requests": {"cpu": "100m"}},
                                        }
                                    ]
                                },
                            },
                        }
                    ]
                },
            },
            {
                "apiVersion": "flow.volcano.sh/v1alpha1",
                "kind": "JobFlow",
                "metadata": {"name": f"flow-{mode}"},
                "spec": {"flows": [{"name": f"missing-template-{mode}"}]},
            },
        ]
    )
    cluster.kubectl("apply", *flags, "-f", "-", stdin=manifest)
    job_path = f"/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/again-{mode}"
    flow_path = f"/apis/flow.volcano.sh/v1alpha1/namespaces/default/jobflows/flow-{mode}"
    job, flow = cluster.get(job_path), cluster.get(flow_path)
    assert job["spec"]["tasks"][0]["maxRetry"] == 3
    for _ in range(2):
        cluster.kubectl("apply", *flags, "-f", "-", stdin=manifest)
        again, flow_again = cluster.get(job_path), cluster.get(flow_path)
        assert again["spec"] == job["spec"]
        assert again["metadata"]["generation"] == job["metadata"]["generation"]
        assert flow_again["spec"] == flow["spec"]
        assert flow_again["metadata"]["generation"] == flow["metadata"]["generation"]
