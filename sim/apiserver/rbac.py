"""Authentication by bearer token and RBAC authorization, as kube-apiserver does them with
`--token-auth-file` and `--authorization-mode=RBAC`: off unless the embedded API server is
given a token file. Used to prove the install's RBAC: run vulcan's components with the tokens
of its ServiceAccounts and every call either passes or is refused with Kubernetes' message.

- A token file has kube-apiserver's format, one user per line: `token,user,uid,"group1,group2"`.
  A request with no known token is `system:anonymous` (group `system:unauthenticated`).
- Members of `system:masters` may do anything (the admin kubeconfig's user).
- Otherwise a request is allowed when a rule of a Role bound in its namespace (RoleBinding) or
  of a ClusterRole bound anywhere (RoleBinding) or cluster-wide (ClusterRoleBinding) grants its
  verb on its resource (`resource` or `resource/subresource`, `*` wildcards, resourceNames),
  and for non-resource paths a ClusterRole's `nonResourceURLs`. Discovery, version, OpenAPI and
  health paths are open to every authenticated user (Kubernetes' system:discovery and
  system:public-info-viewer roles). Role aggregation is not implemented.
- Every decision can be written to an audit log (JSON lines: user, verb, resource, namespace,
  name, allowed), which the least-privilege test reads.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from sim.apiserver.store import Store

__all__ = ["Attributes", "Rbac", "User", "forbidden_message", "read_token_file", "rule_allows"]

MASTERS = "system:masters"
ANONYMOUS = "system:anonymous"
_OPEN_PATHS = ("/api", "/apis", "/version", "/openapi", "/healthz", "/readyz", "/livez")


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks (kube-apiserver's authorizer.Attributes)."""

    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # a non-resource request's path
    resource_request: bool = True


def read_token_file(path: str | Path) -> dict[str, User]:
    """token -> user, from kube-apiserver's CSV token file format."""
    users: dict[str, User] = {}
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle):
            if not row or row[0].startswith("#"):
                continue
            if len(row) < 3:
                raise ValueError(f"{path}: a line needs token,user,uid: {row!r}")
            groups = tuple(g for g in (row[3].split(",") if len(row) > 3 else ()) if g)
            users[row[0].strip()] = User(row[1].strip(), groups, row[2].strip())
    return users


def forbidden_message(user: User, attrs: Attributes) -> str:
    """Kubernetes' text for a refusal (apiserver's forbiddenMessage)."""
    if not attrs.resource_request:
        return f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    # The error names the group-qualified resource without its subresource (NewForbidden's
    # GroupResource: "priorityclasses.scheduling.k8s.io", "pods" for pods/binding).
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    what = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (
        f'{what} is forbidden: User "{user.name}" cannot {attrs.verb} resource "{resource}" '
        f'in API group "{attrs.api_group}" {where}'
    )


@dataclass
class Rbac:
    """The authenticator and the authorizer of one API server."""

    store: Store
    tokens: dict[str, User]
    audit_path: Path | None = None
    _audit: Any = field(default=None, repr=False)

    def authenticate(self, authorization: str) -> User:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip() in self.tokens:
            user = self.tokens[token.strip()]
            return User(user.name, (*user.groups, "system:authenticated"), user.uid)
        return User(ANONYMOUS, ("system:unauthenticated",))

    def authorize(self, user: User, attrs: Attributes, *, audit: bool = True) -> bool:
        allowed = self._decide(user, attrs)
        if audit and self.audit_path is not None:
            self._record(user, attrs, allowed)
        return allowed

    def _decide(self, user: User, attrs: Attributes) -> bool:
        if MASTERS in user.groups:
            return True
        if not attrs.resource_request:
            if "system:authenticated" in user.groups and attrs.path.startswith(_OPEN_PATHS):
                return True
            return any(_path_allowed(rule, attrs) for rule in self._rules(user, ""))
        return any(rule_allows(rule, attrs) for rule in self._rules(user, attrs.namespace))

    def _rules(self, user: User, namespace: str) -> list[dict[str, Any]]:
        rules: list[dict[str, Any]] = []
        for binding in self._objects("clusterrolebindings", ""):
            if _binds(binding, user, ""):
                rules += self._role_rules(binding, "")
        if namespace:
            for binding in self._objects("rolebindings", namespace):
                if _binds(binding, user, namespace):
                    rules += self._role_rules(binding, namespace)
        return rules

    def _role_rules(self, binding: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
        ref = binding.get("roleRef") or {}
        kind, name = ref.get("kind"), ref.get("name", "")
        if kind == "ClusterRole":
            role = self._object("clusterroles", "", name)
        elif kind == "Role" and namespace:
            role = self._object("roles", namespace, name)
        else:
            role = None
        return list((role or {}).get("rules") or [])

    def _objects(self, plural: str, namespace: str) -> list[dict[str, Any]]:
        rtype = self.store.registry.get("rbac.authorization.k8s.io", "v1", plural)
        if rtype is None:
            return []
        _rv, items = self.store.list(rtype, namespace or None)
        return [stored.decode() for stored in items]

    def _object(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        rtype = self.store.registry.get("rbac.authorization.k8s.io", "v1", plural)
        if rtype is None:
            return None
        stored = self.store.find(rtype, namespace, name)
        return stored.decode() if stored is not None else None

    def _record(self, user: User, attrs: Attributes, allowed: bool) -> None:
        if self._audit is None:
            assert self.audit_path is not None
            self._audit = open(self.audit_path, "ab")  # noqa: SIM115 - kept open, appended
        entry = {
            "user": user.name,
            "verb": attrs.verb,
            "apiGroup": attrs.api_group,
            "resource": attrs.resource,
            "subresource": attrs.subresource,
            "namespace": attrs.namespace,
            "name": attrs.name,
            "path": attrs.path,
            "allowed": allowed,
        }
        self._audit.write(orjson.dumps(entry) + b"\n")
        self._audit.flush()


def _binds(binding: dict[str, Any], user: User, namespace: str) -> bool:
    for subject in binding.get("subjects") or ():
        kind = subject.get("kind")
        name = subject.get("name", "")
        if kind == "User" and name == user.name:
            return True
        if kind == "Group" and name in user.groups:
            return True
        if kind == "ServiceAccount":
            sa_namespace = subject.get("namespace") or namespace
            if user.name == f"system:serviceaccount:{sa_namespace}:{name}":
                return True
    return False


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or ()
    if attrs.verb not in verbs and "*" not in verbs:
        return False
    groups = rule.get("apiGroups") or ()
    if attrs.api_group not in groups and "*" not in groups:
        return False
    resources = rule.get("resources") or ()
    wanted = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    if not (
        wanted in resources
        or "*" in resources
        or (attrs.subresource and f"*/{attrs.subresource}" in resources)
    ):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attrs.name in names


def _path_allowed(rule: dict[str, Any], attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or ()
    if attrs.verb not in verbs and "*" not in verbs:
        return False
    for url in rule.get("nonResourceURLs") or ():
        if url == attrs.path or (url.endswith("*") and attrs.path.startswith(url[:-1])):
            return True
    return False
