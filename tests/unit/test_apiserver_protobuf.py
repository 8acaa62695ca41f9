"""sim.apiserver.protobuf: the embedded API server takes built-in kinds as protobuf, as
kubectl sends them, and stores the JSON object they encode; what it cannot decode it refuses
with the reason (never dropping a field)."""

from __future__ import annotations

import pytest

from sim.apiserver import protobuf
from sim.apiserver.protobuf import MAGIC, ProtobufError, decode_object

CLASSES = protobuf._schema().classes
UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    wrapper = CLASSES[UNKNOWN]()
    wrapper.typeMeta.apiVersion = api_version
    wrapper.typeMeta.kind = kind
    wrapper.raw = raw
    return MAGIC + wrapper.SerializeToString()


def test_a_namespace_with_labels_and_a_creation_time() -> None:
    namespace = CLASSES["k8s.io.api.core.v1.Namespace"]()
    namespace.metadata.name = "team-a"
    namespace.metadata.labels["tier"] = "gold"
    namespace.metadata.creationTimestamp.seconds = 1_700_000_000
    body = envelope("v1", "Namespace", namespace.SerializeToString())
    assert decode_object(body) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "team-a",
            "labels": {"tier": "gold"},
            "creationTimestamp": "2023-11-14T22:13:20Z",
        },
    }


def test_secret_bytes_quantities_and_int_or_string_take_their_json_forms() -> None:
    secret = CLASSES["k8s.io.api.core.v1.Secret"]()
    secret.metadata.name = "token"
    secret.data["pw"] = b"hunter2"
    assert decode_object(envelope("v1", "Secret", secret.SerializeToString()))["data"] == {
        "pw": "aHVudGVyMg=="
    }
    deployment = CLASSES["k8s.io.api.apps.v1.Deployment"]()
    deployment.metadata.name = "web"
    deployment.spec.replicas = 0  # set to zero: present, unlike an unset field
    container = deployment.spec.template.spec.containers.add(name="c", image="nginx")
    container.resources.requests["cpu"].string = "500m"
    surge = deployment.spec.strategy.rollingUpdate.maxSurge
    surge.type = 1
    surge.strVal = "25%"
    decoded = decode_object(envelope("apps/v1", "Deployment", deployment.SerializeToString()))
    spec = decoded["spec"]
    assert spec["replicas"] == 0
    assert spec["template"]["spec"]["containers"] == [
        {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m"}}}
    ]
    assert spec["strategy"] == {"rollingUpdate": {"maxSurge": "25%"}}


def test_what_cannot_be_decoded_is_refused_with_the_reason() -> None:
    with pytest.raises(ProtobufError, match="no k8s"):
        decode_object(b'{"kind": "Namespace"}')
    with pytest.raises(ProtobufError, match="not accepted as protobuf"):
        decode_object(envelope("example.com/v1", "Widget", b""))
    namespace = CLASSES["k8s.io.api.core.v1.Namespace"]()
    namespace.metadata.name = "a"
    # Field 99 (a varint) is no field of Namespace: refused, not silently dropped.
    raw = namespace.SerializeToString() + bytes([0x98, 0x06, 0x01])
    with pytest.raises(ProtobufError, match=r"unknown protobuf field number\(s\) \[99\]"):
        decode_object(envelope("v1", "Namespace", raw))


def test_the_scale_of_a_deployment() -> None:
    from sim.apiserver.routes_scale import scale_of

    deployment = {
        "metadata": {"name": "web", "namespace": "team-a", "uid": "u", "labels": {"x": "y"}},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"tier": "a", "app": "web"}}},
        "status": {"replicas": 2},
    }
    assert scale_of(deployment) == {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {"name": "web", "namespace": "team-a", "uid": "u"},
        "spec": {"replicas": 4},
        "status": {"replicas": 2, "selector": "app=web,tier=a"},
    }
    assert scale_of({"metadata": {"name": "d"}})["spec"] == {"replicas": 1}  # the default
