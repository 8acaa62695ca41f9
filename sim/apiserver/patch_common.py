"""What the PATCH implementations (sim.apiserver.patch_merge, patch_json, patch_strategic)
share: the `PatchError` they raise and the copy and type-check helpers they build on.

Separate so that each patch type's module, and the sim.apiserver.patch front that dispatches to
them, import it in one direction.
"""

from __future__ import annotations

from typing import Any


class PatchError(ValueError):
    """A patch that cannot be applied; the message says why."""


class UnsupportedPatchType(PatchError):
    """The request's Content-Type is none of the patch types this server applies."""


# --------------------------------------------------------------------------- helpers


def _copy(value: Any) -> Any:
    """Deep copy of decoded JSON (dicts, lists, scalars); much cheaper than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _require_object(patch: Any, what: str) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise PatchError(f"{what} must be a JSON object, got {type(patch).__name__}")
    return patch
