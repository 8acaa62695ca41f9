"""The admission chain for vulcan's kinds, in the API server's order:
decode against the schema -> mutating defaults -> validating rules.

Used by `vulcan validate` and by the embedded API server, so both say the same thing about an
object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from core.api.base import KubeObject, apply_crd_defaults, unknown_fields
from core.api.batch import Job
from core.api.defaults import default_job, default_job_spec, default_queue
from core.api.errors import FieldError, InvalidObject, from_validation_error
from core.api.flow import JobTemplate
from core.api.registry import KindInfo, lookup
from core.api.scheduling import Queue
from core.api.validation import ClusterView, validate


@dataclass(slots=True)
class AdmissionResult:
    info: KindInfo | None
    obj: KubeObject | None = None
    """The defaulted object (None when it could not be decoded)."""
    errors: list[FieldError] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return self.info is not None and not self.errors


def decode(data: dict[str, Any], *, strict_fields: bool = True) -> tuple[KindInfo, KubeObject]:
    """Decode raw JSON into its model. Raises InvalidObject with field paths; LookupError for
    kinds vulcan does not own."""
    info = lookup(data.get("apiVersion"), data.get("kind"))
    if info is None:
        raise LookupError(f"{data.get('apiVersion')}/{data.get('kind')}")
    name = _name_of(data)
    try:
        obj = info.model.model_validate(data)
    except ValidationError as exc:
        raise InvalidObject(info.kind, name, from_validation_error(exc)) from None
    if strict_fields:
        unknown = unknown_fields(obj)
        if unknown:
            errors = [FieldError(path, f'unknown field "{path}"') for path in unknown]
            raise InvalidObject(info.kind, name, errors)
    return info, obj


def apply_defaults(obj: KubeObject) -> KubeObject:
    """CRD (structural) defaults, then Volcano's mutating webhook; returns a new object."""
    obj = obj.model_copy(deep=True)
    apply_crd_defaults(obj)
    if isinstance(obj, Job):
        return default_job(obj)
    if isinstance(obj, JobTemplate):
        obj.spec = default_job_spec(obj.spec)
        return obj
    if isinstance(obj, Queue):
        return default_queue(obj)
    return obj


def admit(
    data: dict[str, Any], view: ClusterView | None = None, *, strict_fields: bool = True
) -> AdmissionResult:
    """Decode, default and validate one object as a CREATE would."""
    try:
        info, obj = decode(data, strict_fields=strict_fields)
    except LookupError:
        return AdmissionResult(None)
    except InvalidObject as exc:
        return AdmissionResult(lookup(data.get("apiVersion"), data.get("kind")), None, exc.errors)
    defaulted = apply_defaults(obj)
    return AdmissionResult(info, defaulted, validate(defaulted, view))


def _name_of(data: dict[str, Any]) -> str:
    meta = data.get("metadata")
    if isinstance(meta, dict):
        return str(meta.get("name") or meta.get("generateName") or "")
    return ""
