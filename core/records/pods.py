"""The pod record: what the extender's cache and every controller read of a pod.

One record for both (they share informers in one process, and the kind is the same): ~30 slots
of numbers, interned strings and values shared between the pods of a job (request vector, quota
usage, picked annotations, owner references), so 100,000 pods stay near 1 KiB each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from core.api import keys
from core.api.booleans import preemptable_flag
from core.api.markers import carried
from core.numa import NumaAsk, numa_ask
from core.quota import pod_quota_usage
from core.records.common import (
    NO_LABELS,
    OwnerRef,
    controller_of,
    intern,
    opt,
    owner_refs,
    pick,
    shared_labels,
    shared_vector,
)
from core.records.constraints import PlacementConstraints, placement_constraints
from core.resources import ResourceVector, pod_requests
from core.timestamps import epoch_seconds

# Pod annotations a workload's PodGroup is built from (Volcano's pg-controller).
POD_ANNOTATIONS = (
    keys.GROUP_NAME,
    keys.QUEUE_NAME,
    keys.PREEMPTABLE,
    keys.COOLDOWN_TIME,
    keys.REVOCABLE_ZONE,
    keys.JDB_MIN_AVAILABLE,
    keys.JDB_MAX_UNAVAILABLE,
    keys.NETWORK_TOPOLOGY_MODE,
    keys.NETWORK_TOPOLOGY_HIGHEST_TIER,
)
# Kubernetes' StatefulSet controller labels each pod with the revision it was made from.
CONTROLLER_REVISION_HASH = "controller-revision-hash"
POD_LABELS = (keys.PREEMPTABLE, keys.COOLDOWN_TIME, CONTROLLER_REVISION_HASH)
# Marked by Volcano's job controller on a pod it is about to delete (not an eviction).
OUT_OF_SYNC = "volcano.sh/controller-out-of-sync"


def pod_group_key(namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    """`namespace/name` of the PodGroup a pod belongs to: Volcano's annotation
    `scheduling.k8s.io/group-name`, else the coscheduling label `scheduling.x-k8s.io/pod-group`;
    None outside any group, and for pods carrying Kubernetes' native gang fields
    (`spec.schedulingGroup` / `spec.workloadRef`), which kube-scheduler's own plugin handles."""
    if spec.get("schedulingGroup") or spec.get("workloadRef"):
        return None
    name = (meta.get("annotations") or NO_LABELS).get(keys.GROUP_NAME) or (
        meta.get("labels") or NO_LABELS
    ).get(keys.COSCHEDULING_POD_GROUP)
    return f"{namespace}/{name}" if name else None


def pod_basis(obj: dict[str, Any]) -> int:
    """A digest of what PodRecord reads of a pod (for one name, in one namespace): of its
    metadata the uid, creation, deletion, labels, annotations and owners, its spec whole, and
    of its status the phase, nominated node, PodScheduled condition, readiness, restarts and
    exit code as the record has them. Equal digests: equal records (bar the resourceVersion);
    a key order the server changed only costs a rebuild."""
    meta = obj["metadata"]
    status = obj.get("status") or NO_LABELS
    scheduled = next(
        (c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None
    )
    statuses = status.get("containerStatuses") or ()
    return hash(
        orjson.dumps(
            (
                meta.get("uid"),
                meta.get("creationTimestamp"),
                meta.get("deletionTimestamp"),
                meta.get("labels"),
                meta.get("annotations"),
                meta.get("ownerReferences"),
                obj.get("spec"),
                status.get("phase"),
                status.get("nominatedNodeName"),
                scheduled
                and (scheduled.get("status"), scheduled.get("reason"), scheduled.get("message")),
                *_container_states(status, statuses),
            )
        )
    )


def _container_states(status: Mapping[str, Any], statuses: Any) -> tuple[bool, int, int | None]:
    """(ready, restarts, the first container's exit code once it terminated), as a pod's
    record reads them of its status."""
    ready = bool(statuses) and all(c.get("ready") for c in statuses)
    restarts = sum(
        int(c.get("restartCount") or 0)
        for c in (*(status.get("initContainerStatuses") or ()), *statuses)
    )
    first = (statuses[0].get("state") or {}).get("terminated") if statuses else None
    return ready, restarts, int(first.get("exitCode") or 0) if first else None


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default


class PodRecord:
    # No full annotations: they are the biggest part of a pod, and only the picked ones are
    # read. Labels are kept whole (selectors read any of them), shared between equal sets.
    # Repeated strings (namespace, node, phase, group ...) are interned.
    __slots__ = (
        "annotations",
        "annotations_preemptable",
        "basis",
        "constraints",
        "created",
        "deleting",
        "deletion_due",
        "exit_code",
        "gates",
        "group",
        "index",
        "job_name",
        "job_version",
        "key",
        "labels",
        "markers",
        "name",
        "namespace",
        "node",
        "nominated_node",
        "numa",
        "out_of_sync",
        "owner",
        "owner_refs",
        "phase",
        "priority",
        "priority_class",
        "ready",
        "refusal",
        "requests",
        "restarts",
        "rv",
        "scheduler_name",
        "task",
        "uid",
        "unschedulable",
        "usage",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        annotations = meta.get("annotations") or NO_LABELS
        labels = meta.get("labels") or NO_LABELS
        self.namespace: str = intern(meta.get("namespace", ""))
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.created: str = meta.get("creationTimestamp", "")
        deletion = meta.get("deletionTimestamp")
        self.deleting = bool(deletion)
        # When its deletion's grace period ends (POSIX seconds, the API server's clock): a pod
        # still there long after was not confirmed gone by its kubelet (its node is lost).
        self.deletion_due: float | None = epoch_seconds(deletion) if deletion else None
        self.annotations: dict[str, str] = pick(annotations, POD_ANNOTATIONS)
        # Every label (shared between pods with the same set): pod (anti-)affinity terms and
        # topology spread constraints select pods by any label.
        self.labels: dict[str, str] = shared_labels(labels)
        self.owner_refs: tuple[OwnerRef, ...] = owner_refs(meta)
        self.owner: OwnerRef | None = controller_of(self.owner_refs)
        self.node: str | None = opt(spec.get("nodeName"))
        self.nominated_node: str | None = opt(status.get("nominatedNodeName"))
        self.phase: str = intern(status.get("phase") or "Pending")
        self.priority = int(spec.get("priority") or 0)
        self.priority_class: str = intern(spec.get("priorityClassName") or "")
        self.scheduler_name: str = intern(spec.get("schedulerName") or keys.KUBE_DEFAULT_SCHEDULER)
        # What kube-scheduler's filters read besides the request (None: nothing, the common pod).
        self.constraints: PlacementConstraints | None = placement_constraints(
            spec, self.namespace, labels
        )
        self.gates: tuple[str, ...] = tuple(
            intern(str(g.get("name", ""))) for g in spec.get("schedulingGates") or ()
        )
        # A scheduler tried this pending pod and gave up for now (PodScheduled False): it waits
        # in kube-scheduler's unschedulable pool until some event moves it.
        scheduled = next(
            (c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None
        )
        self.unschedulable = False
        # Why its scheduler last turned it away ("" if it did not): kube-scheduler's
        # aggregated message, which names vulcan's refusal only if it reached the extender.
        self.refusal = ""
        if self.node is None and scheduled is not None and scheduled.get("status") == "False":
            self.unschedulable = True
            if scheduled.get("reason") == "Unschedulable":
                self.refusal = str(scheduled.get("message") or "")
        group = pod_group_key(self.namespace, meta, spec)
        self.group: str | None = intern(group) if group else None
        self.task: str | None = opt(annotations.get(keys.TASK_SPEC) or labels.get(keys.TASK_SPEC))
        # Volcano: a pod is preemptable unless it says otherwise (Go's ParseBool reads it).
        self.annotations_preemptable = preemptable_flag(annotations, labels)
        try:
            # vulcan's routing markers are no capacity (keys.MARKER_RESOURCE_GROUP).
            self.requests = shared_vector(
                pod_requests(spec, ignored_group=keys.MARKER_RESOURCE_GROUP)
            )
        except (ValueError, TypeError):
            self.requests = shared_vector(ResourceVector({"pods": 1}))
        # The cpus a Guaranteed pod pins per container (the numa-aware plugin), else None.
        self.numa: NumaAsk | None = numa_ask(spec, annotations.get(keys.NUMA_TOPOLOGY_POLICY, ""))
        # vulcan's routing markers it carries (an extender entry's managedResources).
        self.markers: frozenset[str] = carried(spec, keys.MARKER_RESOURCE_GROUP)
        # The pod's ResourceQuota usage: what Volcano's controllers build minResources from
        # (memoised, so equal pods share one mapping).
        self.usage: dict[str, int] = pod_quota_usage(
            spec, terminal=self.phase in ("Succeeded", "Failed")
        )
        # What Volcano's job controller reads of its pods.
        self.job_name: str = intern(annotations.get(keys.JOB_NAME, ""))
        self.index = _int(annotations.get(keys.TASK_INDEX), -1)
        self.job_version = _int(annotations.get(keys.JOB_VERSION), 0)
        self.out_of_sync = annotations.get(OUT_OF_SYNC) == "true"
        # The first container's exit code once it terminated: Volcano's PodFailed exitCode.
        self.exit_code: int | None
        self.ready, self.restarts, self.exit_code = _container_states(
            status, status.get("containerStatuses") or ()
        )
        self.basis: int | None = None  # pod_basis of obj, once a MODIFIED asked (`refresh`)

    @classmethod
    def refresh(cls, old: PodRecord, obj: dict[str, Any]) -> PodRecord:
        """The record of `obj`, a new version of `old`'s pod (a watch's MODIFIED): `old` with the
        new resourceVersion when nothing else it reads changed (a kubelet's status write, an
        annotation vulcan stamps), built anew otherwise. Building one is most of what a pod
        event costs the informer."""
        basis = pod_basis(obj)
        if old.basis == basis:
            record = old._copy()
            record.rv = obj["metadata"].get("resourceVersion", "")
            return record
        record = cls(obj)
        record.basis = basis
        return record

    def _copy(self) -> PodRecord:
        # Slot by slot, spelled out: five times faster than a loop over __slots__ (a test
        # checks that every slot is here).
        copy = object.__new__(PodRecord)
        copy.annotations = self.annotations
        copy.annotations_preemptable = self.annotations_preemptable
        copy.basis = self.basis
        copy.constraints = self.constraints
        copy.created = self.created
        copy.deleting = self.deleting
        copy.deletion_due = self.deletion_due
        copy.exit_code = self.exit_code
        copy.gates = self.gates
        copy.group = self.group
        copy.index = self.index
        copy.job_name = self.job_name
        copy.job_version = self.job_version
        copy.key = self.key
        copy.labels = self.labels
        copy.markers = self.markers
        copy.name = self.name
        copy.namespace = self.namespace
        copy.node = self.node
        copy.nominated_node = self.nominated_node
        copy.numa = self.numa
        copy.out_of_sync = self.out_of_sync
        copy.owner = self.owner
        copy.owner_refs = self.owner_refs
        copy.phase = self.phase
        copy.priority = self.priority
        copy.priority_class = self.priority_class
        copy.ready = self.ready
        copy.refusal = self.refusal
        copy.requests = self.requests
        copy.restarts = self.restarts
        copy.rv = self.rv
        copy.scheduler_name = self.scheduler_name
        copy.task = self.task
        copy.uid = self.uid
        copy.unschedulable = self.unschedulable
        copy.usage = self.usage
        return copy

    @property
    def group_name(self) -> str:
        """The pod's `scheduling.k8s.io/group-name` annotation (Volcano's only group key)."""
        return self.annotations.get(keys.GROUP_NAME, "")

    @property
    def queue_annotation(self) -> str | None:
        return self.annotations.get(keys.QUEUE_NAME) or None

    @property
    def gated(self) -> bool:
        """Held back from scheduling by a scheduling gate."""
        return bool(self.gates)

    @property
    def user_gated(self) -> bool:
        """Held back by a scheduling gate other than vulcan's own queue-allocation gate (which
        vulcan removes when the gang is admitted): the user's, removed when the user decides."""
        return any(gate != keys.QUEUE_ALLOCATION_GATE for gate in self.gates)

    def assumed_deleting(self) -> PodRecord:
        """This pod as it will be once a deletion asked for it lands: the same record with
        its deletion under way (what kube-scheduler's assume cache is for a Binding, and
        Volcano's cache does for an eviction: the task is Releasing from the moment it asks)."""
        copy = self._copy()
        copy.deleting = True
        return copy

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def occupies_node(self) -> bool:
        """Counts against its node's capacity: bound and not finished (terminating pods still
        hold their resources until they are gone, as kube-scheduler counts them)."""
        return self.node is not None and not self.terminal
