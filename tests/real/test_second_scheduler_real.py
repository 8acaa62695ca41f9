"""vulcan as a second scheduler on a real control plane (manifests/overlays/second-scheduler):
the stock kube-scheduler v1.36 named `volcano`, configured by the install's ConfigMap, calls
vulcan's extender; the cluster's own kube-scheduler schedules everything else. Users' YAML
(tests/real/manifests) applied with kubectl, as users do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.test_gang_e2e import GangWatch
from tests.real.conftest import RealCluster

pytestmark = pytest.mark.real

INSTALL_MODE = "second-scheduler"
NODE_PROFILES = ["count=4,cpu=8,memory=32Gi,nvidia.com/gpu=1"]
EXTENDER_FLAGS = ("--gang-backoff=1s",)
POD_DURATION = "2s"
MANIFESTS = Path(__file__).parent / "manifests"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"


def job_phase(cluster: RealCluster, name: str) -> str:
    job = cluster.get(f"{JOBS}/{name}") or {}
    return ((job.get("status") or {}).get("state") or {}).get("phase", "")


def delete(cluster: RealCluster, manifest: Path) -> None:
    """`kubectl delete -f` and wait until the objects (and their pods) are gone, so the next
    test starts on empty nodes."""
    cluster.kubectl("delete", "-f", str(manifest), "--ignore-not-found", "--wait=true")
    wait_for(
        "the pods of the previous test to be gone",
        lambda: not cluster.pods(),
        60,
    )


def test_two_competing_gangs_run_one_after_the_other_never_half_bound(
    cluster: RealCluster,
) -> None:
    manifest = MANIFESTS / "competing-gangs.yaml"
    cluster.apply_yaml(manifest)
    watch = GangWatch(cluster, {"tf-a": 4, "tf-b": 4})
    watch.until("both gangs to complete", lambda: len(watch.done_at) == 2, timeout=120)
    first, second = sorted(watch.done_at, key=watch.done_at.__getitem__)
    # The second gang got GPUs only once the first was done with them.
    assert watch.bound_at[second] >= watch.done_at[first] - 0.5
    # Each gang's four workers on four different nodes (one GPU each).
    for job in ("tf-a", "tf-b"):
        nodes = {p["spec"]["nodeName"] for p in cluster.pods(selector=f"job={job}")}
        assert len(nodes) == 4, (job, nodes)

    def status(job: str) -> dict[str, Any]:
        return (cluster.get(f"{PODGROUPS}/{job}") or {}).get("status") or {}

    wait_for(
        "the PodGroups to report completion",
        lambda: all(status(j).get("succeeded") == 4 for j in ("tf-a", "tf-b")),
        60,
    )
    delete(cluster, manifest)


def test_the_tensorflow_job_runs_to_completed(cluster: RealCluster) -> None:
    manifest = MANIFESTS / "tensorflow-benchmark.yaml"
    cluster.apply_yaml(manifest)
    name = "tensorflow-benchmark"
    placed: dict[str, str] = {}
    hosts: dict[str, str] = {}

    def completed() -> bool:
        for pod in cluster.pods(selector=f"volcano.sh/job-name={name}"):
            if pod["spec"].get("nodeName"):
                placed[pod["metadata"]["name"]] = pod["spec"]["nodeName"]
        config = cluster.get(f"/api/v1/namespaces/default/configmaps/{name}-svc")
        if config is not None:
            hosts.update(config.get("data") or {})
        return job_phase(cluster, name) == "Completed"

    wait_for(f"{name} to complete (phase {job_phase(cluster, name)!r})", completed, 120)
    # ps and both workers were placed (by the real kube-scheduler, through vulcan).
    assert set(placed) == {f"{name}-ps-0", f"{name}-worker-0", f"{name}-worker-1"}, placed
    # The svc plugin named every member for the others (the headless Service's DNS names).
    assert hosts.get("ps.host") == f"{name}-ps-0.{name}", hosts
    assert hosts.get("worker.host") == f"{name}-worker-0.{name}\n{name}-worker-1.{name}", hosts
    assert cluster.kubectl("get", "vcjob", name, "-o", "jsonpath={.status.state.phase}") == (
        "Completed"
    )
    delete(cluster, manifest)
