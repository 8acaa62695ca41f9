"""Least privilege, checked against what the components did: the install's roles
(manifests/base/*-rbac.yaml) are read as grants, one per (rule, API group, resource, verb), and
matched with the audit log of the embedded API server (`--audit-log-path`: one line per
authorization decision) by the same rule matching its RBAC authorizer uses.

- A rule is *needed* when some allowed request of its ServiceAccount was allowed by that rule and
  by no other rule bound to the account: without the rule, that request is refused, and the
  scenario, which allows no refusal, fails.
- A grant is *exercised* when some allowed request matched it. Grants no request matched are
  either surplus (to be removed) or needed by a path the scenario cannot provoke (a conflict's
  re-read, an owner kind read once), which a test names with the code that needs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from sim.apiserver.rbac import Attributes, rule_allows

BASE = Path(__file__).resolve().parents[1] / "manifests" / "base"
RBAC_FILES = ("extender-rbac.yaml", "controllers-rbac.yaml")
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class Rule:
    account: str  # the user name of the ServiceAccount bound to it
    role: str  # Kind/name of the role
    index: int
    namespace: str  # a Role's namespace; "" for a ClusterRole
    body: dict[str, Any]

    def allows(self, request: Attributes) -> bool:
        if self.namespace and request.namespace != self.namespace:
            return False
        return rule_allows(self.body, request)

    def grants(self) -> list[Grant]:
        return [
            Grant(self, group, resource, verb)
            for group in self.body.get("apiGroups") or ()
            for resource in self.body.get("resources") or ()
            for verb in self.body.get("verbs") or ()
        ]

    def __str__(self) -> str:
        return f"{self.role} rule {self.index} {self.body}"


@dataclass(frozen=True, slots=True)
class Grant:
    rule: Rule
    group: str
    resource: str  # resource or resource/subresource
    verb: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.rule.account.rsplit(":", 1)[-1], self.group, self.resource, self.verb)

    def allows(self, request: Attributes) -> bool:
        narrowed = {
            **self.rule.body,
            "apiGroups": [self.group],
            "resources": [self.resource],
            "verbs": [self.verb],
        }
        return Rule(self.rule.account, "", 0, self.rule.namespace, narrowed).allows(request)


def install_rules(files: Iterable[str] = RBAC_FILES) -> list[Rule]:
    """Every rule of the install's roles, with the ServiceAccount its binding names."""
    docs = [d for name in files for d in yaml.safe_load_all((BASE / name).read_text()) if d]
    roles = {
        (d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("Role", "ClusterRole")
    }
    rules: list[Rule] = []
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = binding["roleRef"]
        role = roles[(ref["kind"], ref["name"])]
        namespace = binding["metadata"].get("namespace", "")
        for subject in binding["subjects"]:
            account = (
                f"{SERVICE_ACCOUNT_PREFIX}{subject.get('namespace') or namespace}:{subject['name']}"
            )
            for index, body in enumerate(role["rules"]):
                rules.append(Rule(account, f"{ref['kind']}/{ref['name']}", index, namespace, body))
    return rules


def read_audit(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line]


def request_of(entry: dict[str, Any]) -> Attributes:
    return Attributes(
        verb=entry["verb"],
        api_group=entry["apiGroup"],
        resource=entry["resource"],
        subresource=entry["subresource"],
        namespace=entry["namespace"],
        name=entry["name"],
        path=entry["path"],
        resource_request=bool(entry["resource"]),
    )


@dataclass
class Coverage:
    rules: list[Rule]
    requests: dict[str, list[Attributes]]  # account -> its allowed resource requests

    @classmethod
    def of(cls, rules: list[Rule], audit: list[dict[str, Any]]) -> Coverage:
        accounts = {r.account for r in rules}
        requests: dict[str, list[Attributes]] = {a: [] for a in accounts}
        seen: set[tuple[Any, ...]] = set()
        for entry in audit:
            if entry["user"] in accounts and entry["allowed"] and entry["resource"]:
                request = request_of(entry)
                key = (entry["user"], request)
                if key not in seen:  # the same call many times tells nothing more
                    seen.add(key)
                    requests[entry["user"]].append(request)
        return cls(rules, requests)

    def unneeded_rules(self) -> list[Rule]:
        """Rules no request needed: each allowed request they allow another rule allows too."""
        unneeded = []
        for rule in self.rules:
            others = [r for r in self.rules if r.account == rule.account and r is not rule]
            if not any(
                rule.allows(request) and not any(o.allows(request) for o in others)
                for request in self.requests[rule.account]
            ):
                unneeded.append(rule)
        return unneeded

    def unexercised_grants(self) -> set[tuple[str, str, str, str]]:
        """(account, group, resource, verb) granted that no allowed request used."""
        return {
            grant.key
            for rule in self.rules
            for grant in rule.grants()
            if not any(grant.allows(request) for request in self.requests[rule.account])
        }
