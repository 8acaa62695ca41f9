"""Slim records: what scheduling and the controllers read of each Kubernetes kind, one record
type per kind for every component (the extender's cache and the controllers' informers).

Decoded once from raw JSON (orjson dicts), never from kubernetes-asyncio models. `__slots__`
classes holding strings, numbers, tuples, ResourceVectors and small shared mappings: no reference
cycles, ~1 KiB a pod instead of ~16 KiB as a dict. Records are immutable by convention (an update
is a new record).
"""

from core.records.batch import CommandRecord, FlowObjectRecord, JobRecord, WorkloadRecord
from core.records.cluster import NamespaceRecord, NodeRecord, PriorityClassRecord, QueueRecord
from core.records.common import OwnerRef, shared_vector
from core.records.groups import PodGroupRecord
from core.records.pods import (
    CONTROLLER_REVISION_HASH,
    POD_ANNOTATIONS,
    POD_LABELS,
    PodRecord,
    pod_group_key,
)

__all__ = [
    "CONTROLLER_REVISION_HASH",
    "POD_ANNOTATIONS",
    "POD_LABELS",
    "CommandRecord",
    "FlowObjectRecord",
    "JobRecord",
    "NamespaceRecord",
    "NodeRecord",
    "OwnerRef",
    "PodGroupRecord",
    "PodRecord",
    "PriorityClassRecord",
    "QueueRecord",
    "WorkloadRecord",
    "pod_group_key",
    "shared_vector",
]
