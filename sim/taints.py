"""Taints and tolerations, matched exactly as Kubernetes matches them.

Pure functions over the API's JSON shapes (`spec.taints[]` of a Node, `spec.tolerations[]` of a
Pod), shared by the embedded cluster's node lifecycle controller (NoExecute eviction) and its
kube-scheduler stand-in (NoSchedule filtering). The rules follow k8s.io/api/core/v1
`Toleration.ToleratesTaint` and component-helpers' `GetMatchingTolerations`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"

# The taints the node lifecycle controller manages (and TaintNodesByCondition admission adds).
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"


def toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """One toleration against one taint (`Toleration.ToleratesTaint`).

    An empty effect matches every effect; an empty key (only valid with `Exists`) matches every
    key; `Equal` (the default operator) compares values, `Exists` ignores them. Operators
    Kubernetes does not define tolerate nothing, as in Go."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Whether any of `tolerations` tolerates `taint`."""
    return any(toleration_tolerates(t, taint) for t in tolerations)


def matching_toleration(
    tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The first toleration that tolerates `taint` (the one Kubernetes' taint eviction reads
    `tolerationSeconds` from), or None."""
    for toleration in tolerations:
        if toleration_tolerates(toleration, taint):
            return toleration
    return None


def untolerated(
    tolerations: Sequence[Mapping[str, Any]],
    taints: Sequence[Mapping[str, Any]],
    effects: Collection[str],
) -> dict[str, Any] | None:
    """The first of `taints` with one of `effects` that no toleration tolerates (a copy), or
    None when the pod tolerates them all."""
    for taint in taints:
        if (taint.get("effect") or "") in effects and not tolerates(tolerations, taint):
            return dict(taint)
    return None
