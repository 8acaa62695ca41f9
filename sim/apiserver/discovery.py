"""Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/G/V`, `/version`) in the plain
(non-aggregated) form, which kubectl and client libraries fall back to."""

from __future__ import annotations

from typing import Any

from sim.apiserver.registry import Registry, ResourceType

KUBERNETES_VERSION = ("1", "32", "v1.32.0")


def version_info() -> dict[str, Any]:
    major, minor, git = KUBERNETES_VERSION
    return {
        "major": major,
        "minor": minor,
        "gitVersion": git,
        "gitCommit": "vulcan-embedded",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [
        _group(name, versions)
        for name, versions in registry.group_versions().items()
        if name  # the core group is served under /api
    ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, name: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


_SUBRESOURCE_VERBS = {
    "status": ("get", "patch", "update"),
    "binding": ("create",),
    "eviction": ("create",),
    "finalize": ("update",),
}
_SUBRESOURCE_KIND = {"binding": "Binding", "eviction": "Eviction"}


def _resource_entries(rtype: ResourceType) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ],
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        entry["categories"] = list(rtype.categories)
    entries = [entry]
    for sub in sorted(rtype.subresources):
        sub_entry: dict[str, Any] = {
            "name": f"{rtype.plural}/{sub}",
            "singularName": "",
            "namespaced": rtype.namespaced,
            "kind": _SUBRESOURCE_KIND.get(sub, rtype.kind),
            "verbs": list(_SUBRESOURCE_VERBS.get(sub, ("get",))),
        }
        if sub == "eviction":
            sub_entry.update({"group": "policy", "version": "v1"})
        entries.append(sub_entry)
    return entries


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources = [entry for rtype in types for entry in _resource_entries(rtype)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
