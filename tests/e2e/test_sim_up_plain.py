"""`vulcan sim up` without vulcan: the stand-in alone schedules plain pods — and reproduces the
gang deadlock vulcan exists to prevent."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import (
    SimCluster,
    phase,
    pod_manifest,
    scheduled_condition,
    start_cluster,
    wait_for,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    # 4 nodes with one GPU each: 4 GPUs in the cluster.
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-plain"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=8,memory=32Gi,nvidia.com/gpu=1",
        "--pod-duration",
        "1s",
    )


def test_plain_pods_are_scheduled_run_and_succeed(cluster: SimCluster) -> None:
    assert not any(line.startswith("vulcan extender:") for line in cluster.lines)
    cluster.apply([pod_manifest(f"hello-{i}", duration=None) for i in range(4)])
    for i in range(4):
        pod = wait_for(
            f"hello-{i} Succeeded",
            lambda i=i: (
                phase(cluster.pod(f"hello-{i}")) == "Succeeded" and cluster.pod(f"hello-{i}")
            ),
        )
        # Ran for the default --pod-duration, with kubelet-style statuses.
        status = pod["status"]["containerStatuses"][0]
        assert status["state"]["terminated"]["reason"] == "Completed"
        assert status["state"]["terminated"]["exitCode"] == 0
        assert scheduled_condition(pod)["status"] == "True"


def test_two_gangs_on_four_gpus_deadlock_without_vulcan(cluster: SimCluster) -> None:
    """Volcano's founding case: two jobs of 4 workers, 1 GPU each, on 4 GPUs. Created together,
    kube-scheduler places pods one by one — 2 of each — and both jobs hang forever, each waiting
    for GPUs the other holds."""
    groups = []
    for job in ("tf-a", "tf-b"):
        groups.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": job},
                "spec": {"minMember": 4},
            }
        )
    cluster.apply(groups)
    workers = []
    for index in range(4):  # created interleaved, as two controllers racing would
        for job in ("tf-a", "tf-b"):
            manifest = pod_manifest(
                f"{job}-worker-{index}",
                cpu="1",
                duration="0.5s",
                labels={"job": job},
                annotations={"scheduling.k8s.io/group-name": job},
            )
            manifest["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
            workers.append(manifest)
    cluster.apply(workers)

    def running(job: str) -> int:
        return sum(phase(p) == "Running" for p in cluster.pods(selector=f"job={job}"))

    wait_for("4 GPUs taken", lambda: running("tf-a") + running("tf-b") == 4)
    assert (running("tf-a"), running("tf-b")) == (2, 2)  # half of each gang placed
    for job in ("tf-a", "tf-b"):
        for pod in cluster.pods(selector=f"job={job}"):
            if phase(pod) == "Pending":
                condition = wait_for(
                    "FailedScheduling",
                    lambda p=pod: scheduled_condition(cluster.pod(p["metadata"]["name"])),
                )
                assert "4 Insufficient nvidia.com/gpu" in condition["message"]
    # Every worker would finish in 0.5 s once its gang runs; the only way to show that nothing
    # happens is to give it several times that long.
    time.sleep(2.0)
    phases = [phase(p) for job in ("tf-a", "tf-b") for p in cluster.pods(selector=f"job={job}")]
    assert sorted(phases) == ["Pending"] * 4 + ["Running"] * 4
    cluster.kubectl("delete", "pods", "-l", "job in (tf-a,tf-b)", "--wait=false")


def test_kubectls_create_verbs_send_protobuf_and_work(cluster: SimCluster) -> None:
    """kubectl sends built-in kinds as protobuf (`kubectl create namespace` on a fresh
    cluster is a user's first command): each is stored as the JSON object it encodes; and
    `kubectl scale` works through the scale subresource."""
    cluster.kubectl("create", "namespace", "team-a")
    cluster.kubectl("create", "configmap", "settings", "--from-literal=mode=fast", "-n", "team-a")
    cluster.kubectl(
        "create", "secret", "generic", "token", "--from-literal=pw=hunter2", "-n", "team-a"
    )
    cluster.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2", "-n", "team-a")
    cluster.kubectl("create", "job", "once", "--image=busybox", "-n", "team-a", "--", "echo", "hi")
    namespace = cluster.get("/api/v1/namespaces/team-a")
    assert namespace is not None and namespace["metadata"]["name"] == "team-a"
    settings = cluster.get("/api/v1/namespaces/team-a/configmaps/settings")
    assert settings is not None and settings["data"] == {"mode": "fast"}
    token = cluster.get("/api/v1/namespaces/team-a/secrets/token")
    assert token is not None and token["data"] == {"pw": "aHVudGVyMg=="}  # base64 of hunter2
    web = cluster.get("/apis/apps/v1/namespaces/team-a/deployments/web")
    assert web is not None and web["spec"]["replicas"] == 2
    assert web["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"
    assert web["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    # kubectl scale goes through the scale subresource (autoscaling/v1 Scale).
    cluster.kubectl("scale", "deployment", "web", "--replicas=3", "-n", "team-a")
    web = cluster.get("/apis/apps/v1/namespaces/team-a/deployments/web")
    assert web is not None and web["spec"]["replicas"] == 3
    scale = cluster.get("/apis/apps/v1/namespaces/team-a/deployments/web/scale")
    assert scale is not None and scale["kind"] == "Scale"
    assert scale["spec"] == {"replicas": 3} and scale["status"]["selector"] == "app=web"
    job = cluster.get("/apis/batch/v1/namespaces/team-a/jobs/once")
    assert job is not None
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
