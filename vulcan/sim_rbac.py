"""`vulcan sim up --rbac`: the token file the embedded API server authenticates with (the admin
and the install's ServiceAccounts) and the install's RBAC objects (manifests/base), created
before vulcan's components start with their ServiceAccounts' tokens."""

from __future__ import annotations

import secrets
from pathlib import Path

import yaml

from core.kube.client import ApiError, KubeClient, Resource

# The install's ServiceAccounts (manifests/base), whose tokens the components use with --rbac.
SERVICE_ACCOUNTS = {
    "extender": "system:serviceaccount:vulcan-system:vulcan-extender",
    "controllers": "system:serviceaccount:vulcan-system:vulcan-controllers",
}
RBAC_FILES = ("namespace.yaml", "extender-rbac.yaml", "controllers-rbac.yaml")


def write_tokens(path: Path) -> dict[str, str]:
    """A token file (kube-apiserver's format) for the admin and the components."""
    tokens = {name: secrets.token_hex(16) for name in ("admin", *SERVICE_ACCOUNTS)}
    lines = [f'{tokens["admin"]},admin,admin,"system:masters"']
    for component, user in SERVICE_ACCOUNTS.items():
        lines.append(f'{tokens[component]},{user},{component},"system:serviceaccounts"')
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return tokens


async def install_rbac(client: KubeClient) -> None:
    """The install's namespace, ServiceAccounts, ClusterRoles, Roles and their bindings."""
    base = Path(__file__).resolve().parents[1] / "manifests" / "base"
    for name in RBAC_FILES:
        for doc in yaml.safe_load_all((base / name).read_text()):
            if not doc:
                continue
            kind = doc["kind"]
            group = "" if kind in ("Namespace", "ServiceAccount") else "rbac.authorization.k8s.io"
            namespaced = bool(doc["metadata"].get("namespace"))
            resource = Resource(group, "v1", kind.lower() + "s", namespaced, kind)
            try:
                await client.create(resource, doc)
            except ApiError as exc:
                if not exc.conflict:
                    raise
