"""Re-applying an unchanged Volcano Job or JobFlow with the real kubectl, through vulcan's
admission webhooks, is accepted and changes nothing (GitOps tools such as Argo CD and Flux
re-apply constantly). The mutating webhook added task defaults (maxRetry, minAvailable, names) at
create that the manifest lacks; it adds them again on update, so the re-applied object equals the
stored one and the API server writes nothing (resourceVersion unchanged)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml

from tests.integration.test_admission_webhooks import (  # noqa: F401  (module fixture)
    KUBECTL,
    Cluster,
    cluster,
)

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def job_manifest(name: str, replicas: int = 2) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {
                "minAvailable": 3,
                "tasks": [
                    {
                        "name": "ps",
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"name": "ps", "image": "tf:2"}]}},
                    },
                    {
                        # no name: the webhook names it default1
                        "replicas": replicas,
                        "template": {"spec": {"containers": [{"name": "worker", "image": "tf:2"}]}},
                    },
                ],
            },
        }
    )


def flow_manifests(name: str) -> str:
    template = {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": f"{name}-a", "namespace": "team-a"},
        "spec": {
            "tasks": [
                {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ]
        },
    }
    flow = {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "jobRetainPolicy": "delete",
            "flows": [
                {"name": f"{name}-a"},
                {"name": f"{name}-b", "dependsOn": {"targets": [f"{name}-a"]}},
            ],
        },
    }
    second = {**template, "metadata": {"name": f"{name}-b", "namespace": "team-a"}}
    return yaml.safe_dump_all([template, second, flow])


def kubectl(cluster: Cluster, *args: str, stdin: str) -> str:  # noqa: F811
    result = subprocess.run(
        [
            KUBECTL or "kubectl",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--cache-dir",
            str(cluster.tmp / "kubectl-cache"),
            "--request-timeout=20s",
            *args,
            "-f",
            "-",
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def stored(cluster: Cluster, path: str) -> dict[str, Any]:  # noqa: F811
    status, body = cluster.call("GET", path)
    assert status == 200, body
    return body


JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/team-a/jobs"
FLOWS = "/apis/flow.volcano.sh/v1alpha1/namespaces/team-a"


@pytest.mark.parametrize(
    ("mode", "flags"), [("client-side", ()), ("server-side", ("--server-side",))]
)
def test_reapplying_an_unchanged_job_changes_nothing(
    cluster: Cluster,  # noqa: F811
    mode: str,
    flags: tuple[str, ...],
) -> None:
    name = f"reapply-{mode}"
    manifest = job_manifest(name)
    kubectl(cluster, "apply", *flags, stdin=manifest)
    first = stored(cluster, f"{JOBS}/{name}")
    tasks = first["spec"]["tasks"]
    assert [(t["name"], t["maxRetry"], t["minAvailable"]) for t in tasks] == [
        ("ps", 3, 1),
        ("default1", 3, 2),
    ]
    for _ in range(2):
        out = kubectl(cluster, "apply", *flags, stdin=manifest)
        assert name in out
        again = stored(cluster, f"{JOBS}/{name}")
        # Nothing is written: the API server finds the update equal to what it stores. (For
        # the client-side apply, its merge patch replaces spec.tasks, the field manager takes
        # the tasks for kubectl-client-side-apply with a new time, the webhook restores the
        # defaults, and kube-apiserver reverts a time that is the only change; a real
        # kube-apiserver v1.36.2 gave the same unchanged resourceVersion.)
        assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        assert again == first
    # A real change the validator allows (replicas) still goes through, defaults kept.
    kubectl(cluster, "apply", *flags, stdin=job_manifest(name, replicas=4))
    changed = stored(cluster, f"{JOBS}/{name}")
    assert [(t["name"], t["replicas"], t["maxRetry"]) for t in changed["spec"]["tasks"]] == [
        ("ps", 1, 3),
        ("default1", 4, 3),
    ]
    assert changed["metadata"]["generation"] == first["metadata"]["generation"] + 1


@pytest.mark.parametrize(
    ("mode", "flags"), [("client-side", ()), ("server-side", ("--server-side",))]
)
def test_reapplying_an_unchanged_jobflow_changes_nothing(
    cluster: Cluster,  # noqa: F811
    mode: str,
    flags: tuple[str, ...],
) -> None:
    name = f"flow-{mode}"
    manifests = flow_manifests(name)
    kubectl(cluster, "apply", *flags, stdin=manifests)
    paths = [f"{FLOWS}/jobflows/{name}", *(f"{FLOWS}/jobtemplates/{name}-{s}" for s in "ab")]
    before = [stored(cluster, p) for p in paths]
    for _ in range(2):
        kubectl(cluster, "apply", *flags, stdin=manifests)
        after = [stored(cluster, p) for p in paths]
        # Nothing in these manifests is defaulted by a webhook: every re-apply is a no-op.
        assert [o["metadata"]["resourceVersion"] for o in after] == [
            o["metadata"]["resourceVersion"] for o in before
        ]
        assert json.dumps(after, sort_keys=True) == json.dumps(before, sort_keys=True)
