"""The embedded API server's RBAC (`vulcan sim apiserver --token-auth-file`): requests are
authenticated by bearer token and authorized by the Roles and ClusterRoles bound to the user,
with kube-apiserver's 403 text, and SelfSubjectAccessReview (`kubectl auth can-i`) answers
what a user may do. Exercised with the install's own ServiceAccounts and ClusterRoles
(manifests/base) and vulcan's client, which sends the kubeconfig's token."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.kube.client import (
    LEASES,
    NAMESPACES,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    ApiError,
    ClientOptions,
    KubeClient,
    Resource,
)
from sim.apiserver.server import EmbeddedApiServer, write_kubeconfig
from tests.helpers import REPO

CONTROLLERS = "system:serviceaccount:vulcan-system:vulcan-controllers"
EXTENDER = "system:serviceaccount:vulcan-system:vulcan-extender"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def rbac_docs() -> list[dict[str, Any]]:
    docs = []
    for name in ("extender-rbac.yaml", "controllers-rbac.yaml"):
        text = (REPO / "manifests" / "base" / name).read_text()
        docs += [d for d in yaml.safe_load_all(text) if d and d["kind"] in RBAC_KINDS]
    return docs


async def connect(server: EmbeddedApiServer, tmp: Path, name: str, token: str) -> KubeClient:
    path = tmp / f"{name}.kubeconfig"
    write_kubeconfig(path, server.url, token)
    return await KubeClient.connect(ClientOptions(kubeconfig=str(path), max_retries=0))


async def test_the_install_service_accounts_may_do_what_their_roles_grant(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(
        'admin-token,admin,1,"system:masters"\n'
        f'controllers-token,{CONTROLLERS},2,"system:serviceaccounts"\n'
        f'extender-token,{EXTENDER},3,"system:serviceaccounts"\n'
    )
    audit = tmp_path / "audit.log"
    server = EmbeddedApiServer(token_auth_file=tokens, audit_log_path=audit)
    async with server:
        admin = await connect(server, tmp_path, "admin", "admin-token")
        controllers = await connect(server, tmp_path, "controllers", "controllers-token")
        extender = await connect(server, tmp_path, "extender", "extender-token")
        anonymous = await connect(server, tmp_path, "anonymous", "")
        try:
            await admin.create(NAMESPACES, {"metadata": {"name": "vulcan-system"}})
            for doc in rbac_docs():
                plural = {"ServiceAccount": "serviceaccounts"}.get(doc["kind"])
                group = "" if plural else "rbac.authorization.k8s.io"
                plural = plural or doc["kind"].lower() + "s"
                resource = Resource(
                    group, "v1", plural, doc["kind"], bool(doc["metadata"].get("namespace"))
                )
                await admin.create(resource, doc)

            # Granted: the controllers list pods anywhere and hold their Lease in vulcan-system.
            await controllers.list(PODS)
            lease = {"metadata": {"name": "vulcan-controllers", "namespace": "vulcan-system"}}
            await controllers.create(LEASES, lease)
            # Not granted: PriorityClasses (the extender's to read), and a Lease anywhere else;
            # the refusal is Kubernetes' text.
            with pytest.raises(ApiError) as refused:
                await controllers.list(PRIORITY_CLASSES)
            assert refused.value.status == 403
            assert (
                f'priorityclasses.scheduling.k8s.io is forbidden: User "{CONTROLLERS}" cannot list '
                'resource "priorityclasses" in API group "scheduling.k8s.io" at the cluster scope'
            ) in str(refused.value)
            with pytest.raises(ApiError) as refused:
                await controllers.create(
                    LEASES, {"metadata": {"name": "x", "namespace": "default"}}
                )
            assert refused.value.status == 403
            # The extender watches nodes but never deletes pods.
            await extender.list(NODES)
            await admin.create(
                PODS,
                {
                    "metadata": {"name": "p", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            )
            with pytest.raises(ApiError) as refused:
                await extender.delete(PODS, "p", "default")
            assert refused.value.status == 403
            # No token: system:anonymous, refused.
            with pytest.raises(ApiError) as refused:
                await anonymous.list(PODS)
            assert refused.value.status == 403 and "system:anonymous" in str(refused.value)

            # kubectl auth can-i: SelfSubjectAccessReview.
            async def can_i(client: KubeClient, **attributes: str) -> bool:
                review = await client.request(
                    "POST",
                    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                    body={
                        "apiVersion": "authorization.k8s.io/v1",
                        "kind": "SelfSubjectAccessReview",
                        "spec": {"resourceAttributes": attributes},
                    },
                )
                return bool(review["status"]["allowed"])

            assert await can_i(extender, verb="create", resource="pods", subresource="binding")
            assert not await can_i(extender, verb="delete", resource="pods")
            assert await can_i(admin, verb="delete", resource="nodes")
        finally:
            for client in (admin, controllers, extender, anonymous):
                await client.close()
    # Every decision is in the audit log.
    decisions = [json.loads(line) for line in audit.read_text().splitlines()]
    assert {
        "user": CONTROLLERS,
        "verb": "list",
        "resource": "priorityclasses",
        "allowed": False,
    }.items() <= next(
        d for d in decisions if d["user"] == CONTROLLERS and d["resource"] == "priorityclasses"
    ).items()
