"""What kube-controller-manager's Deployment controller derives from a pod template: the
`pod-template-hash` label that names and selects a Deployment's ReplicaSet, template equality
ignoring that label, and the annotations a ReplicaSet takes from its Deployment.

The hash is computed as Kubernetes computes it (`controller.ComputeHash`: FNV-32a over the
template, then the collision count, printed in decimal and encoded with `rand.SafeEncodeString`'s
alphabet), except that the template is hashed as canonical JSON rather than Go's `spew`
dump: values differ from a real cluster's, their shape and stability do not.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import orjson

POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# Deployment annotations a ReplicaSet does not inherit (deployment/util's annotationsToSkip).
SKIPPED_ANNOTATIONS = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        "deployment.kubernetes.io/revision-history",
        DESIRED_REPLICAS,
        MAX_REPLICAS,
        "deprecated.deployment.rollback.to",
    }
)
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.SafeEncodeString
_FNV_OFFSET, _FNV_PRIME = 0x811C9DC5, 0x01000193


def _fnv32a(data: bytes) -> int:
    value = _FNV_OFFSET
    for byte in data:
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value


def template_hash(template: Mapping[str, Any], collision_count: int | None = None) -> str:
    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    if collision_count is not None:
        data += collision_count.to_bytes(4, "little")
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(_fnv32a(data)))


def without_hash(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template minus its `pod-template-hash` label (an emptied label map dropped)."""
    out = copy.deepcopy(dict(template))
    labels = (out.get("metadata") or {}).get("labels")
    if labels is not None:
        labels.pop(POD_TEMPLATE_HASH, None)
        if not labels:
            del out["metadata"]["labels"]
    if "metadata" in out and not out["metadata"]:
        del out["metadata"]
    return out


def equal_ignoring_hash(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return without_hash(a) == without_hash(b)


def with_hash(template: Mapping[str, Any], value: str) -> dict[str, Any]:
    out = copy.deepcopy(dict(template))
    metadata = out.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), POD_TEMPLATE_HASH: value}
    return out


def inherited_annotations(deployment_annotations: Mapping[str, str]) -> dict[str, str]:
    """What a Deployment's ReplicaSets carry of its annotations: all but the skipped ones
    (so `scheduling.volcano.sh/group-min-member` reaches the ReplicaSet, where Volcano's
    PodGroup controller reads it)."""
    return {k: v for k, v in deployment_annotations.items() if k not in SKIPPED_ANNOTATIONS}
