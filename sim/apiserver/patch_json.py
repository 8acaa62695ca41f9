"""RFC 6902 JSON patch (`application/json-patch+json`), via the `jsonpatch` library, as a pure
function on decoded JSON: `json_patch` returns a new object and never mutates its inputs.

Separate from merge patch and strategic merge patch (sim.apiserver.patch dispatches among them):
it is a list of operations applied by a library, with its own error reporting.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer

from sim.apiserver.patch_common import PatchError, _copy

# --------------------------------------------------------------------------- JSON patch


def json_patch(target: dict[str, Any], operations: list[Any]) -> dict[str, Any]:
    """Apply an RFC 6902 JSON patch; any failing operation (including `test`) is a PatchError."""
    if not isinstance(operations, list):
        raise PatchError(f"a JSON patch must be a list, got {type(operations).__name__}")
    # Copy the operations too: jsonpatch inserts their values by reference.
    document: Any = _copy(target)
    for index, operation in enumerate(_copy(operations)):
        document = _apply_operation(document, index, operation)
    if not isinstance(document, dict):
        raise PatchError("the JSON patch did not produce a JSON object")
    return document


def _apply_operation(document: Any, index: int, operation: Any) -> Any:
    """One operation at a time, so an error can name the operation that failed."""
    if not isinstance(operation, dict):
        raise PatchError(f"JSON patch operation {index} is not an object: {operation!r}")
    described = f"JSON patch operation {index} ({operation.get('op')!r} {operation.get('path')!r})"
    try:
        return jsonpatch.JsonPatch([operation]).apply(document, in_place=True)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise PatchError(f"{described}: test failed: {exc}") from None
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise PatchError(f"{described} failed: {exc}") from None
    except (TypeError, KeyError, IndexError, ValueError) as exc:
        # Malformed operations can surface as plain Python errors inside the library.
        raise PatchError(f"{described} is invalid: {exc!r}") from None
