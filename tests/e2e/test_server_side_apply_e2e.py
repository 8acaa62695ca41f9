"""`kubectl apply --server-side` against `vulcan sim up`, as a user types it: creation, updates,
field ownership conflicts with `kubectl scale` and `--force-conflicts`, removal of what the
manifest no longer has, Volcano custom resources, server-side dry runs, and the managed fields
`kubectl get --show-managed-fields` lists."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import KUBECTL, SimCluster, start_cluster, wait_for
from tests.helpers import EXAMPLES, volcano_fixture_files

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: web, tier: front}
data:
  mode: fast
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: front}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports: [{containerPort: 80}]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-ssa"),
        "--nodes",
        "2",
        "--node-profile",
        "cpu=8,memory=32Gi",
        "--with-controllers",
    )


def kubectl(cluster: SimCluster, *args: str, stdin: str | None = None) -> Any:
    """Run kubectl that may fail; return (exit code, stdout, stderr)."""
    assert KUBECTL is not None
    result = subprocess.run(
        [
            KUBECTL,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--cache-dir",
            str(cluster.state / "kubectl-cache"),
            "--request-timeout=20s",
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, result.stdout, result.stderr


def apply(cluster: SimCluster, manifest: str, *flags: str) -> str:
    return cluster.kubectl("apply", "--server-side", *flags, "-f", "-", stdin=manifest)


def get(cluster: SimCluster, *args: str) -> dict[str, Any]:
    return json.loads(cluster.kubectl("get", *args, "-o", "json"))


def managed(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (e["manager"], e["operation"], e.get("subresource", ""))
        for e in obj["metadata"].get("managedFields") or []
    ]


def test_apply_creates_a_configmap_and_updates_it(cluster: SimCluster) -> None:
    out = apply(cluster, CONFIGMAP)
    assert out.strip() == "configmap/settings serverside-applied"
    cm = get(cluster, "configmap", "settings", "--show-managed-fields")
    assert cm["data"] == {"mode": "fast"}
    assert managed(cm) == [("kubectl", "Apply", "")]
    apply(cluster, CONFIGMAP.replace("mode: fast", "mode: safe"))
    assert get(cluster, "configmap", "settings")["data"] == {"mode": "safe"}


def test_removing_a_label_from_the_manifest_removes_it(cluster: SimCluster) -> None:
    apply(cluster, CONFIGMAP)
    apply(cluster, CONFIGMAP.replace("labels: {app: web, tier: front}", "labels: {app: web}"))
    assert get(cluster, "configmap", "settings")["metadata"]["labels"] == {"app": "web"}


def test_scale_then_reapply_conflicts_until_forced(cluster: SimCluster) -> None:
    assert apply(cluster, DEPLOYMENT).strip() == "deployment.apps/web serverside-applied"
    assert get(cluster, "deployment", "web")["spec"]["replicas"] == 2
    apply(cluster, DEPLOYMENT.replace("image: nginx:1.25", "image: nginx:1.26"))
    deployment = get(cluster, "deployment", "web")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"

    cluster.kubectl("scale", "deployment", "web", "--replicas", "5")
    assert get(cluster, "deployment", "web")["spec"]["replicas"] == 5
    code, _, err = kubectl(
        cluster, "apply", "--server-side", "-f", "-", stdin=DEPLOYMENT.replace("1.25", "1.26")
    )
    assert code != 0
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" '
        "using apps/v1: .spec.replicas"
    ) in err
    assert "--force-conflicts" in err  # kubectl's own advice on a conflict
    assert get(cluster, "deployment", "web")["spec"]["replicas"] == 5

    apply(cluster, DEPLOYMENT.replace("1.25", "1.26"), "--force-conflicts")
    deployment = get(cluster, "deployment", "web", "--show-managed-fields")
    assert deployment["spec"]["replicas"] == 2
    # kubectl owns the replicas again; the scale entry had nothing else and is gone. (The
    # Deployment controller's own writes, its revision annotation and the status, are listed
    # under kube-controller-manager, as on a real cluster.)
    users = [m for m in managed(deployment) if m[0] != "kube-controller-manager"]
    assert users == [("kubectl", "Apply", "")]
    [entry] = [e for e in deployment["metadata"]["managedFields"] if e["manager"] == "kubectl"]
    assert "f:replicas" in entry["fieldsV1"]["f:spec"]


def test_show_managed_fields_lists_every_manager(cluster: SimCluster) -> None:
    cluster.kubectl(
        "create", "--validate=false", "-f", "-", stdin=CONFIGMAP.replace("settings", "shared")
    )
    cluster.kubectl("label", "configmap", "shared", "owner=ops")
    out = cluster.kubectl("get", "configmap", "shared", "-o", "yaml", "--show-managed-fields")
    doc = yaml.safe_load(out)
    assert managed(doc) == [("kubectl-create", "Update", ""), ("kubectl-label", "Update", "")]
    label_entry = doc["metadata"]["managedFields"][1]
    assert label_entry["fieldsV1"] == {"f:metadata": {"f:labels": {"f:owner": {}}}}
    assert label_entry["fieldsType"] == "FieldsV1" and label_entry["apiVersion"] == "v1"
    # Without the flag kubectl hides them, as it does against a real cluster.
    plain = yaml.safe_load(cluster.kubectl("get", "configmap", "shared", "-o", "yaml"))
    assert "managedFields" not in plain["metadata"]
    # Apply over what kubectl-create set: equal values are shared, a changed one conflicts.
    apply(cluster, CONFIGMAP.replace("settings", "shared"))
    code, _, err = kubectl(
        cluster,
        "apply",
        "--server-side",
        "-f",
        "-",
        stdin=CONFIGMAP.replace("settings", "shared").replace("fast", "slow"),
    )
    assert code != 0
    assert 'conflict with "kubectl-create" using v1: .data.mode' in err


def test_dry_run_server_stores_nothing(cluster: SimCluster) -> None:
    manifest = CONFIGMAP.replace("settings", "dry")
    out = apply(cluster, manifest, "--dry-run=server")
    assert "configmap/dry serverside-applied (server dry run)" in out
    code, _, err = kubectl(cluster, "get", "configmap", "dry")
    assert code != 0 and "NotFound" in err
    apply(cluster, CONFIGMAP)
    apply(cluster, CONFIGMAP.replace("mode: fast", "mode: dry"), "--dry-run=server")
    assert get(cluster, "configmap", "settings")["data"] == {"mode": "fast"}


def test_apply_volcano_queue_and_job(cluster: SimCluster) -> None:
    queues = (EXAMPLES / "queues.yaml").read_text()
    out = apply(cluster, queues)
    assert "queue.scheduling.volcano.sh/research serverside-applied" in out
    research = get(cluster, "queue", "research", "--show-managed-fields")
    assert research["spec"]["weight"] == 3
    kubectl_entry = next(
        e for e in research["metadata"]["managedFields"] if e["manager"] == "kubectl"
    )
    assert kubectl_entry["operation"] == "Apply"
    assert kubectl_entry["fieldsV1"]["f:spec"] == {"f:reclaimable": {}, "f:weight": {}}
    apply(cluster, queues.replace("weight: 3", "weight: 5"))
    assert get(cluster, "queue", "research")["spec"]["weight"] == 5

    job_file = _fixture_with_kind("Job")
    job_doc = next(d for d in yaml.safe_load_all(job_file.read_text()) if d and d["kind"] == "Job")
    out = apply(cluster, job_file.read_text())
    name = job_doc["metadata"]["name"]
    assert f"job.batch.volcano.sh/{name} serverside-applied" in out
    job = get(cluster, "vcjob", name, "--show-managed-fields")
    assert ("kubectl", "Apply", "") in managed(job)
    # The job controller works on what was applied: its PodGroup appears.
    wait_for(
        f"the PodGroup of {name}",
        lambda: any(
            ref.get("name") == name
            for pg in get(cluster, "podgroups")["items"]
            for ref in pg["metadata"].get("ownerReferences") or []
        ),
    )


def _fixture_with_kind(kind: str) -> Path:
    for path in volcano_fixture_files():
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        if len(docs) == 1 and docs[0].get("kind") == kind:
            return path
    raise AssertionError(f"no single-{kind} example or fixture")
