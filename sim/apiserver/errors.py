"""API errors as the Kubernetes API server reports them: a `Status` object with a reason."""

from __future__ import annotations

from typing import Any

import orjson


class ApiError(Exception):
    """An error answered as a v1 Status (`reason` is Kubernetes' StatusReason)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        name: str | None = None,
        kind: str | None = None,
        group: str | None = None,
        causes: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] = {}
        if name is not None:
            self.details["name"] = name
        if group:
            self.details["group"] = group
        if kind is not None:
            self.details["kind"] = kind
        if causes:
            self.details["causes"] = causes

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del out["reason"]  # StatusReasonUnknown is "", omitted as Go omits it
        if self.details:
            out["details"] = self.details
        return out

    def body(self) -> bytes:
        return orjson.dumps(self.status())


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        404, "NotFound", f'{qualified} "{name}" not found', name=name, kind=resource, group=group
    )


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified} "{name}" already exists',
        name=name,
        kind=resource,
        group=group,
    )


def conflict(resource: str, name: str, group: str = "", why: str | None = None) -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    why = why or "the object has been modified; please apply your changes to the latest version "
    "and try again"
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        name=name,
        kind=resource,
        group=group,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(kind: str, name: str, group: str, causes: list[dict[str, str]]) -> ApiError:
    qualified = f"{kind}.{group}" if group else kind
    joined = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    if len(causes) > 1:
        joined = f"[{joined}]"
    return ApiError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {joined}',
        name=name,
        kind=kind,
        group=group,
        causes=causes,
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)
