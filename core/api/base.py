"""Shared pieces of the Volcano-compatible API models.

Design choices:
- Python names are snake_case, JSON names are Volcano's camelCase (aliases); both are accepted.
- `extra="allow"` everywhere: a field we do not model is kept and written back unchanged, so a
  user's object survives a round trip through the models. `unknown_fields()` reports such fields so
  `vulcan validate` can flag typos the way `kubectl --validate=strict` does.
- `strict=True`: Kubernetes rejects `replicas: "3"`; so do we.
- Constraints that an OpenAPI schema can express (minimum, maxLength, pattern, enum) are pydantic
  constraints, so the generated CRD schema and the model agree by construction. Rules that need
  more than one field live in `core.api.validation` with Volcano's messages.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from core.resources import parse_quantity


class KubeModel(BaseModel):
    """Base of every API model: camelCase JSON, unknown fields kept, strict types."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        strict=True,
        validate_default=False,
    )

    def to_dict(self) -> dict[str, Any]:
        """The object as Kubernetes JSON: only fields that were set, unknown fields included."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


# A DNS-1123 subdomain (object names, queue names) and label (task names), as Kubernetes checks.
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
INT32_MAX = 2**31 - 1


QUANTITY_ERROR = "quantity"


def _check_quantities(value: dict[str, Any]) -> dict[str, Any]:
    for name, amount in value.items():
        try:
            parse_quantity(amount)
        except ValueError as exc:
            # The resource name travels in ctx so the error path can say `capability[cpu]`.
            raise PydanticCustomError(
                QUANTITY_ERROR, "{reason}", {"key": name, "reason": str(exc)}
            ) from None
    return value


def _quantity_value_schema() -> dict[str, Any]:
    # What Kubernetes' own CRDs say for a resource.Quantity value.
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
        r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
        "x-kubernetes-int-or-string": True,
    }


ResourceList = Annotated[
    dict[str, str | int | float],
    AfterValidator(_check_quantities),
    Field(json_schema_extra={"additionalProperties": _quantity_value_schema()}),
]
"""A Kubernetes ResourceList (`{cpu: "500m", memory: 1Gi}`); values are kept as written."""

FreeForm = Annotated[
    dict[str, Any],
    Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}),
]
"""An object we do not model (pod templates, PVC specs): kept verbatim."""

StringMap = dict[str, str]

CRD_DEFAULT = "x-vulcan-crd-default"
"""Marks a field whose model default is also written into the CRD (`default:` in the schema)."""


def defaulted(value: Any, **kwargs: Any) -> Any:
    """A field whose default the API server fills in (a CRD default), not just a model default."""
    extra = dict(kwargs.pop("json_schema_extra", None) or {})
    extra[CRD_DEFAULT] = True
    return Field(default=value, json_schema_extra=extra, **kwargs)


def cel(*rules: tuple[str, str]) -> dict[str, Any]:
    """`x-kubernetes-validations` for a model's CRD schema: (rule, message) pairs."""
    return {
        "x-kubernetes-validations": [{"rule": rule, "message": message} for rule, message in rules]
    }


class OwnerReference(KubeModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: StringMap | None = None
    annotations: StringMap | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class KubeObject(KubeModel):
    """A top-level object: apiVersion, kind, metadata."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name or self.metadata.generate_name or ""

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace


def unknown_fields(model: BaseModel, path: str = "") -> list[str]:
    """Dotted paths of fields that no model declares (typos such as `spec.minAvaliable`).

    Free-form parts (pod templates) are plain dicts, so nothing below them is reported.
    """
    found: list[str] = []
    for key in model.model_extra or {}:
        found.append(f"{path}{key}")
    for field_name in type(model).model_fields:
        value = getattr(model, field_name)
        alias = type(model).model_fields[field_name].alias or field_name
        found.extend(_unknown_in(value, f"{path}{alias}"))
    return found


def _unknown_in(value: Any, path: str) -> list[str]:
    if isinstance(value, BaseModel):
        return unknown_fields(value, f"{path}.")
    if isinstance(value, list):
        out: list[str] = []
        for index, item in enumerate(value):
            out.extend(_unknown_in(item, f"{path}[{index}]"))
        return out
    if isinstance(value, dict):
        out = []
        for key, item in value.items():
            if isinstance(item, BaseModel):
                out.extend(unknown_fields(item, f"{path}[{key}]."))
        return out
    return []


def apply_crd_defaults(model: BaseModel) -> None:
    """Mark CRD-defaulted fields as set, in place, as the API server's structural defaulting
    does: wherever an object exists, its missing defaulted fields appear with their default."""
    for name, info in type(model).model_fields.items():
        extra = info.json_schema_extra
        if (
            name not in model.model_fields_set
            and isinstance(extra, dict)
            and extra.get(CRD_DEFAULT)
        ):
            setattr(model, name, info.default)
        _apply_below(getattr(model, name))


def _apply_below(value: Any) -> None:
    if isinstance(value, BaseModel):
        apply_crd_defaults(value)
    elif isinstance(value, list):
        for item in value:
            _apply_below(item)
    elif isinstance(value, dict):
        for item in value.values():
            if isinstance(item, BaseModel):
                apply_crd_defaults(item)
