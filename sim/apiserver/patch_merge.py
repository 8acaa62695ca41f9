"""RFC 7386 JSON merge patch (`application/merge-patch+json`), as a pure function on decoded
JSON: `merge_patch` returns a new object and never mutates its inputs.

Separate from JSON patch and strategic merge patch (sim.apiserver.patch dispatches among them):
it is the simplest of the three and shares no machinery with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.apiserver.patch_common import _copy, _require_object

# --------------------------------------------------------------------------- merge patch


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply an RFC 7386 JSON merge patch: null deletes, objects merge, anything else replaces."""
    _require_object(patch, "a merge patch")
    return _merge_into(_copy(target) if isinstance(target, dict) else {}, patch)


def _merge_into(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 MergePatch on an object `target` we own (mutated and returned)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            # A non-object target value is replaced by the patch object with its nulls removed,
            # which is what merging into an empty object yields.
            target[key] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = _copy(value)
    return target
