"""The list merge strategies of Kubernetes' strategic merge patch: Go reads each field's
`patchStrategy` / `patchMergeKey` struct tags; we have no Go types, so `LIST_MERGE_STRATEGIES`
(and `KIND_LIST_MERGE_STRATEGIES` for fields of one kind) record those tags for the built-in
fields that kubectl and kube-scheduler patch, and `_Schema` answers lookups in them.

Separate from the merge algorithm (sim.apiserver.patch_strategic): this is data about the
Kubernetes API types, which grows as fields are added, while the algorithm follows Go's code.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

# --------------------------------------------------------------------------- strategic merge


@dataclass(frozen=True, slots=True)
class MergeStrategy:
    """`patchStrategy:"merge"` on a list field.

    `key` is the field's `patchMergeKey`: elements (objects) with the same key value are merged.
    `key=None` is a merging list of primitives (e.g. `finalizers`): the union of both lists.
    List fields without a MergeStrategy are replaced wholesale, as Go does for untagged fields.
    """

    key: str | None = None


_BY_NAME: Final = MergeStrategy("name")
_BY_TYPE: Final = MergeStrategy("type")
_BY_IP: Final = MergeStrategy("ip")
_PRIMITIVE_SET: Final = MergeStrategy(None)

# The struct tags of k8s.io/api, keyed by (parent field, list field): the same field name means
# different things in different places (a container's `ports` merge by `containerPort`, an
# Endpoints subset's `ports` are replaced), and the nearest enclosing field tells them apart.
# The parent of a field inside a list element is the list's field; "" is the object's top
# level; "*" matches any parent. Untagged lists (tolerations, taints, containerStatuses,
# readinessGates, ...) are deliberately absent: Kubernetes replaces them.
LIST_MERGE_STRATEGIES: Final[Mapping[tuple[str, str], MergeStrategy]] = MappingProxyType(
    {
        # metav1.ObjectMeta
        ("metadata", "finalizers"): _PRIMITIVE_SET,
        ("metadata", "ownerReferences"): MergeStrategy("uid"),
        # core/v1 PodSpec (also inside every workload's pod template)
        ("*", "containers"): _BY_NAME,
        ("*", "initContainers"): _BY_NAME,
        ("*", "ephemeralContainers"): _BY_NAME,
        ("*", "volumes"): _BY_NAME,  # merge,retainKeys: $retainKeys is honoured wherever it appears
        ("*", "imagePullSecrets"): _BY_NAME,
        ("*", "hostAliases"): _BY_IP,
        ("*", "topologySpreadConstraints"): MergeStrategy("topologyKey"),
        ("*", "resourceClaims"): _BY_NAME,
        ("*", "schedulingGates"): _BY_NAME,
        # core/v1 Container and EphemeralContainer
        ("containers", "ports"): MergeStrategy("containerPort"),
        ("initContainers", "ports"): MergeStrategy("containerPort"),
        ("ephemeralContainers", "ports"): MergeStrategy("containerPort"),
        ("*", "env"): _BY_NAME,
        ("*", "volumeMounts"): MergeStrategy("mountPath"),
        ("*", "volumeDevices"): MergeStrategy("devicePath"),
        # Status conditions of every built-in kind (PodCondition, NodeCondition, metav1.Condition,
        # DeploymentCondition, JobCondition, ...) are merged by type; kube-scheduler relies on it.
        ("status", "conditions"): _BY_TYPE,
        # core/v1 PodStatus
        ("status", "podIPs"): _BY_IP,
        ("status", "hostIPs"): _BY_IP,
        ("status", "resourceClaimStatuses"): _BY_NAME,
    }
)

# Fields that exist with these tags only in one kind. With `kind=None` all of them apply (no two
# collide), so an unknown kind still gets the most likely behaviour.
KIND_LIST_MERGE_STRATEGIES: Final[Mapping[str, Mapping[tuple[str, str], MergeStrategy]]] = (
    MappingProxyType(
        {
            "Service": MappingProxyType({("spec", "ports"): MergeStrategy("port")}),
            "Node": MappingProxyType(
                {
                    ("status", "addresses"): _BY_TYPE,
                    ("spec", "podCIDRs"): _PRIMITIVE_SET,
                }
            ),
            "ServiceAccount": MappingProxyType({("", "secrets"): _BY_NAME}),
        }
    )
)


@functools.lru_cache(maxsize=64)
def _strategies_for(kind: str | None) -> Mapping[tuple[str, str], MergeStrategy]:
    table = dict(LIST_MERGE_STRATEGIES)
    if kind is None:
        for extra in KIND_LIST_MERGE_STRATEGIES.values():
            table.update(extra)
    else:
        table.update(KIND_LIST_MERGE_STRATEGIES.get(kind, {}))
    return MappingProxyType(table)


@dataclass(frozen=True, slots=True)
class _Schema:
    """What Go's LookupPatchMetadata answers, from the tables above."""

    table: Mapping[tuple[str, str], MergeStrategy]

    def strategy(self, parent: str, field: str) -> MergeStrategy | None:
        found = self.table.get((parent, field))
        return found if found is not None else self.table.get(("*", field))
