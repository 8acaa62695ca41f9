"""The three PATCH content types of the Kubernetes API, as pure functions on decoded JSON.

- `merge_patch`: RFC 7386 JSON merge patch (`application/merge-patch+json`).
- `json_patch`: RFC 6902 JSON patch (`application/json-patch+json`), via the `jsonpatch` library.
- `strategic_merge_patch`: Kubernetes' strategic merge patch
  (`application/strategic-merge-patch+json`), following
  k8s.io/apimachinery/pkg/util/strategicpatch/patch.go (`StrategicMergeMapPatch`, i.e. the
  server-side options `MergeParallelList` and `IgnoreUnmatchedNulls`). Go reads each field's
  `patchStrategy` / `patchMergeKey` struct tags; we have no Go types, so `LIST_MERGE_STRATEGIES`
  records those tags for the built-in fields that kubectl and kube-scheduler patch.

Every function returns a new object and never mutates its inputs: the server keeps the stored
object and the request body around, and aliasing either into the result would let a later edit of
the result corrupt them.

The implementations live in one module per content type (sim.apiserver.patch_merge,
patch_json, patch_strategic, with the strategic merge tables in patch_strategies and the shared
`PatchError` in patch_common); this module is their front: the content types, the dispatch by
Content-Type, and every public name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

import orjson

from sim.apiserver.patch_common import PatchError, UnsupportedPatchType
from sim.apiserver.patch_json import json_patch
from sim.apiserver.patch_merge import merge_patch
from sim.apiserver.patch_strategic import strategic_merge_patch
from sim.apiserver.patch_strategies import (
    KIND_LIST_MERGE_STRATEGIES,
    LIST_MERGE_STRATEGIES,
    MergeStrategy,
)

__all__ = [
    "JSON_PATCH",
    "KIND_LIST_MERGE_STRATEGIES",
    "LIST_MERGE_STRATEGIES",
    "MERGE_PATCH",
    "PATCH_CONTENT_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "MergeStrategy",
    "PatchError",
    "UnsupportedPatchType",
    "apply_patch",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
]

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
PATCH_CONTENT_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)


# --------------------------------------------------------------------------- dispatch

_Applier = Callable[[dict[str, Any], Any, str | None], dict[str, Any]]

_APPLIERS: Final[Mapping[str, _Applier]] = MappingProxyType(
    {
        JSON_PATCH: lambda target, body, _kind: json_patch(target, body),
        MERGE_PATCH: lambda target, body, _kind: merge_patch(target, body),
        STRATEGIC_MERGE_PATCH: strategic_merge_patch,
    }
)


def apply_patch(
    target: dict[str, Any], content_type: str, body: bytes | str | Any, kind: str | None = None
) -> dict[str, Any]:
    """Apply a PATCH request body of Content-Type `content_type` to `target` (of Kind `kind`).

    `body` is the raw request body (bytes or str, JSON) or an already decoded value.
    Raises UnsupportedPatchType for any other media type and PatchError for a bad patch.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    applier = _APPLIERS.get(media_type)
    if applier is None:
        raise UnsupportedPatchType(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(PATCH_CONTENT_TYPES)}"
        )
    return applier(target, _decode(body), kind)


def _decode(body: bytes | str | Any) -> Any:
    if not isinstance(body, bytes | bytearray | memoryview | str):
        return body
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PatchError(f"the patch body is not valid JSON: {exc}") from None
