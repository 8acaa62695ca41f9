"""The PodGroup controller (Volcano's `pg-controller`).

Pods of our schedulers that are in no group get a PodGroup named after their controller owner
(or themselves) and are annotated with it; ReplicaSets and StatefulSets keep their group in
step (a changed `group-min-member` or pod template updates it, scaling to zero deletes it).

Watches: pods (adds; only pods of our scheduler names, by field selector when there is one),
ReplicaSets and StatefulSets (adds and updates), namespaces (their queue annotation) and
PodGroups (so a reconcile compares against what exists instead of reading it). A work queue
keyed by (kind, namespace/name) (the runtime's, `core.controller.runtime`) retries failures
with backoff. Every write is idempotent: a
create that finds the group already there becomes the update path, an update that changes
nothing is not sent, and the pod annotation is a merge patch.
"""

from __future__ import annotations

import logging
from typing import Any

from core.api import keys
from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef, Reconciler
from core.controller.selection import PODGROUP
from core.kube.client import NAMESPACES, PODGROUPS, PODS, ApiError, KubeClient, Resource
from core.kube.events import NORMAL, EventRecorder, object_reference
from core.kube.informer import Informer
from core.records import (
    CONTROLLER_REVISION_HASH,
    NamespaceRecord,
    PodGroupRecord,
    PodRecord,
    WorkloadRecord,
)
from podgroup_controller.desired import (
    NAME_PREFIX,
    OWNER_KINDS,
    desired_podgroup,
    handled,
    podgroup_name,
    update_patch,
)
from podgroup_controller.options import ControllerOptions

log = logging.getLogger("vulcan.controllers.podgroup")

REPLICASETS = Resource("apps", "v1", "replicasets", True, "ReplicaSet")
STATEFULSETS = Resource("apps", "v1", "statefulsets", True, "StatefulSet")
DAEMONSETS = Resource("apps", "v1", "daemonsets", True, "DaemonSet")
BATCH_JOBS = Resource("batch", "v1", "jobs", True, "Job")
# The pods the controller watches: none of a Volcano Job's, nor the gang members the pod webhook
# gated (`setup` says why).
POD_SELECTOR = f"!{keys.JOB_NAME},!{keys.GROUPED}"
_OWNER_RESOURCES = {r.kind: r for r in (REPLICASETS, STATEFULSETS, DAEMONSETS, BATCH_JOBS)}

Key = tuple[str, str]  # (kind: Pod | ReplicaSet | StatefulSet, namespace/name)


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


class PodGroupReconciler(Reconciler[Key]):
    name = PODGROUP

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        options: ControllerOptions,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.options = options
        self._pods_by_owner: dict[str, set[str]] = {}  # controller owner UID -> pod keys

    def setup(self, watch: Builder[Key]) -> None:
        names = self.options.scheduler_names
        # One scheduler name: let the API server filter (most pods are not ours).
        selector = f"spec.schedulerName={names[0]}" if len(names) == 1 else None
        # Nor are a Volcano Job's: its controller puts them in the Job's group when it makes
        # them, and they are the job controller's watch (this process) already; sent here
        # too, each of their versions crossed the wire twice. Nor the gang members the pod
        # webhook gated: they named their PodGroup when created.
        self.pods = watch.watch(
            PODS,
            PodRecord,
            on_add=self._pod_added,
            on_update=self._pod_updated,
            on_delete=self._pod_deleted,
            field_selector=selector,
            label_selector=POD_SELECTOR,
        )
        self.replicasets = self._watch_workloads(watch, REPLICASETS)
        self.statefulsets = self._watch_workloads(watch, STATEFULSETS)
        self.namespaces = watch.informers.get(NAMESPACES, NamespaceRecord)
        self.podgroups = watch.informers.get(PODGROUPS, PodGroupRecord)

    @staticmethod
    def _watch_workloads(watch: Builder[Key], resource: Resource) -> Informer[WorkloadRecord]:
        decode = _workload_decoder(resource.kind)
        return watch.watch(resource, decode, on_add=_workload_key, on_update=_workload_updated)

    # ------------------------------------------------------------------ event handlers

    def _index(self, pod: PodRecord) -> None:
        if pod.owner is not None:
            self._pods_by_owner.setdefault(pod.owner.uid, set()).add(pod.key)

    def _unindex(self, pod: PodRecord) -> None:
        if pod.owner is None:
            return
        uid = pod.owner.uid
        keys_ = self._pods_by_owner.get(uid)
        if keys_ is not None:
            keys_.discard(pod.key)
            if not keys_:
                del self._pods_by_owner[uid]

    def _pod_added(self, pod: PodRecord) -> Key | None:
        self._index(pod)
        return ("Pod", pod.key) if handled(pod, self.options.scheduler_names) else None

    def _pod_updated(self, old: PodRecord, new: PodRecord) -> None:
        # Volcano reacts to pod adds only; updates just keep the owner index right.
        self._unindex(old)
        self._index(new)

    def _pod_deleted(self, pod: PodRecord) -> None:
        self._unindex(pod)

    # ------------------------------------------------------------------ reconcile

    def reference(self, key: Key) -> ObjectRef:
        kind, object_key = key
        namespace, name = _split(object_key)
        api_version = "v1" if kind == "Pod" else "apps/v1"
        ref = {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name}
        record = (self.pods if kind == "Pod" else self._workloads(kind)).items.get(object_key)
        if record is not None:
            ref["uid"] = record.uid
        return ref

    def describe(self, key: Key) -> str:
        return f"the PodGroup of {key[0]} {key[1]}"

    def _workloads(self, kind: str) -> Any:
        return self.statefulsets if kind == "StatefulSet" else self.replicasets

    async def reconcile(self, key: Key) -> None:
        kind, name = key
        if kind == "Pod":
            await self._sync_pod(name)
        else:
            await self._sync_workload(kind, name)

    async def _sync_pod(self, key: str) -> None:
        pod = self.pods.items.get(key)
        if pod is None or pod.deleting or not handled(pod, self.options.scheduler_names):
            return
        owner = await self._owner(pod)
        if owner is not None and owner.kind in ("ReplicaSet", "StatefulSet") and not owner.replicas:
            return  # scaled to zero: its group is (being) deleted, and so is this pod
        group = await self._ensure(pod, owner)
        try:
            await self.client.patch(
                PODS,
                pod.name,
                {"metadata": {"annotations": {keys.GROUP_NAME: group}}},
                pod.namespace,
            )
        except ApiError as exc:
            if not exc.not_found:  # a pod deleted meanwhile needs no group
                raise
            return
        self.metrics.changes.labels("Pod", "annotated").inc()
        log.debug("pod grouped", extra={"pod": key, "podgroup": group})

    async def _sync_workload(self, kind: str, key: str) -> None:
        workload = self._workloads(kind).items.get(key)
        if workload is None:
            return  # deleted: the group goes with it (ownerReference garbage collection)
        group = NAME_PREFIX + workload.uid
        if workload.replicas == 0:
            await self._delete_group(workload, group)
            return
        pod = self._representative(workload, group)
        if pod is not None:
            await self._ensure(pod, workload)

    def _representative(self, workload: WorkloadRecord, group: str) -> PodRecord | None:
        """The first live pod of the workload that is ours to group (Volcano: a StatefulSet's
        pods of its update revision only, so the group follows the new template)."""
        candidates = []
        for pod_key in self._pods_by_owner.get(workload.uid, ()):
            pod = self.pods.items.get(pod_key)
            if (
                pod is None
                or pod.deleting
                or pod.scheduler_name not in self.options.scheduler_names
                or pod.group_name not in ("", group)  # grouped by someone else (e.g. LWS)
            ):
                continue
            if (
                workload.kind == "StatefulSet"
                and workload.revision
                and pod.labels.get(CONTROLLER_REVISION_HASH) != workload.revision
            ):
                continue
            candidates.append(pod)
        return min(candidates, key=lambda p: p.name) if candidates else None

    # ------------------------------------------------------------------ owners

    async def _owner(self, pod: PodRecord) -> WorkloadRecord | None:
        """The pod's controller owner if it is a kind a group inherits from (ReplicaSet,
        StatefulSet from the informers; DaemonSet and batch Job read once)."""
        ref = pod.owner
        if ref is None or (ref.api_version, ref.kind) not in OWNER_KINDS:
            return None
        kind = ref.kind
        key = f"{pod.namespace}/{ref.name}"
        if kind in ("ReplicaSet", "StatefulSet"):
            cached = self._workloads(kind).items.get(key)
            if cached is not None and cached.uid == ref.uid:
                return cached
        try:
            obj = await self.client.get(_OWNER_RESOURCES[kind], ref.name, pod.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None  # the owner is going; so will the pod and its group
            raise
        record = WorkloadRecord(obj, kind)
        return record if record.uid == ref.uid else None

    # ------------------------------------------------------------------ the group

    async def _ensure(self, pod: PodRecord, owner: WorkloadRecord | None) -> str:
        """Create the pod's PodGroup, or bring it up to date; its name."""
        namespace = self.namespaces.items.get(pod.namespace)
        desired = desired_podgroup(
            pod,
            owner,
            (namespace.queue or "") if namespace else "",
            inherit=self.options.inherit_owner_annotations,
        )
        name = podgroup_name(pod)
        current = self.podgroups.items.get(f"{pod.namespace}/{name}")
        if current is None:
            try:
                created = await self.client.create(PODGROUPS, desired)
            except ApiError as exc:
                if not exc.conflict:
                    raise
                # Created meanwhile (another pod of the workload): the update path.
                current = PodGroupRecord(await self.client.get(PODGROUPS, name, pod.namespace))
            else:
                self._changed(created, "created", self._created_note(desired))
                return name
        patch = update_patch(current, desired)
        if patch is None:
            return name
        try:
            updated = await self.client.patch(PODGROUPS, name, patch, pod.namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            # Deleted since the informer saw it (scaled to zero and back): create it again.
            created = await self.client.create(PODGROUPS, desired)
            self._changed(created, "created", self._created_note(desired))
            return name
        self._changed(updated, "updated", f"updated {', '.join(_changed_fields(patch))}")
        return name

    @staticmethod
    def _created_note(desired: dict[str, Any]) -> str:
        spec = desired["spec"]
        return f"created with minMember {spec['minMember']} in queue {spec['queue']}"

    def _changed(self, obj: dict[str, Any], operation: str, note: str) -> None:
        self.metrics.changes.labels("PodGroup", operation).inc()
        reason = "PodGroupCreated" if operation == "created" else "PodGroupUpdated"
        self.recorder.record(object_reference(obj), NORMAL, reason, note)
        log.info(
            f"podgroup {operation}",
            extra={"podgroup": f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"},
        )

    async def _delete_group(self, workload: WorkloadRecord, group: str) -> None:
        if f"{workload.namespace}/{group}" not in self.podgroups.items:
            return
        try:
            await self.client.delete(PODGROUPS, group, workload.namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            return
        self.metrics.changes.labels("PodGroup", "deleted").inc()
        self.recorder.record(
            {
                "apiVersion": "apps/v1",
                "kind": workload.kind,
                "namespace": workload.namespace,
                "name": workload.name,
                "uid": workload.uid,
            },
            NORMAL,
            "PodGroupDeleted",
            f"deleted PodGroup {group}: scaled to zero",
        )


def _workload_key(workload: WorkloadRecord) -> Key:
    return (workload.kind, workload.key)


def _workload_updated(old: WorkloadRecord, new: WorkloadRecord) -> Key | None:
    # Most updates are the workload controller's status writes: only what the group is made
    # of matters (a new pod template shows as a new StatefulSet update revision).
    changed = (old.annotations, old.replicas, old.revision, old.uid) != (
        new.annotations,
        new.replicas,
        new.revision,
        new.uid,
    )
    return _workload_key(new) if changed else None


def _workload_decoder(kind: str) -> Any:
    def decode(obj: dict[str, Any]) -> WorkloadRecord:
        return WorkloadRecord(obj, kind)

    return decode


def _changed_fields(patch: dict[str, Any]) -> list[str]:
    fields = [f"spec.{name}" for name in patch.get("spec", {})]
    fields += [f"metadata.{name}" for name in patch.get("metadata", {})]
    return fields
