"""kube-controller-manager's StatefulSet controller, as the embedded cluster needs it.

A StatefulSet's pods have stable names `<name>-<ordinal>` (ordinals from `spec.ordinals.start`,
0 by default), `hostname` and `subdomain` (`serviceName`) set, and the labels
`statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` and
`controller-revision-hash` (`<name>-<hash of the template>`). With `podManagementPolicy:
OrderedReady` (the default) a pod is created only once every lower ordinal is Running and
Ready, scale-down removes the highest ordinal first, one at a time, and any unhealthy pod halts
both; with `Parallel` missing pods are created and surplus ones deleted all at once. A Failed
pod is deleted and made again. A `RollingUpdate` (partition honoured) replaces pods of an older
revision from the highest ordinal down, one at a time, each once the others are Ready;
`OnDelete` waits for the user. Claims of `volumeClaimTemplates` are created as
`<claim>-<name>-<ordinal>` and mounted. Status: replicas, readyReplicas, currentReplicas,
updatedReplicas, availableReplicas, currentRevision, updateRevision, observedGeneration,
collisionCount. ControllerRevision objects are not written (the revision is the label's hash).
"""

from __future__ import annotations

import copy
from typing import Any

from core.kube.client import PODS, ApiError, KubeClient, Resource
from core.kube.events import NORMAL, WARNING
from sim.controllers import pod_template as tpl
from sim.controllers.replicaset import PodView, delete_pod
from sim.controllers.runtime import KeyedController, ObjectRecord, owner_reference

STATEFULSETS = Resource("apps", "v1", "statefulsets", True, "StatefulSet")
CLAIMS = Resource("", "v1", "persistentvolumeclaims", True, "PersistentVolumeClaim")
POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"
REVISION_HASH = "controller-revision-hash"


def revision_of(sts: dict[str, Any]) -> str:
    template = (sts.get("spec") or {}).get("template") or {}
    return f"{sts['metadata']['name']}-{tpl.template_hash(template)}"


def _ordinal(sts_name: str, pod_name: str) -> int | None:
    prefix = f"{sts_name}-"
    tail = pod_name[len(prefix) :] if pod_name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


class StatefulSetController(KeyedController):
    name = "statefulset-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.sets = self.informer(STATEFULSETS, ObjectRecord, lambda r: self.queue.add(r.key))
        self.pods = self.informer(PODS, PodView, self._pod_changed, label_selector=POD_NAME)

    def _pod_changed(self, pod: PodView) -> None:
        if pod.owner is not None and pod.owner[0] == STATEFULSETS.kind:
            self.queue.add(f"{pod.namespace}/{pod.owner[1]}")

    def _owned(self, sts: dict[str, Any]) -> dict[int, PodView]:
        meta = sts["metadata"]
        found: dict[int, PodView] = {}
        for pod in self.pods.items.values():
            if pod.namespace != meta["namespace"] or pod.owner is None:
                continue
            if pod.owner[2] != meta["uid"]:
                continue
            ordinal = _ordinal(meta["name"], pod.name)
            if ordinal is not None:
                found[ordinal] = pod
        return found

    async def sync(self, key: str) -> None:
        record = self.sets.items.get(key)
        if record is None or record.obj["metadata"].get("deletionTimestamp"):
            return
        sts = record.obj
        spec = sts.get("spec") or {}
        pods = self._owned(sts)
        start = int((spec.get("ordinals") or {}).get("start") or 0)
        replicas = int(spec.get("replicas", 1))
        wanted = range(start, start + replicas)
        parallel = spec.get("podManagementPolicy") == "Parallel"
        revision = revision_of(sts)
        await self._step(sts, pods, wanted, parallel, revision)
        await self._write_status(sts, self._owned(sts), revision)

    async def _step(
        self,
        sts: dict[str, Any],
        pods: dict[int, PodView],
        wanted: range,
        parallel: bool,
        revision: str,
    ) -> None:
        # Failed pods are replaced (deleted now, made again by a later sync).
        for _ordinal, pod in sorted(pods.items()):
            if pod.phase == "Failed" and not pod.deleting:
                await self._delete(sts, pod)
                if not parallel:
                    return
        for ordinal in wanted:
            pod = pods.get(ordinal)
            if pod is None:
                await self._create(sts, ordinal, revision)
                if not parallel:
                    return
                continue
            if not parallel and not _healthy(pod):
                return  # OrderedReady: wait for this one before the next
        surplus = sorted((o for o in pods if o not in wanted), reverse=True)
        for ordinal in surplus:
            pod = pods[ordinal]
            if pod.deleting:
                if not parallel:
                    return
                continue
            if not parallel and any(not _healthy(p) for o, p in pods.items() if o != ordinal):
                return
            await self._delete(sts, pod)
            if not parallel:
                return
        await self._roll(sts, pods, wanted, revision)

    async def _roll(
        self, sts: dict[str, Any], pods: dict[int, PodView], wanted: range, revision: str
    ) -> None:
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        current = [pods[o] for o in wanted if o in pods]
        if any(not _healthy(p) for p in current):
            return
        for ordinal in sorted(wanted, reverse=True):
            pod = pods.get(ordinal)
            if ordinal < partition or pod is None:
                continue
            if pod.labels.get(REVISION_HASH) != revision:
                await self._delete(sts, pod)
                return

    async def _create(self, sts: dict[str, Any], ordinal: int, revision: str) -> None:
        meta, spec = sts["metadata"], sts.get("spec") or {}
        name = f"{meta['name']}-{ordinal}"
        template = copy.deepcopy(spec.get("template") or {})
        template_meta = template.get("metadata") or {}
        pod_spec = template.get("spec") or {}
        pod_spec["hostname"] = name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        volumes = [
            v
            for v in pod_spec.get("volumes") or ()
            if v.get("name")
            not in {
                (c.get("metadata") or {}).get("name")
                for c in spec.get("volumeClaimTemplates") or ()
            }
        ]
        for claim in spec.get("volumeClaimTemplates") or ():
            claim_name = (claim.get("metadata") or {}).get("name", "")
            full = f"{claim_name}-{name}"
            await self._ensure_claim(sts, claim, full, ordinal)
            volumes.append({"name": claim_name, "persistentVolumeClaim": {"claimName": full}})
        if volumes:
            pod_spec["volumes"] = volumes
        labels = {
            **(template_meta.get("labels") or {}),
            POD_NAME: name,
            POD_INDEX: str(ordinal),
            REVISION_HASH: revision,
        }
        pod_meta: dict[str, Any] = {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(STATEFULSETS, sts)],
        }
        if template_meta.get("annotations"):
            pod_meta["annotations"] = template_meta["annotations"]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}
        try:
            await self.create(PODS, body, meta["namespace"])
        except ApiError as exc:
            if exc.conflict:
                return  # made by an earlier sync; the informer will show it
            self.recorder.record(
                _ref(sts),
                WARNING,
                "FailedCreate",
                f"create Pod {name} in StatefulSet {meta['name']} failed error: {exc}",
            )
            raise
        self.recorder.record(
            _ref(sts),
            NORMAL,
            "SuccessfulCreate",
            f"create Pod {name} in StatefulSet {meta['name']} successful",
        )

    async def _ensure_claim(
        self, sts: dict[str, Any], claim: dict[str, Any], name: str, ordinal: int
    ) -> None:
        meta = sts["metadata"]
        labels = dict((claim.get("metadata") or {}).get("labels") or {})
        selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": {**labels, **selector},
            },
            "spec": claim.get("spec") or {},
        }
        try:
            await self.create(CLAIMS, body, meta["namespace"])
        except ApiError as exc:
            if not exc.conflict:
                raise
            return
        self.recorder.record(
            _ref(sts),
            NORMAL,
            "SuccessfulCreate",
            f"create Claim {name} Pod {meta['name']}-{ordinal} in StatefulSet {meta['name']} "
            "success",
        )

    async def _delete(self, sts: dict[str, Any], pod: PodView) -> None:
        if not await delete_pod(self.client, pod):
            return
        self.recorder.record(
            _ref(sts),
            NORMAL,
            "SuccessfulDelete",
            f"delete Pod {pod.name} in StatefulSet {sts['metadata']['name']} successful",
        )

    async def _write_status(
        self, sts: dict[str, Any], pods: dict[int, PodView], revision: str
    ) -> None:
        meta = sts["metadata"]
        old = sts.get("status") or {}
        live = [p for p in pods.values() if p.phase not in ("Succeeded", "Failed")]
        ready = sum(1 for p in live if p.ready_since is not None and not p.deleting)
        updated = sum(1 for p in live if p.labels.get(REVISION_HASH) == revision)
        current_revision = old.get("currentRevision") or revision
        current = sum(1 for p in live if p.labels.get(REVISION_HASH) == current_revision)
        replicas = int((sts.get("spec") or {}).get("replicas", 1))
        if updated == replicas and ready == replicas and len(live) == replicas:
            current_revision, current = revision, updated  # the rollout is done
        status = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(live),
            "readyReplicas": ready or None,
            "currentReplicas": current or None,
            "updatedReplicas": updated or None,
            "availableReplicas": ready,
            "currentRevision": current_revision,
            "updateRevision": revision,
            "collisionCount": int(old.get("collisionCount") or 0),
        }
        if {k: old.get(k) for k in status} != status:
            await self.patch(
                STATEFULSETS,
                meta["name"],
                {"status": status},
                meta["namespace"],
                subresource="status",
            )


def _healthy(pod: PodView) -> bool:
    """Running and Ready, not being deleted (isRunningAndReady)."""
    return pod.phase == "Running" and pod.ready_since is not None and not pod.deleting


def _ref(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    return {
        "apiVersion": STATEFULSETS.api_version,
        "kind": STATEFULSETS.kind,
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
