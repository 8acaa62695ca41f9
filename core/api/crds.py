"""CustomResourceDefinitions generated from the models, so schema and models cannot drift.

`manifests/crds/*.yaml` are this module's output (`vulcan crds --out manifests/crds`); a test
fails when the checked-in files differ from what the models generate.

Pydantic's JSON Schema is turned into a *structural* OpenAPI v3 schema as Kubernetes requires:
`$ref`s inlined, `Optional[X]` collapsed to `X`, titles dropped, `additionalProperties: true`
(our "keep unknown fields" models) dropped because the API server prunes unknown fields, free-form
objects marked `x-kubernetes-preserve-unknown-fields`, and only CRD defaults kept as `default`.
"""

from __future__ import annotations

from typing import Any

import yaml

from core.api import keys
from core.api.base import CRD_DEFAULT
from core.api.registry import KINDS, KindInfo

_DROP = {"title", "description", "$defs", "discriminator"}


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, list):
        return [_inline(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return _inline(merged, defs)
    return {k: _inline(v, defs) for k, v in schema.items()}


def _structural(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    keep_default = schema.pop(CRD_DEFAULT, False)
    if not keep_default:
        schema.pop("default", None)
    any_of = schema.get("anyOf")
    if any_of is not None:
        members = [m for m in any_of if m.get("type") != "null"]
        if len(members) == 1:
            # Optional[X]: the field may be absent; Kubernetes has no `null` type to say more.
            del schema["anyOf"]
            inner = _structural(members[0])
            inner.update({k: v for k, v in _structural(schema).items() if k not in inner})
            return inner
    for key in list(schema):
        if key in _DROP:
            del schema[key]
    if schema.get("x-kubernetes-int-or-string"):
        # Quantities: Kubernetes' own form, without the anyOf pydantic would add.
        return {
            k: v
            for k, v in schema.items()
            if k in ("x-kubernetes-int-or-string", "pattern", "anyOf")
        }
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if "properties" in schema:
        schema["properties"] = {k: _structural(v) for k, v in schema["properties"].items()}
        if schema.get("additionalProperties") is True:
            del schema["additionalProperties"]
        schema.setdefault("type", "object")
    if isinstance(schema.get("additionalProperties"), dict):
        schema["additionalProperties"] = _structural(schema["additionalProperties"])
        schema.setdefault("type", "object")
    elif schema.get("additionalProperties") is True:
        # dict[str, Any] without properties: an open object.
        del schema["additionalProperties"]
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if "items" in schema:
        schema["items"] = _structural(schema["items"])
    if "enum" in schema and "type" not in schema:
        schema["type"] = "string"
    if "const" in schema:
        schema["enum"] = [schema.pop("const")]
        schema.setdefault("type", "string")
    return schema


def openapi_schema(info: KindInfo) -> dict[str, Any]:
    raw = info.model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    schema = _structural(_inline(raw, defs))
    schema.pop("required", None)
    properties = schema["properties"]
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    # The API server owns metadata's schema; CRDs only say it is an object.
    properties["metadata"] = {"type": "object"}
    return schema


def crd(info: KindInfo) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": info.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": openapi_schema(info)},
    }
    if info.printer_columns:
        version["additionalPrinterColumns"] = [
            {
                "name": col.name,
                "type": col.type,
                "jsonPath": col.json_path,
                **({"priority": col.priority} if col.priority else {}),
            }
            for col in info.printer_columns
        ]
    if info.status_subresource:
        version["subresources"] = {"status": {}}
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.singular,
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": info.crd_name,
            "annotations": {keys.HELM_RESOURCE_POLICY: "keep"},
        },
        "spec": {
            "group": info.group,
            "names": names,
            "scope": "Namespaced" if info.namespaced else "Cluster",
            "versions": [version],
        },
    }


def all_crds() -> list[dict[str, Any]]:
    return [crd(info) for info in KINDS]


def crd_filename(info: KindInfo) -> str:
    return f"{info.group}_{info.plural}.yaml"


def render(doc: dict[str, Any]) -> str:
    header = "# Generated by `vulcan crds --out manifests/crds` from core/api; do not edit.\n"
    return header + yaml.safe_dump(doc, sort_keys=False, width=100)


def write_crds(directory: str) -> list[str]:
    """Write one YAML per CRD into `directory`; returns the paths written."""
    import pathlib

    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for info in KINDS:
        path = out / crd_filename(info)
        path.write_text(render(crd(info)))
        written.append(str(path))
    return written
