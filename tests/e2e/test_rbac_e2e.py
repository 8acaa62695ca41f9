"""The install's RBAC proven on a run (`vulcan sim up --rbac`): the extender and the controllers
use the tokens of the install's ServiceAccounts, the embedded API server authorizes every call
by the install's ClusterRoles and Roles (manifests/base), and a Volcano Job runs to Completed
with not one call of theirs refused."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from tests.e2e.conftest import SimCluster, start_cluster, wait_for
from tests.helpers import VOLCANO_FIXTURES

COMPONENTS = {
    "system:serviceaccount:vulcan-system:vulcan-extender",
    "system:serviceaccount:vulcan-system:vulcan-controllers",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-rbac"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=32,memory=128Gi,nvidia.com/gpu=8",
        "--with-extender",
        "--with-controllers",
        "--rbac",
        "--pod-duration",
        "2s",
    )


def test_a_volcano_job_completes_with_no_call_of_vulcan_refused(cluster: SimCluster) -> None:
    (job,) = [
        d
        for d in yaml.safe_load_all((VOLCANO_FIXTURES / "mpi-job.yaml").read_text())
        if d and d.get("kind") == "Job"
    ]
    cluster.request("/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs", job)

    def phase() -> str:
        found = cluster.get("/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/mpi-job")
        return ((found or {}).get("status") or {}).get("state", {}).get("phase", "")

    wait_for("mpi-job to complete under RBAC", lambda: phase() == "Completed", 120)
    decisions = [
        json.loads(line) for line in (cluster.state / "audit.log").read_text().splitlines()
    ]
    ours = [d for d in decisions if d["user"] in COMPONENTS]
    refused = [d for d in ours if not d["allowed"]]
    assert not refused, refused[:5]
    # They did run as themselves: the extender bound the job's pods, the controllers made them.
    assert any(
        d["resource"] == "pods" and d["subresource"] == "binding" and d["verb"] == "create"
        for d in ours
        if d["user"].endswith("vulcan-extender")
    )
    assert any(
        d["resource"] == "pods" and d["verb"] == "create"
        for d in ours
        if d["user"].endswith("vulcan-controllers")
    )
    # Without a token: refused.
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(cluster.api + "/api/v1/pods", timeout=10, context=cluster.ssl)
    assert anonymous.value.code == 403


def test_kubectl_works_over_https_and_can_i_answers_per_service_account(
    cluster: SimCluster,
) -> None:
    """kubectl sends its token (HTTPS), so the admin's everyday verbs work, and `kubectl auth
    can-i` answers for each of the install's ServiceAccounts what their roles grant."""
    cluster.kubectl("create", "namespace", "team-rbac")
    assert cluster.kubectl("auth", "can-i", "delete", "nodes").strip() == "yes"
    extender = str(cluster.state / "extender.kubeconfig")

    def can_i(*args: str) -> str:
        return cluster.kubectl("--kubeconfig", extender, "auth", "can-i", *args, check=False)

    assert can_i("create", "pods", "--subresource=binding").strip() == "yes"
    assert can_i("delete", "pods").strip() == "no"
    assert can_i("patch", "podgroups.scheduling.volcano.sh").strip() == "yes"
