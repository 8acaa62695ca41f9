"""kube-controller-manager's ReplicaSet controller, as the embedded cluster needs it.

A ReplicaSet keeps `spec.replicas` active pods (not Succeeded, not Failed, not being deleted)
among the pods it controls (controller ownerReference with its UID; orphans are not adopted):
missing ones are created from its template (`generateName: <name>-`, the template's labels and
annotations, a controller reference), surplus ones deleted in Kubernetes' order (unscheduled
before scheduled, Pending before Running, not ready before ready, newest first). Its status
counts replicas, fullyLabeledReplicas, readyReplicas, availableReplicas (ready for
`minReadySeconds`) and observedGeneration. Pod creations and deletions wait for the informer to
see the previous ones (`sim.controllers.expectations`), and are recorded as Kubernetes records
them (`SuccessfulCreate`, `SuccessfulDelete`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from core.kube.client import PODS, ApiError, KubeClient, Resource
from core.kube.events import NORMAL, WARNING
from core.timestamps import parse_time
from sim.apiserver.selectors import label_selector_from_dict
from sim.controllers.expectations import Expectations
from sim.controllers.runtime import KeyedController, ObjectRecord, controller_ref, owner_reference

log = logging.getLogger("vulcan.sim.controllers.replicaset")

REPLICASETS = Resource("apps", "v1", "replicasets", True, "ReplicaSet")
BURST_REPLICAS = 500  # at most this many creations or deletions per sync, as Kubernetes
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


class PodView:
    """What the ReplicaSet controller reads of a pod."""

    __slots__ = (
        "created",
        "deleting",
        "key",
        "labels",
        "name",
        "namespace",
        "node",
        "owner",
        "phase",
        "ready_since",
        "rv",
        "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.name: str = meta["name"]
        self.namespace: str = meta.get("namespace") or ""
        self.key = f"{self.namespace}/{self.name}"
        self.rv: str = meta.get("resourceVersion", "")
        self.uid: str = meta.get("uid", "")
        self.labels: dict[str, str] = meta.get("labels") or {}
        self.created: str = meta.get("creationTimestamp") or ""
        self.deleting = bool(meta.get("deletionTimestamp"))
        ref = controller_ref(obj)
        self.owner: tuple[str, str, str] | None = (
            (ref.get("kind", ""), ref.get("name", ""), ref.get("uid", "")) if ref else None
        )
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        self.node: str = spec.get("nodeName") or ""
        self.phase: str = status.get("phase") or "Pending"
        self.ready_since: str | None = None
        for condition in status.get("conditions") or ():
            if condition.get("type") == "Ready" and condition.get("status") == "True":
                self.ready_since = condition.get("lastTransitionTime") or ""

    @property
    def active(self) -> bool:
        return self.phase not in ("Succeeded", "Failed") and not self.deleting

    def deletion_rank(self) -> tuple[int, int, int, str]:
        """Sorts the first to delete first (controller.ActivePods' order, in short)."""
        return (
            1 if self.node else 0,
            _PHASE_RANK.get(self.phase, 3),
            0 if self.ready_since is None else 1,
            _negated(self.created),
        )


def _negated(timestamp: str) -> str:
    """A string sorting in the reverse order of RFC 3339 `timestamp` (newest first)."""
    return "".join(chr(0x10FFFF - ord(c)) for c in timestamp)


def available(pod: PodView, min_ready_seconds: int, now: float) -> tuple[bool, float]:
    """Whether the pod is available; if ready but not for long enough, the seconds left."""
    if pod.ready_since is None:
        return False, 0.0
    if min_ready_seconds <= 0:
        return True, 0.0
    since = parse_time(pod.ready_since)
    if since is None:
        return False, 0.0
    left = since.timestamp() + min_ready_seconds - now
    return left <= 0, max(left, 0.0)


async def delete_pod(client: KubeClient, pod: PodView) -> bool:
    """Delete this pod (this UID, not a successor of the same name); False when it was gone
    already, so the caller records no deletion event."""
    try:
        await client.delete(PODS, pod.name, pod.namespace, uid=pod.uid)
    except ApiError as exc:
        if not exc.not_found:
            raise
        return False
    return True


class ReplicaSetController(KeyedController):
    name = "replicaset-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.expectations = Expectations()
        self.replicasets = self.informer(REPLICASETS, ObjectRecord, self._replicaset_changed)
        self.pods = self.informer(PODS, PodView, self._pod_changed)
        self._pods_of: dict[str, set[str]] = {}  # ReplicaSet UID -> keys of pods it controls
        self.pods.add_handlers(self._index, lambda old, new: self._reindex(old, new), self._drop)

    # ------------------------------------------------------------------ event handlers

    def _replicaset_changed(self, record: ObjectRecord) -> None:
        self.queue.add(record.key)

    def _pod_changed(self, pod: PodView) -> None:
        if pod.owner is not None and pod.owner[0] == REPLICASETS.kind:
            self.queue.add(f"{pod.namespace}/{pod.owner[1]}")

    def _index(self, pod: PodView) -> None:
        if pod.owner is not None:
            self._pods_of.setdefault(pod.owner[2], set()).add(pod.key)
            self.expectations.created(f"{pod.namespace}/{pod.owner[1]}")
            if pod.deleting:
                self.expectations.deleted(f"{pod.namespace}/{pod.owner[1]}", pod.key)

    def _reindex(self, old: PodView, new: PodView) -> None:
        if old.owner != new.owner:
            self._drop(old, deleted=False)
            self._index(new)
        elif new.deleting and new.owner is not None:
            self.expectations.deleted(f"{new.namespace}/{new.owner[1]}", new.key)

    def _drop(self, pod: PodView, deleted: bool = True) -> None:
        if pod.owner is None:
            return
        keys = self._pods_of.get(pod.owner[2])
        if keys is not None:
            keys.discard(pod.key)
            if not keys:
                del self._pods_of[pod.owner[2]]
        if deleted:
            self.expectations.deleted(f"{pod.namespace}/{pod.owner[1]}", pod.key)

    # ------------------------------------------------------------------ sync

    def controlled_pods(self, replicaset: dict[str, Any]) -> list[PodView]:
        """The pods that name `replicaset` as their controller and match its selector."""
        selector = label_selector_from_dict((replicaset.get("spec") or {}).get("selector"))
        out = []
        for key in self._pods_of.get(replicaset["metadata"]["uid"], ()):
            pod = self.pods.items.get(key)
            if pod is not None and selector.matches(pod.labels):
                out.append(pod)
        return out

    async def sync(self, key: str) -> None:
        record = self.replicasets.items.get(key)
        if record is None:
            self.expectations.forget(key)
            return
        replicaset = record.obj
        meta, spec = replicaset["metadata"], replicaset.get("spec") or {}
        pods = self.controlled_pods(replicaset)
        active = [p for p in pods if p.active]
        if self.expectations.satisfied(key) and not meta.get("deletionTimestamp"):
            await self._manage(replicaset, active, int(spec.get("replicas", 1)))
        await self._write_status(replicaset, pods, active)

    async def _manage(self, replicaset: dict[str, Any], active: list[PodView], want: int) -> None:
        key = f"{replicaset['metadata']['namespace']}/{replicaset['metadata']['name']}"
        diff = len(active) - want
        if diff < 0:
            count = min(-diff, BURST_REPLICAS)
            self.expectations.expect(key, adds=count)
            results = await asyncio.gather(
                *(self._create_pod(replicaset) for _ in range(count)), return_exceptions=True
            )
            failures = [r for r in results if isinstance(r, BaseException)]
            for _ in failures:
                self.expectations.created(key)  # a failed create will never be seen
            if failures:
                raise failures[0]
        elif diff > 0:
            doomed = sorted(active, key=PodView.deletion_rank)[: min(diff, BURST_REPLICAS)]
            self.expectations.expect(key, deletes={p.key for p in doomed})
            results = await asyncio.gather(
                *(self._delete_pod(replicaset, p) for p in doomed), return_exceptions=True
            )
            failures = [r for r in results if isinstance(r, BaseException)]
            if failures:
                self.expectations.forget(key)
                raise failures[0]

    async def _create_pod(self, replicaset: dict[str, Any]) -> None:
        meta = replicaset["metadata"]
        template = (replicaset.get("spec") or {}).get("template") or {}
        template_meta = template.get("metadata") or {}
        pod_meta: dict[str, Any] = {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": dict(template_meta.get("labels") or {}),
            "ownerReferences": [owner_reference(REPLICASETS, replicaset)],
        }
        for field in ("annotations", "finalizers"):
            if template_meta.get(field):
                pod_meta[field] = template_meta[field]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template["spec"]}
        try:
            pod = await self.create(PODS, body, meta["namespace"])
        except ApiError as exc:
            self.recorder.record(
                _ref(replicaset), WARNING, "FailedCreate", f"Error creating: {exc}"
            )
            raise
        self.recorder.record(
            _ref(replicaset),
            NORMAL,
            "SuccessfulCreate",
            f"Created pod: {pod['metadata']['name']}",
        )

    async def _delete_pod(self, replicaset: dict[str, Any], pod: PodView) -> None:
        if not await delete_pod(self.client, pod):
            self.expectations.deleted(f"{pod.namespace}/{replicaset['metadata']['name']}", pod.key)
            return
        self.recorder.record(
            _ref(replicaset), NORMAL, "SuccessfulDelete", f"Deleted pod: {pod.name}"
        )

    async def _write_status(
        self, replicaset: dict[str, Any], pods: list[PodView], active: list[PodView]
    ) -> None:
        meta, spec = replicaset["metadata"], replicaset.get("spec") or {}
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = time.time()
        ready = available_count = 0
        recheck: float | None = None
        for pod in active:
            ready += pod.ready_since is not None
            is_available, left = available(pod, min_ready, now)
            available_count += is_available
            if left > 0:
                recheck = left if recheck is None else min(recheck, left)
        counts = {
            "fullyLabeledReplicas": sum(
                all(p.labels.get(k) == v for k, v in template_labels.items()) for p in active
            ),
            "readyReplicas": ready,
            "availableReplicas": available_count,
            "observedGeneration": meta.get("generation", 1),
        }
        # As Kubernetes serialises ReplicaSetStatus: `replicas` always, the rest omitted at 0.
        status = {"replicas": len(active), **{k: v for k, v in counts.items() if v}}
        old = replicaset.get("status") or {}
        if {k: old.get(k) for k in _COUNTS if old.get(k)} != {k: v for k, v in status.items() if v}:
            patch = {**dict.fromkeys(counts, None), **status}  # merge patch: null removes
            await self.patch(
                REPLICASETS,
                meta["name"],
                {"status": patch},
                meta["namespace"],
                subresource="status",
            )
        if recheck is not None:  # a pod becomes available once ready for minReadySeconds
            self.queue.add_after(f"{meta['namespace']}/{meta['name']}", recheck + 0.05)


_COUNTS = (
    "replicas",
    "fullyLabeledReplicas",
    "readyReplicas",
    "availableReplicas",
    "observedGeneration",
)


def _ref(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    return {
        "apiVersion": REPLICASETS.api_version,
        "kind": REPLICASETS.kind,
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
