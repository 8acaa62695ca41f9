"""OpenAPI v3 documents, enough for kubectl's validation to hand over to the server.

kubectl validates by default (`--validate=strict`). It first asks the OpenAPI v3 document of the
object's group/version whether the PATCH operation for that kind accepts the `fieldValidation`
query parameter; if so it sends `fieldValidation=Strict` and lets the server judge the object
(the embedded server checks custom resources against their CRD schema). So each document lists
the resource paths with the group-version-kind extension and that parameter, and the CRDs'
schemas as components.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from sim.apiserver.discovery import KUBERNETES_VERSION
from sim.apiserver.registry import Registry, ResourceType

_QUERY_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force")


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _schema_name(rtype: ResourceType) -> str:
    # Kubernetes names CR schemas after the reversed group, e.g. sh.volcano.batch.v1alpha1.Job.
    reversed_group = (
        ".".join(reversed(rtype.group.split("."))) if rtype.group else "io.k8s.api.core"
    )
    return f"{reversed_group}.{rtype.version}.{rtype.kind}"


def _gvk(rtype: ResourceType) -> dict[str, str]:
    return {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}


def _operation(rtype: ResourceType, action: str) -> dict[str, Any]:
    return {
        "operationId": f"{action}{rtype.kind}",
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in _QUERY_PARAMS
        ],
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rtype),
    }


def _paths(rtype: ResourceType) -> dict[str, Any]:
    prefix = "/" + _gv_path(rtype.group, rtype.version)
    if rtype.namespaced:
        prefix += "/namespaces/{namespace}"
    collection = f"{prefix}/{rtype.plural}"
    return {
        collection: {"post": _operation(rtype, "post")},
        f"{collection}/{{name}}": {
            "put": _operation(rtype, "put"),
            "patch": _operation(rtype, "patch"),
        },
    }


def _component(rtype: ResourceType) -> dict[str, Any]:
    schema: dict[str, Any] = (
        dict(rtype.schema)
        if rtype.schema
        else {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }
    )
    schema["x-kubernetes-group-version-kind"] = [_gvk(rtype)]
    return schema


def group_version_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rtype in types:
        paths.update(_paths(rtype))
        schemas[_schema_name(rtype)] = _component(rtype)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION[2]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


class OpenApiDocuments:
    """Encoded documents, built once (the registry does not change while serving)."""

    def __init__(self, registry: Registry) -> None:
        self.documents: dict[str, bytes] = {}
        for group, versions in registry.group_versions().items():
            for version in versions:
                doc = group_version_document(registry, group, version)
                if doc is not None:
                    self.documents[_gv_path(group, version)] = orjson.dumps(doc)
        self.root = orjson.dumps(
            {
                "paths": {
                    path: {
                        "serverRelativeURL": f"/openapi/v3/{path}?hash="
                        + hashlib.sha256(body).hexdigest()[:32].upper()
                    }
                    for path, body in self.documents.items()
                }
            }
        )
