"""Protobuf request bodies (`application/vnd.kubernetes.protobuf`), as a real API server takes
them: kubectl's typed clients send built-in kinds so (`kubectl create namespace|configmap|
secret|deployment|job`, deletes' DeleteOptions). The embedded API server decodes them into the
JSON form it stores and answers JSON, which those clients accept.

The wire format is the protobuf library's: the message classes are built at first use from
`proto_schema.json` (Kubernetes' field names and numbers for the built-in kinds, made by
`sim.apiserver.proto_schema_build`). A body is Kubernetes' envelope: the magic `k8s\\0`, then a
`runtime.Unknown` holding the TypeMeta (apiVersion, kind) and the object's own bytes. A field
this table does not know is refused (400, naming it), never dropped.
"""

from __future__ import annotations

import base64
import functools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

__all__ = ["MAGIC", "PROTOBUF", "ProtobufError", "decode_object", "is_protobuf"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

_SCHEMA = Path(__file__).with_name("proto_schema.json")
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
_UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"
_TYPE_META = "k8s.io.apimachinery.pkg.runtime.TypeMeta"
# runtime.Unknown, the envelope (apimachinery pkg/runtime/generated.proto).
_ENVELOPE: dict[str, list[list[Any]]] = {
    _TYPE_META: [["apiVersion", 1, "optional", "string"], ["kind", 2, "optional", "string"]],
    _UNKNOWN: [
        ["typeMeta", 1, "optional", _TYPE_META],
        ["raw", 2, "optional", "bytes"],
        ["contentEncoding", 3, "optional", "string"],
        ["contentType", 4, "optional", "string"],
    ],
}
_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "uint32": descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
}
_PACKAGE = "vulcan.sim.k8s"


class ProtobufError(ValueError):
    """A body that is not a Kubernetes protobuf object this server knows; says why."""


def is_protobuf(content_type: str) -> bool:
    return content_type.split(";")[0].strip() == PROTOBUF


def _local(name: str) -> str:
    # One descriptor file holds every message: Kubernetes' dotted names flattened.
    return name.replace(".", "_")


class _Schema:
    def __init__(self) -> None:
        self.rows: dict[str, list[list[Any]]] = json.loads(_SCHEMA.read_text())
        self.rows.update(_ENVELOPE)
        file = descriptor_pb2.FileDescriptorProto(
            name="vulcan_sim_k8s.proto", package=_PACKAGE, syntax="proto2"
        )
        for name, rows in self.rows.items():
            message = file.message_type.add(name=_local(name))
            for json_name, number, label, kind in rows:
                field = message.field.add(name=json_name, number=number, json_name=json_name)
                if label == "map":
                    entry = message.nested_type.add(
                        name=f"{json_name[:1].upper()}{json_name[1:]}Entry"
                    )
                    entry.options.map_entry = True
                    for index, part in enumerate(kind):
                        sub = entry.field.add(name=("key", "value")[index], number=index + 1)
                        sub.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
                        _type(sub, part)
                    field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
                    field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                    field.type_name = f".{_PACKAGE}.{_local(name)}.{entry.name}"
                    continue
                field.label = (
                    descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
                    if label == "repeated"
                    else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
                )
                _type(field, kind)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(file)
        self.classes = {
            name: message_factory.GetMessageClass(
                pool.FindMessageTypeByName(f"{_PACKAGE}.{_local(name)}")
            )
            for name in self.rows
        }


def _type(field: descriptor_pb2.FieldDescriptorProto, kind: str) -> None:
    if kind in _SCALARS:
        field.type = _SCALARS[kind]
    else:
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{_local(kind)}"


@functools.cache
def _schema() -> _Schema:
    return _Schema()


def _message_name(api_version: str, kind: str) -> str:
    if kind == "DeleteOptions":
        return f"{_META}.DeleteOptions"
    group, _, version = api_version.rpartition("/")
    # Kubernetes' proto packages are named by the group's first label (rbac.authorization.k8s.io
    # -> k8s.io.api.rbac.v1); the core group's is `core`.
    package = group.split(".")[0] if group else "core"
    return f"k8s.io.api.{package}.{version}.{kind}"


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object (its apiVersion and kind from the envelope)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf object (no k8s\\0 prefix)")
    schema = _schema()
    envelope = schema.classes[_UNKNOWN]()
    try:
        envelope.ParseFromString(body[len(MAGIC) :])
    except DecodeError as exc:
        raise ProtobufError(f"the protobuf envelope could not be decoded: {exc}") from None
    api_version = envelope.typeMeta.apiVersion
    kind = envelope.typeMeta.kind
    if envelope.contentEncoding:
        raise ProtobufError(f"content encoding {envelope.contentEncoding!r} is not supported")
    name = _message_name(api_version, kind)
    cls = schema.classes.get(name)
    if cls is None:
        raise ProtobufError(f"{api_version} {kind} is not accepted as protobuf; send JSON")
    message = cls()
    try:
        message.ParseFromString(envelope.raw)
    except DecodeError as exc:
        raise ProtobufError(f"the {kind} could not be decoded: {exc}") from None
    return {"apiVersion": api_version, "kind": kind, **_to_json(message, name, kind)}


def _to_json(message: Message, name: str, where: str) -> dict[str, Any]:
    unknown = UnknownFieldSet(message)
    if len(unknown):
        numbers = sorted({field.field_number for field in unknown})
        raise ProtobufError(f"{where}: unknown protobuf field number(s) {numbers}")
    out: dict[str, Any] = {}
    for json_name, _number, label, kind in _schema().rows[name]:
        value = getattr(message, json_name)
        path = f"{where}.{json_name}"
        if label == "repeated":
            if len(value):
                out[json_name] = [_value(item, kind, path) for item in value]
        elif label == "map":
            if len(value):
                out[json_name] = {k: _value(v, kind[1], f"{path}[{k}]") for k, v in value.items()}
        elif message.HasField(json_name):
            out[json_name] = _value(value, kind, path)
    return out


def _value(value: Any, kind: str, where: str) -> Any:
    if kind == "bytes":
        return base64.b64encode(value).decode()
    if kind in _SCALARS:
        return value
    # Kubernetes' types with a JSON form of their own.
    short = kind.rsplit(".", 1)[1]
    if short == "Quantity":
        return value.string
    if short == "IntOrString":
        return value.strVal if value.type == 1 else value.intVal
    if short in ("Time", "MicroTime"):
        moment = datetime.fromtimestamp(value.seconds + value.nanos / 1e9, UTC)
        if short == "MicroTime":
            return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if short in ("RawExtension", "FieldsV1"):
        raw = value.raw if short == "RawExtension" else value.Raw
        return json.loads(raw) if raw else None
    if short == "Duration" and kind.startswith(_META):
        return f"{value.duration / 1e9:g}s"
    return _to_json(value, kind, where)
