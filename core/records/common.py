"""What every record decoder shares: interning, shared values, owner references."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

import orjson

from core.resources import ResourceVector

NO_LABELS: dict[str, str] = {}
T = TypeVar("T")
intern = sys.intern

# Shared values are capped: past this many distinct ones, a pathological variety of shapes
# stops being shared instead of growing the table without end.
_SHARED_LIMIT = 100_000
_VECTORS: dict[tuple[tuple[str, int], ...], ResourceVector] = {}
_MAPPINGS: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}


def meta_key(meta: Mapping[str, Any]) -> str:
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def opt(value: Any) -> str | None:
    """An interned non-empty string, else None."""
    return intern(value) if isinstance(value, str) and value else None


def _share(table: dict[Any, T], signature: Any, value: T) -> T:
    known = table.get(signature)
    if known is None:
        if len(table) > _SHARED_LIMIT:
            return value
        table[signature] = known = value
    return known


def shared_vector(vector: ResourceVector) -> ResourceVector:
    """One object for every equal vector: the pods of a job all request the same, and 100,000
    pods then hold a few hundred vectors instead of 100,000 (vectors are never mutated)."""
    return _share(_VECTORS, tuple(sorted(vector.items())), vector)


def shared_mapping(mapping: dict[str, Any]) -> dict[str, Any]:
    """One dict for every equal small mapping of hashable values (the picked annotations and
    labels of a job's pods): records never mutate them."""
    if not mapping:
        return NO_LABELS
    return _share(_MAPPINGS, tuple(sorted(mapping.items())), mapping)


def shared_labels(labels: dict[str, str]) -> dict[str, str]:
    """`labels` (a freshly decoded mapping) shared between records with the same set. Keyed in
    the order given: the API server writes map keys sorted, so equal sets read from it share
    (an unsorted equal set only misses the sharing)."""
    if not labels:
        return NO_LABELS
    return _share(_MAPPINGS, tuple(labels.items()), labels)


def pick(source: Mapping[str, str] | None, names: tuple[str, ...]) -> dict[str, str]:
    """The named entries of `source`, shared between records that pick the same."""
    if not source:
        return NO_LABELS
    return shared_mapping({name: source[name] for name in names if name in source})


class OwnerRef(NamedTuple):
    """One `metadata.ownerReferences` entry, interned (the pods of a workload share its
    strings), ~100 bytes instead of a ~500-byte dict per pod."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool
    block_owner_deletion: bool

    @classmethod
    def decode(cls, ref: Mapping[str, Any]) -> OwnerRef:
        return cls(
            intern(str(ref.get("apiVersion", ""))),
            intern(str(ref.get("kind", ""))),
            intern(str(ref.get("name", ""))),
            intern(str(ref.get("uid", ""))),
            bool(ref.get("controller")),
            bool(ref.get("blockOwnerDeletion")),
        )

    def to_dict(self) -> dict[str, Any]:
        """The reference as the API writes it (for objects that take the same owners)."""
        out: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
        }
        if self.controller:
            out["controller"] = True
        if self.block_owner_deletion:
            out["blockOwnerDeletion"] = True
        return out


# The pods of a workload name the same owners: one tuple of references for all of them.
_OWNERS_MEMO: dict[bytes, tuple[OwnerRef, ...]] = {}
_OWNERS_MEMO_SIZE = 4096


def owner_refs(meta: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    refs = meta.get("ownerReferences")
    if not refs:
        return ()
    try:
        key: bytes | None = orjson.dumps(refs)
    except (TypeError, orjson.JSONEncodeError):
        key = None
    if key is not None:
        known = _OWNERS_MEMO.get(key)
        if known is not None:
            return known
    decoded = tuple(OwnerRef.decode(r) for r in refs)
    if key is not None:
        if len(_OWNERS_MEMO) >= _OWNERS_MEMO_SIZE:
            _OWNERS_MEMO.clear()
        _OWNERS_MEMO[key] = decoded
    return decoded


def controller_of(refs: tuple[OwnerRef, ...]) -> OwnerRef | None:
    """The reference with `controller: true`, if any."""
    return next((r for r in refs if r.controller), None)


def resources(resource_list: Any) -> ResourceVector | None:
    if not resource_list:
        return None
    try:
        return ResourceVector.from_resource_list(resource_list)
    except ValueError:
        return None
