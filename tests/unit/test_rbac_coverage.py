"""The least-privilege check itself (tests/rbac_coverage.py): it must find a rule no call needs,
a rule whose calls another rule also allows, and a verb no call used."""

from __future__ import annotations

from typing import Any

from tests.rbac_coverage import Coverage, Rule, install_rules, request_of

EXTENDER = "system:serviceaccount:vulcan-system:vulcan-extender"


def call(verb: str, resource: str, subresource: str = "", group: str = "") -> dict[str, Any]:
    return {
        "user": EXTENDER,
        "verb": verb,
        "apiGroup": group,
        "resource": resource,
        "subresource": subresource,
        "namespace": "default",
        "name": "p",
        "path": "",
        "allowed": True,
    }


def rule(index: int, resources: list[str], verbs: list[str]) -> Rule:
    body = {"apiGroups": [""], "resources": resources, "verbs": verbs}
    return Rule(EXTENDER, "ClusterRole/test", index, "", body)


def test_a_rule_is_needed_only_when_some_call_is_allowed_by_it_alone() -> None:
    pods, also_pods, nodes = (
        rule(0, ["pods"], ["get"]),
        rule(1, ["pods"], ["get", "list"]),
        rule(2, ["nodes"], ["list"]),
    )
    coverage = Coverage.of([pods, also_pods, nodes], [call("get", "pods")])
    # `get pods` is allowed by two rules: neither alone is needed; nodes: never called.
    assert coverage.unneeded_rules() == [pods, also_pods, nodes]
    coverage = Coverage.of([pods, also_pods, nodes], [call("list", "pods")])
    assert coverage.unneeded_rules() == [pods, nodes]


def test_refused_calls_and_other_users_prove_nothing() -> None:
    pods = rule(0, ["pods"], ["get"])
    refused = {**call("get", "pods"), "allowed": False}
    someone_else = {**call("get", "pods"), "user": "admin"}
    assert Coverage.of([pods], [refused, someone_else]).unneeded_rules() == [pods]


def test_unexercised_grants_are_per_verb_and_subresource() -> None:
    binding = rule(0, ["pods/binding", "pods/eviction"], ["create"])
    coverage = Coverage.of([binding], [call("create", "pods", "binding")])
    assert coverage.unneeded_rules() == []
    assert coverage.unexercised_grants() == {("vulcan-extender", "", "pods/eviction", "create")}


def test_the_install_roles_are_read_with_their_accounts_and_namespaces() -> None:
    rules = install_rules()
    accounts = {r.account.rsplit(":", 1)[-1] for r in rules}
    assert accounts == {"vulcan-extender", "vulcan-controllers"}
    leases = [r for r in rules if "leases" in r.body["resources"]]
    assert leases and all(r.namespace == "vulcan-system" for r in leases)
    # A Role's rule allows nothing outside its namespace.
    lease = call("create", "leases", group="coordination.k8s.io")
    (create,) = [r for r in leases if r.account == EXTENDER and "create" in r.body["verbs"]]
    assert not create.allows(request_of(lease))
    assert create.allows(request_of({**lease, "namespace": "vulcan-system"}))
