"""--manage-webhook-certs on a real kube-apiserver: an extender running as the install's
ServiceAccount, with only the rights components/managed-webhook-certs adds, makes the Secret,
sets the CA in both `vulcan-admission` configurations, and the API server, verifying the
extender's certificate against that caBundle, has its webhook refuse a Job naming a missing
queue."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from extender.webhook_configs import webhook_configurations
from tests.e2e.conftest import KUBECTL, wait_for
from tests.helpers import REPO
from tests.real.conftest import RealCluster
from vulcan.real_cluster.processes import free_port, vulcan_argv

pytestmark = pytest.mark.real

NODE_PROFILES = ["count=1,cpu=8,memory=32Gi"]
SECRET_GET = ("-n", "vulcan-system", "get", "secret", "vulcan-webhook-tls", "-o", "json")
RBAC = REPO / "manifests" / "components" / "managed-webhook-certs" / "rbac.yaml"
MISSING_QUEUE_JOB = (Path(__file__).parent / "manifests" / "missing-queue-job.yaml").read_text()


def hypernode(name: str, tier: int, kind: str, member: str) -> str:
    return json.dumps(
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {
                "tier": tier,
                "members": [{"type": kind, "selector": {"exactMatch": {"name": member}}}],
            },
        }
    )


def create(cluster: RealCluster, text: str) -> subprocess.CompletedProcess[str]:
    """`kubectl create -f -` as a user runs it: its status and what it said."""
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(cluster.kubeconfig), "create", "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )


def bundles(cluster: RealCluster) -> list[bytes]:
    found = []
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        config = json.loads(cluster.kubectl("get", kind, "vulcan-admission", "-o", "json"))
        found += [
            base64.b64decode(hook["clientConfig"].get("caBundle") or "")
            for hook in config["webhooks"]
        ]
    return found


def test_the_extender_keeps_the_webhook_certificate_with_the_components_rights(
    cluster: RealCluster,
) -> None:
    install = cluster.install
    cluster.kubectl("apply", "--server-side", "-f", str(RBAC))
    port = free_port()
    # The configurations call the managed extender and trust nothing yet (the launcher's
    # caBundle dropped: the same field manager applies them without it).
    configs = webhook_configurations(url=f"https://127.0.0.1:{port}", ca_bundle="")
    for config in configs:
        for hook in config["webhooks"]:
            hook["clientConfig"].pop("caBundle", None)
    text = yaml.safe_dump_all(configs, sort_keys=False)
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=text)
    assert not any(bundles(cluster))
    try:
        install._run(
            "vulcan-extender-managed",
            vulcan_argv(
                "extender",
                f"--kubeconfig={install.service_account_kubeconfig('vulcan-extender')}",
                "--bind-address=127.0.0.1",
                f"--port={free_port()}",
                "--leader-elect=true",  # a standby beside the install's extender: serves webhooks
                f"--webhook-port={port}",
                "--manage-webhook-certs",
                "--webhook-namespace=vulcan-system",
                "--webhook-extra-hosts=127.0.0.1",
            ),
        )
        secret = json.loads(
            wait_for(
                "the Secret the extender makes",
                lambda: cluster.kubectl(*SECRET_GET, check=False),
                60,
            )
        )
        assert secret["type"] == "kubernetes.io/tls"
        ca = base64.b64decode(secret["data"]["ca.crt"])
        wait_for(
            "every webhook to trust the extender's CA",
            lambda: all(ca.strip() in b for b in bundles(cluster)) or None,
            60,
        )
        # The API server's webhook clients take the new caBundle within moments.
        refused = wait_for(
            "the webhook to judge a Job naming a missing queue",
            lambda: (
                (r := create(cluster, MISSING_QUEUE_JOB)).returncode != 0
                and "denied the request" in r.stderr
                and r
            ),
            30,
        )
        assert 'admission webhook "validatejob.volcano.sh" denied the request' in refused.stderr
        assert "unable to find job queue" in refused.stderr, refused.stderr
        # The HyperNode webhook on the same path: a cycle of HyperNodes is refused, naming it.
        assert create(cluster, hypernode("rt-tor", 1, "Node", "absent-node")).returncode == 0
        assert create(cluster, hypernode("rt-spine", 2, "HyperNode", "rt-tor")).returncode == 0

        def cycle_refused() -> subprocess.CompletedProcess[str] | None:
            result = subprocess.run(
                [
                    KUBECTL or "kubectl",
                    "--kubeconfig",
                    str(cluster.kubeconfig),
                    "replace",
                    "-f",
                    "-",
                ],
                input=hypernode("rt-tor", 1, "HyperNode", "rt-spine"),
                capture_output=True,
                text=True,
                timeout=60,
            )
            return result if result.returncode != 0 else None

        looped = wait_for("the HyperNode cycle refused", cycle_refused, 30)
        assert 'admission webhook "validatehypernode.volcano.sh" denied the request' in (
            looped.stderr
        ), looped.stderr
        assert "HyperNodes form a cycle: rt-tor -> rt-spine -> rt-tor" in looped.stderr
    finally:
        # The launcher's own again (the extender's caBundle writes are another manager's).
        launcher = str(install.root / "webhooks.yaml")
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", launcher)
