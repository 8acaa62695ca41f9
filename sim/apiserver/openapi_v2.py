"""The OpenAPI v2 document (`/openapi/v2`), as kubectl fetches it for client-side validation.

kubectl (1.32) validates with the v3 documents' `fieldValidation` parameter when it can and lets
the server judge; but a `List` (what `kubectl get -o yaml` prints for several objects) is
always validated client-side, item by item, against the v2 document — which kubectl fetches
only as protobuf (gnostic's `openapi.v2.Document`). Without it, `kubectl create|apply -f` of a
List failed with `error validating data: the server could not find the requested resource`.

The document names every kind served (built-in and custom) as a definition carrying its
`x-kubernetes-group-version-kind`, with no type: kubectl then finds each item's kind and accepts
its fields, and the items' own requests carry `fieldValidation=Strict`, so the server judges
each object as it judges a single one (a custom resource against its CRD's schema). It is
encoded here with protobuf's wire format directly (a few message types of gnostic's
OpenAPIv2.proto, field numbers as there).
"""

from __future__ import annotations

from typing import Any

import yaml

from sim.apiserver.discovery import KUBERNETES_VERSION
from sim.apiserver.registry import Registry, ResourceType

ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (strings and messages)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _field(number, text.encode())


def _named_any(name: str, yaml_text: str) -> bytes:
    # NamedAny{name=1, value=2: Any{yaml=2}}
    return _string(1, name) + _field(2, _string(2, yaml_text))


def _definition_name(rtype: ResourceType) -> str:
    group = ".".join(reversed(rtype.group.split("."))) if rtype.group else "io.k8s.api.core"
    return f"{group}.{rtype.version}.{rtype.kind}"


def _schema(rtype: ResourceType) -> bytes:
    gvk = [{"group": rtype.group, "version": rtype.version, "kind": rtype.kind}]
    # Schema{description=4, vendor_extension=31}
    return _string(4, f"{rtype.kind} ({rtype.api_version})") + _field(
        31, _named_any("x-kubernetes-group-version-kind", yaml.safe_dump(gvk))
    )


def _kinds(registry: Registry) -> dict[str, ResourceType]:
    kinds: dict[str, ResourceType] = {}
    for rtype in registry.types:
        kinds.setdefault(_definition_name(rtype), rtype)
    return kinds


def json_document(registry: Registry) -> dict[str, Any]:
    """The same document as JSON (for clients that ask for it)."""
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION[2]},
        "paths": {},
        "definitions": {
            name: {
                "description": f"{rtype.kind} ({rtype.api_version})",
                "x-kubernetes-group-version-kind": [
                    {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
                ],
            }
            for name, rtype in _kinds(registry).items()
        },
    }


def document(registry: Registry) -> bytes:
    """Document{swagger=1, info=2, paths=8, definitions=9}."""
    definitions = b""
    for name, rtype in _kinds(registry).items():
        # Definitions{additional_properties=1: NamedSchema{name=1, value=2}}
        definitions += _field(1, _string(1, name) + _field(2, _schema(rtype)))
    info = _string(1, "Kubernetes") + _string(2, KUBERNETES_VERSION[2])
    return _string(1, "2.0") + _field(2, info) + _field(8, b"") + _field(9, definitions)
