"""kube-controller-manager's DaemonSet controller, as the embedded cluster needs it.

One pod per eligible node. A node is eligible when the template's nodeSelector and required
node affinity match it and its NoSchedule/NoExecute taints are tolerated by the template's
tolerations plus those the DaemonSet controller adds to every daemon pod (not-ready and
unreachable NoExecute; disk-, memory- and pid-pressure and unschedulable NoSchedule; network-
unavailable too for hostNetwork pods): so a cordoned node still runs its daemons, as upstream.
The pod (`generateName: <name>-`, labels `controller-revision-hash` and
`pod-template-generation`) is pinned to its node by a required node affinity on
`metadata.name` and placed by the default scheduler, as since Kubernetes 1.12. Pods on nodes no
longer eligible, extra pods on a node and Failed pods are deleted. A `RollingUpdate` replaces
pods of an older template up to `maxUnavailable` at a time; `OnDelete` waits for the user.
Status: desiredNumberScheduled, currentNumberScheduled, numberMisscheduled, numberReady,
updatedNumberScheduled, numberAvailable, numberUnavailable, observedGeneration.
"""

from __future__ import annotations

import copy
from typing import Any

from core.kube.client import NODES, PODS, ApiError, KubeClient, Resource
from core.kube.events import NORMAL, WARNING
from sim.controllers import pod_template as tpl
from sim.controllers.expectations import Expectations
from sim.controllers.replicaset import PodView, delete_pod
from sim.controllers.runtime import KeyedController, ObjectRecord, owner_reference
from sim.scheduler.framework import SchedNode, SchedPod, node_affinity_matches
from sim.taints import untolerated

DAEMONSETS = Resource("apps", "v1", "daemonsets", True, "DaemonSet")
REVISION_HASH = "controller-revision-hash"
TEMPLATE_GENERATION = "pod-template-generation"

_DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def daemon_pod_spec(template_spec: dict[str, Any]) -> dict[str, Any]:
    """The template's pod spec with the tolerations every daemon pod gets."""
    spec = copy.deepcopy(template_spec)
    tolerations = list(spec.get("tolerations") or ())
    extra = list(_DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        extra.append(_NETWORK_TOLERATION)
    have = {(t.get("key"), t.get("effect")) for t in tolerations}
    tolerations += [t for t in extra if (t["key"], t["effect"]) not in have]
    spec["tolerations"] = tolerations
    return spec


def eligible(spec: dict[str, Any], node: dict[str, Any]) -> bool:
    """Whether a daemon pod with `spec` (daemon tolerations added) should run on `node`."""
    pod = SchedPod({"metadata": {"name": "daemon", "namespace": ""}, "spec": spec})
    target = SchedNode(node)
    if not node_affinity_matches(pod, target):
        return False
    return untolerated(pod.tolerations, target.taints, ("NoSchedule", "NoExecute")) is None


def _pinned(spec: dict[str, Any], node: str) -> dict[str, Any]:
    """The pod spec with its node affinity replaced by `metadata.name In [node]`
    (ReplaceDaemonSetPodNodeNameNodeAffinity)."""
    spec = copy.deepcopy(spec)
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    return spec


class DaemonSetController(KeyedController):
    name = "daemonset-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.sets = self.informer(DAEMONSETS, ObjectRecord, lambda r: self.queue.add(r.key))
        self.nodes = self.informer(NODES, ObjectRecord, self._node_changed)
        self.pods = self.informer(
            PODS, _DaemonPod, self._pod_changed, label_selector=TEMPLATE_GENERATION
        )
        self.expectations = Expectations()
        self.pods.add_handlers(self._seen, lambda _old, _new: None, lambda _pod: None)

    def _seen(self, pod: PodView) -> None:
        if pod.owner is not None and pod.owner[0] == DAEMONSETS.kind:
            self.expectations.created(f"{pod.namespace}/{pod.owner[1]}")

    def _node_changed(self, _record: ObjectRecord) -> None:
        for key in list(self.sets.items):
            self.queue.add(key)

    def _pod_changed(self, pod: PodView) -> None:
        if pod.owner is not None and pod.owner[0] == DAEMONSETS.kind:
            self.queue.add(f"{pod.namespace}/{pod.owner[1]}")

    def _owned(self, ds: dict[str, Any]) -> list[_DaemonPod]:
        meta = ds["metadata"]
        return [
            p
            for p in self.pods.items.values()
            if p.namespace == meta["namespace"]
            and p.owner is not None
            and p.owner[2] == meta["uid"]
        ]

    async def sync(self, key: str) -> None:
        record = self.sets.items.get(key)
        if record is None or record.obj["metadata"].get("deletionTimestamp"):
            return
        ds = record.obj
        spec = daemon_pod_spec(((ds.get("spec") or {}).get("template") or {}).get("spec") or {})
        revision = tpl.template_hash((ds.get("spec") or {}).get("template") or {})
        by_node: dict[str, list[_DaemonPod]] = {}
        for pod in self._owned(ds):
            if pod.phase == "Failed" and not pod.deleting:
                await self._delete(ds, pod)  # replaced by the next sync
                continue
            by_node.setdefault(pod.target, []).append(pod)
        wanted = {
            node.obj["metadata"]["name"]
            for node in self.nodes.items.values()
            if eligible(spec, node.obj)
        }
        missing = sorted(name for name in wanted if not by_node.get(name))
        if missing and self.expectations.satisfied(key):
            self.expectations.expect(key, adds=len(missing))
            for name in missing:
                try:
                    await self._create(ds, spec, name, revision)
                except ApiError:
                    self.expectations.forget(key)
                    raise
        for name, pods in by_node.items():
            live = [p for p in pods if not p.deleting]
            doomed = live if name not in wanted else sorted(live, key=lambda p: p.created)[1:]
            for pod in doomed:
                await self._delete(ds, pod)
        await self._roll(ds, by_node, wanted, revision)
        await self._write_status(ds, by_node, wanted, revision)

    async def _roll(
        self,
        ds: dict[str, Any],
        by_node: dict[str, list[_DaemonPod]],
        wanted: set[str],
        revision: str,
    ) -> None:
        strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        raw = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
        total = len(wanted)
        if isinstance(raw, str) and raw.endswith("%"):
            budget = max(1, int(raw[:-1]) * total // 100) if raw[:-1].isdigit() else 1
        else:
            budget = int(raw) if str(raw).isdigit() else 1
        pods = [p for name in wanted for p in by_node.get(name, ()) if not p.deleting]
        unavailable = total - sum(1 for p in pods if p.ready_since is not None)
        for pod in pods:
            if unavailable >= budget:
                return
            if pod.labels.get(REVISION_HASH) != revision:
                await self._delete(ds, pod)
                unavailable += 1

    async def _create(
        self, ds: dict[str, Any], spec: dict[str, Any], node: str, revision: str
    ) -> None:
        meta = ds["metadata"]
        template_meta = (((ds.get("spec") or {}).get("template")) or {}).get("metadata") or {}
        pod_meta: dict[str, Any] = {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": {
                **(template_meta.get("labels") or {}),
                REVISION_HASH: revision,
                TEMPLATE_GENERATION: str(meta.get("generation", 1)),
            },
            "ownerReferences": [owner_reference(DAEMONSETS, ds)],
        }
        if template_meta.get("annotations"):
            pod_meta["annotations"] = template_meta["annotations"]
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": pod_meta,
            "spec": _pinned(spec, node),
        }
        try:
            pod = await self.create(PODS, body, meta["namespace"])
        except ApiError as exc:
            self.recorder.record(_ref(ds), WARNING, "FailedCreate", f"Error creating: {exc}")
            raise
        self.recorder.record(
            _ref(ds), NORMAL, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}"
        )

    async def _delete(self, ds: dict[str, Any], pod: PodView) -> None:
        if not await delete_pod(self.client, pod):
            return
        self.recorder.record(_ref(ds), NORMAL, "SuccessfulDelete", f"Deleted pod: {pod.name}")

    async def _write_status(
        self,
        ds: dict[str, Any],
        by_node: dict[str, list[_DaemonPod]],
        wanted: set[str],
        revision: str,
    ) -> None:
        meta = ds["metadata"]
        current = ready = updated = 0
        for name in wanted:
            live = [p for p in by_node.get(name, ()) if not p.deleting]
            if not live:
                continue
            current += 1
            pod = live[0]
            ready += pod.ready_since is not None
            updated += pod.labels.get(REVISION_HASH) == revision
        misscheduled = sum(
            1
            for name, pods in by_node.items()
            if name not in wanted and any(not p.deleting for p in pods)
        )
        status = {
            "observedGeneration": meta.get("generation", 1),
            "desiredNumberScheduled": len(wanted),
            "currentNumberScheduled": current,
            "numberMisscheduled": misscheduled,
            "numberReady": ready,
            "updatedNumberScheduled": updated or None,
            "numberAvailable": ready or None,
            "numberUnavailable": (len(wanted) - ready) or None,
        }
        old = ds.get("status") or {}
        if {k: old.get(k) for k in status} != status:
            await self.patch(
                DAEMONSETS,
                meta["name"],
                {"status": status},
                meta["namespace"],
                subresource="status",
            )


class _DaemonPod(PodView):
    """A pod as the DaemonSet controller reads it: the node it is bound or pinned to."""

    __slots__ = ("target",)

    def __init__(self, obj: dict[str, Any]) -> None:
        super().__init__(obj)
        self.target = self.node or _pinned_node(obj)


def _pinned_node(obj: dict[str, Any]) -> str:
    affinity = (((obj.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in affinity.get("nodeSelectorTerms") or ():
        for field in term.get("matchFields") or ():
            if field.get("key") == "metadata.name" and len(field.get("values") or ()) == 1:
                return str(field["values"][0])
    return ""


def _ref(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    return {
        "apiVersion": DAEMONSETS.api_version,
        "kind": DAEMONSETS.kind,
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
