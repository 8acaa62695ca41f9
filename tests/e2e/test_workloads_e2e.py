"""Everyday workloads on `vulcan sim up`, driven with the real kubectl as a user would: the
embedded cluster's Deployment, ReplicaSet, StatefulSet, DaemonSet and Job controllers make the
pods (none are created by hand), the stand-in schedules them, hollow kubelets run them; and
Volcano's PodGroup cases for workloads (a ReplicaSet, a Deployment rollover, a batch Job with
`schedulerName: volcano` and `scheduling.volcano.sh/group-min-member`) run with vulcan's
extender and controllers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import SimCluster, phase, start_cluster, wait_for

PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
MIN_MEMBER = "scheduling.volcano.sh/group-min-member"
GATE = "scheduling.volcano.sh/queue-allocation-gate"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-workloads"),
        "--nodes",
        "3",
        "--node-profile",
        "cpu=8,memory=32Gi",
        "--pod-duration",
        "forever",
        "--with-extender",
        "--with-controllers",
        "--gang-backoff",
        "1s",
    )


def running(cluster: SimCluster, selector: str) -> list[dict[str, Any]]:
    return [
        p
        for p in cluster.pods(selector=selector)
        if phase(p) == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def ready(pod: dict[str, Any] | None) -> bool:
    conditions = (pod or {}).get("status", {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_create_scale_and_roll_a_deployment(cluster: SimCluster) -> None:
    out = cluster.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=3")
    assert out.strip() == "deployment.apps/web created"
    wait_for("3 Running pods", lambda: len(running(cluster, "app=web")) == 3)
    out = cluster.kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in out
    header, row = cluster.kubectl("get", "deploy", "web").splitlines()
    assert header.split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert row.split()[:4] == ["web", "3/3", "3", "3"]
    cluster.kubectl("scale", "deployment/web", "--replicas=5")
    cluster.kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert len(running(cluster, "app=web")) == 5
    cluster.kubectl("scale", "deployment/web", "--replicas=2")
    wait_for("2 pods left", lambda: len(cluster.pods(selector="app=web")) == 2)
    # A new image rolls through a second ReplicaSet.
    cluster.kubectl("set", "image", "deployment/web", "nginx=nginx:1.28")
    out = cluster.kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert "successfully rolled out" in out
    images = {p["spec"]["containers"][0]["image"] for p in running(cluster, "app=web")}
    assert images == {"nginx:1.28"}
    sets = cluster.kubectl("get", "rs", "-l", "app=web", "-o", "name").split()
    assert len(sets) == 2
    out = cluster.kubectl("get", "all")
    assert "deployment.apps/web" in out and "replicaset.apps/web-" in out
    cluster.kubectl("delete", "deployment", "web")


STATEFULSET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: pg, image: postgres}]}
"""


def test_a_statefulset_comes_up_in_order(cluster: SimCluster) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=STATEFULSET)
    deadline = time.monotonic() + 60
    while True:
        pods = {p["metadata"]["name"]: p for p in cluster.pods(selector="app=db")}
        # OrderedReady: db-N exists only once db-(N-1) is Running and Ready.
        for ordinal in (1, 2):
            if f"db-{ordinal}" in pods:
                assert ready(pods.get(f"db-{ordinal - 1}")), sorted(pods)
        if len(pods) == 3 and all(ready(p) for p in pods.values()):
            break
        assert time.monotonic() < deadline, sorted(pods)
        time.sleep(0.05)
    assert pods["db-0"]["spec"]["hostname"] == "db-0"
    assert pods["db-0"]["spec"]["subdomain"] == "db"
    out = cluster.kubectl("rollout", "status", "statefulset/db", "--timeout=60s")
    assert "3 pods at revision" in out
    header, row = cluster.kubectl("get", "sts", "db").splitlines()
    assert header.split() == ["NAME", "READY", "AGE"] and row.split()[:2] == ["db", "3/3"]
    cluster.kubectl("delete", "statefulset", "db")


def test_a_daemonset_runs_one_pod_per_node(cluster: SimCluster) -> None:
    daemon = yaml.safe_load(STATEFULSET.replace("db", "agent"))
    daemon["kind"] = "DaemonSet"
    del daemon["spec"]["replicas"], daemon["spec"]["serviceName"]
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(daemon))
    wait_for("3 daemon pods", lambda: len(running(cluster, "app=agent")) == 3)
    nodes = {p["spec"]["nodeName"] for p in running(cluster, "app=agent")}
    assert len(nodes) == 3
    row = cluster.kubectl("get", "ds", "agent").splitlines()[1].split()
    assert row[:6] == ["agent", "3", "3", "3", "3", "3"]
    cluster.kubectl("delete", "daemonset", "agent")


def batch_job(name: str, completions: int, parallelism: int, **extra: Any) -> dict[str, Any]:
    annotations = extra.pop("annotations", {})
    pod_annotations = {"vulcan.sh/sim-duration": "0.5s", **extra.pop("pod_annotations", {})}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            **extra,
            "template": {
                "metadata": {"annotations": pod_annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "schedulerName": extra.pop("scheduler", "default-scheduler"),
                    "containers": [{"name": "work", "image": "busybox"}],
                },
            },
        },
    }


def test_a_batch_job_with_three_completions_completes(cluster: SimCluster) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(batch_job("count", 3, 2)))
    cluster.kubectl("wait", "--for=condition=complete", "job/count", "--timeout=60s")
    header, row = cluster.kubectl("get", "job", "count").splitlines()
    assert header.split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert row.split()[:3] == ["count", "Complete", "3/3"]
    pods = cluster.pods(selector="batch.kubernetes.io/job-name=count")
    assert sorted(phase(p) for p in pods) == ["Succeeded"] * 3


def test_a_failing_job_stops_at_its_backoff_limit(cluster: SimCluster) -> None:
    job = batch_job(
        "broken", 1, 1, backoffLimit=0, pod_annotations={"vulcan.sh/sim-exit-code": "3"}
    )
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(job))
    cluster.kubectl("wait", "--for=condition=failed", "job/broken", "--timeout=60s")
    status = cluster.get("/apis/batch/v1/namespaces/default/jobs/broken")["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert status["failed"] == 1


# ---------------------------------------------------------------- Volcano's PodGroup cases


def podgroup_of(cluster: SimCluster, owner_uid: str) -> dict[str, Any] | None:
    return cluster.get(f"{PODGROUPS}/podgroup-{owner_uid}")


def gang_template(app: str) -> dict[str, Any]:
    """A Volcano workload's pod template, with the queue-allocation gate Volcano's pod webhook
    adds (vulcan has no pod webhook): no member is placed before it is in its group and the
    gang is admitted (the extender lifts the gate then)."""
    return {
        "metadata": {"labels": {"app": app}, "annotations": {GATE: "true"}},
        "spec": {
            "schedulingGates": [{"name": GATE}],
            "schedulerName": "volcano",
            "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }


def test_a_replicaset_runs_as_a_podgroup(cluster: SimCluster) -> None:
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "rs-gang", "annotations": {MIN_MEMBER: "3"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "rs-gang"}},
            "template": gang_template("rs-gang"),
        },
    }
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(rs))
    uid = cluster.get("/apis/apps/v1/namespaces/default/replicasets/rs-gang")["metadata"]["uid"]
    group = wait_for("the ReplicaSet's PodGroup", lambda: podgroup_of(cluster, uid))
    assert group["spec"]["minMember"] == 3
    wait_for("3 gang members running", lambda: len(running(cluster, "app=rs-gang")) == 3)
    for pod in running(cluster, "app=rs-gang"):
        name = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        assert name == f"podgroup-{uid}"
    cluster.kubectl("delete", "replicaset", "rs-gang")


def test_a_gang_deployment_rolls_over_to_a_new_podgroup(cluster: SimCluster) -> None:
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gang", "annotations": {MIN_MEMBER: "2"}},
        "spec": {
            "replicas": 2,
            # A new ReplicaSet is a new gang of minMember pods: it can only start whole, so
            # the rollout surges a whole gang (with the default 25% surge the new ReplicaSet
            # would hold 1 of 2 members and wait forever, as it would under Volcano).
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 0},
            },
            "selector": {"matchLabels": {"app": "gang"}},
            "template": gang_template("gang"),
        },
    }
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(deploy))
    cluster.kubectl("rollout", "status", "deployment/gang", "--timeout=60s")

    def replicasets() -> dict[str, dict[str, Any]]:
        items = cluster.get("/apis/apps/v1/namespaces/default/replicasets?labelSelector=app=gang")
        return {r["metadata"]["uid"]: r for r in items["items"]}

    (first,) = replicasets()
    group = wait_for("the first PodGroup", lambda: podgroup_of(cluster, first))
    assert group["spec"]["minMember"] == 2
    cluster.kubectl("rollout", "restart", "deployment/gang")
    second = wait_for("a new ReplicaSet", lambda: next(iter(set(replicasets()) - {first}), None))
    cluster.kubectl("rollout", "status", "deployment/gang", "--timeout=90s")
    group = wait_for("the new ReplicaSet's PodGroup", lambda: podgroup_of(cluster, second))
    assert group["spec"]["minMember"] == 2
    pods = running(cluster, "app=gang")
    assert len(pods) == 2
    groups = {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods}
    assert groups == {f"podgroup-{second}"}
    assert replicasets()[first]["spec"]["replicas"] == 0
    cluster.kubectl("delete", "deployment", "gang")


def test_a_batch_job_runs_as_a_podgroup(cluster: SimCluster) -> None:
    job = batch_job(
        "gang-job",
        2,
        2,
        annotations={MIN_MEMBER: "2"},
        scheduler="volcano",
        pod_annotations={GATE: "true"},
    )
    job["spec"]["template"]["spec"]["schedulingGates"] = [{"name": GATE}]
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(job))
    uid = cluster.get("/apis/batch/v1/namespaces/default/jobs/gang-job")["metadata"]["uid"]
    group = wait_for("the Job's PodGroup", lambda: podgroup_of(cluster, uid))
    assert group["spec"]["minMember"] == 2
    cluster.kubectl("wait", "--for=condition=complete", "job/gang-job", "--timeout=60s")
