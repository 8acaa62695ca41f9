"""Volcano Jobs end to end: users' Volcano YAML (shared/fixtures/volcano) created unchanged with
kubectl on `vulcan sim up --with-extender --with-controllers` runs to Completed: the job
controller makes the PodGroup, vulcan's extender admits it, the pods are created, scheduled
as a gang, run (2 s each here) and the job completes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import SimCluster, start_cluster, wait_for
from tests.helpers import VOLCANO_FIXTURES


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-jobs"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=32,memory=128Gi,nvidia.com/gpu=8",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "2s",
    )


def job(cluster: SimCluster, name: str) -> dict[str, Any]:
    return cluster.get(f"/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/{name}") or {}


def phase(cluster: SimCluster, name: str) -> str:
    return ((job(cluster, name).get("status") or {}).get("state") or {}).get("phase", "")


@pytest.mark.parametrize(
    ("fixture", "name", "pods"),
    [
        ("tensorflow-benchmark.yaml", "tensorflow-benchmark", 3),
        ("mpi-job.yaml", "mpi-job", 3),
        ("lm-mpi-job.yaml", "lm-mpi-job", 4),
        ("elastic-job.yaml", "test-job", 10),
    ],
)
def test_a_volcano_fixture_runs_unchanged_to_completed(
    cluster: SimCluster, fixture: str, name: str, pods: int
) -> None:
    docs = [
        d
        for d in yaml.safe_load_all((VOLCANO_FIXTURES / fixture).read_text())
        if d and d.get("kind") == "Job"
    ]
    cluster.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(docs))
    seen: set[str] = set()
    groups: set[str] = set()

    def completed() -> bool:
        for pod in cluster.pods(selector=f"volcano.sh/job-name={name}"):
            groups.add(pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"])
            if pod["spec"].get("nodeName"):
                seen.add(pod["metadata"]["name"])
        return phase(cluster, name) == "Completed"

    wait_for(f"job {name} to complete (phase {phase(cluster, name)!r})", completed, 120)
    assert len(seen) >= pods, seen  # its pods were scheduled and ran
    status = job(cluster, name)["status"]
    assert status["minAvailable"] == job(cluster, name)["spec"]["minAvailable"]
    listed = cluster.kubectl("get", "vcjob", name, "-o", "jsonpath={.status.state.phase}")
    assert listed == "Completed"
    # Its pods named its PodGroup `<job>-<job uid>` (a finished job's PodGroup is deleted
    # with its last kill, as Volcano does).
    assert groups == {f"{name}-{job(cluster, name)['metadata']['uid']}"}, groups
