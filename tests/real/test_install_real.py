"""The install, applied to a real kube-apiserver as the README says: every overlay with
`kubectl apply --server-side -k`, and the single file with `kubectl apply -f`, each accepted and
idempotent (applied again, nothing changes). A bare control plane (no kube-controller-manager:
the Deployments stay without pods; what is checked is what the API server accepts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import REPO
from vulcan.real_cluster.control_plane import ControlPlane
from vulcan.real_cluster.manifests import kubectl

pytestmark = pytest.mark.real

CONTROLLER_MANAGER = False
OVERLAYS = REPO / "manifests" / "overlays"
CERT_MANAGER_CRDS = Path(__file__).parent / "manifests" / "cert-manager-crds.yaml"


def versions(plane: ControlPlane, *source: str) -> dict[str, tuple[str, int | None]]:
    """kind/namespace/name -> (resourceVersion, generation) of every object of `source`
    (`-k DIR` or `-f FILE`), as stored."""
    listed = json.loads(kubectl(plane.admin_kubeconfig, "get", *source, "-o", "json"))
    items = listed.get("items", [listed])
    return {
        f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": (
            o["metadata"]["resourceVersion"],
            o["metadata"].get("generation"),
        )
        for o in items
    }


@pytest.mark.parametrize(
    "overlay",
    [
        "second-scheduler",
        "second-scheduler-webhooks",
        "second-scheduler-self-signed-webhooks",
        "second-scheduler-managed-webhooks",
        "cluster-scheduler",
    ],
)
def test_server_side_apply_of_every_overlay_is_accepted_and_idempotent(
    control_plane: ControlPlane, overlay: str
) -> None:
    config = control_plane.admin_kubeconfig
    if overlay == "second-scheduler-webhooks":
        # It asks cert-manager for the webhooks' certificate: cert-manager's kinds must exist.
        kubectl(config, "apply", "--server-side", "-f", str(CERT_MANAGER_CRDS))
        kubectl(config, "wait", "--for=condition=Established", "-f", str(CERT_MANAGER_CRDS))
    source = ("-k", str(OVERLAYS / overlay))
    first = kubectl(config, "apply", "--server-side", *source)
    assert "serverside-applied" in first, first
    before = versions(control_plane, *source)
    assert any(k.startswith("CustomResourceDefinition/") for k in before), sorted(before)
    again = kubectl(config, "apply", "--server-side", *source)
    assert again.count("serverside-applied") == first.count("serverside-applied"), again
    assert versions(control_plane, *source) == before  # nothing was written the second time


def test_the_single_file_install_applies_and_reapplies_unchanged(
    control_plane: ControlPlane,
) -> None:
    config = control_plane.admin_kubeconfig
    source = ("-f", str(REPO / "manifests" / "vulcan.yaml"))
    kubectl(config, "apply", *source)
    before = versions(control_plane, *source)
    again = kubectl(config, "apply", *source).splitlines()
    # kubectl says "configured" for a PodDisruptionBudget on every client-side apply: its
    # spec.selector has patch strategy "replace", so the patch kubectl computes is never empty
    # (the server finds nothing to change; the resourceVersions below prove it).
    changed = [
        line
        for line in again
        if not line.endswith(" unchanged")
        and not (line.startswith("poddisruptionbudget.policy/") and line.endswith(" configured"))
    ]
    assert again and not changed, again
    assert versions(control_plane, *source) == before
