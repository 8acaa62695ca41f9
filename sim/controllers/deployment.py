"""kube-controller-manager's Deployment controller, as the embedded cluster needs it.

A Deployment runs its pods through ReplicaSets it controls: the *new* ReplicaSet is the one
whose template equals the Deployment's (ignoring `pod-template-hash`); it is created when
missing as `<deployment>-<hash>`, its template and selector carrying the label
`pod-template-hash: <hash>`, with the Deployment's annotations (so
`scheduling.volcano.sh/group-min-member` reaches the ReplicaSet, where Volcano's PodGroup
controller reads it) and `deployment.kubernetes.io/revision`. A paused Deployment is not
scaled. The status (replicas, updatedReplicas, readyReplicas, availableReplicas,
unavailableReplicas, observedGeneration and the Available and Progressing conditions) sums its
ReplicaSets', as `kubectl get deployment` and `kubectl rollout status` read it.

Rollouts: `rollout()` is the strategy's step. `Recreate` scales the old ReplicaSets to 0, then
(their pods gone) the new one up; `RollingUpdate` (the default) grows the new ReplicaSet within
`maxSurge` and shrinks the old ones within `maxUnavailable` (`sim.controllers.rolling`), one
step per sync as ReplicaSet statuses change. Idle old ReplicaSets beyond `revisionHistoryLimit`
are deleted. Scaling during a rollout is not spread proportionally over the ReplicaSets (the
rolling step absorbs it).
"""

from __future__ import annotations

import logging
from typing import Any

from core.kube.client import ApiError, KubeClient, Resource
from core.kube.events import NORMAL
from sim.controllers import pod_template as tpl
from sim.controllers import rolling
from sim.controllers.replicaset import REPLICASETS
from sim.controllers.runtime import (
    KeyedController,
    ObjectRecord,
    controller_ref,
    now_rfc3339,
    owner_reference,
)

log = logging.getLogger("vulcan.sim.controllers.deployment")

DEPLOYMENTS = Resource("apps", "v1", "deployments", True, "Deployment")


def _replicas(obj: dict[str, Any]) -> int:
    """`spec.replicas`, 1 when unset (the API server's default)."""
    replicas = (obj.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def _status(obj: dict[str, Any], field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def _revision(obj: dict[str, Any]) -> int:
    text = (obj["metadata"].get("annotations") or {}).get(tpl.REVISION, "0")
    return int(text) if text.isdigit() else 0


def _percent_or_int(value: Any, total: int, default: str, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent for maxSurge (rounded up) / maxUnavailable."""
    value = default if value is None else value
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%") and text[:-1].isdigit():
        scaled = int(text[:-1]) * total
        return -(-scaled // 100) if round_up else scaled // 100
    return int(text) if text.isdigit() else 0


def max_surge_and_unavailable(deployment: dict[str, Any]) -> tuple[int, int]:
    spec = deployment.get("spec") or {}
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0, 0
    rolling = strategy.get("rollingUpdate") or {}
    replicas = _replicas(deployment)
    surge = _percent_or_int(rolling.get("maxSurge"), replicas, "25%", round_up=True)
    unavailable = _percent_or_int(rolling.get("maxUnavailable"), replicas, "25%", round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # Kubernetes' rule: both zero is not allowed, unavailable becomes 1
    return surge, min(unavailable, replicas)


class DeploymentController(KeyedController):
    name = "deployment-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.deployments = self.informer(DEPLOYMENTS, ObjectRecord, self._deployment_changed)
        self.replicasets = self.informer(REPLICASETS, ObjectRecord, self._replicaset_changed)

    def _deployment_changed(self, record: ObjectRecord) -> None:
        self.queue.add(record.key)

    def _replicaset_changed(self, record: ObjectRecord) -> None:
        ref = controller_ref(record.obj)
        if ref is not None and ref.get("kind") == DEPLOYMENTS.kind:
            self.queue.add(f"{record.obj['metadata']['namespace']}/{ref['name']}")

    def owned_replicasets(self, deployment: dict[str, Any]) -> list[dict[str, Any]]:
        meta = deployment["metadata"]
        return [
            r.obj
            for r in self.replicasets.items.values()
            if r.obj["metadata"].get("namespace") == meta["namespace"]
            and (controller_ref(r.obj) or {}).get("uid") == meta["uid"]
        ]

    # ------------------------------------------------------------------ sync

    async def sync(self, key: str) -> None:
        record = self.deployments.items.get(key)
        if record is None or record.obj["metadata"].get("deletionTimestamp"):
            return  # the garbage collector removes its ReplicaSets
        deployment = record.obj
        owned = self.owned_replicasets(deployment)
        template = (deployment.get("spec") or {}).get("template") or {}
        new = next(
            (r for r in owned if tpl.equal_ignoring_hash(r["spec"]["template"], template)), None
        )
        old = [r for r in owned if r is not new]
        if not (deployment.get("spec") or {}).get("paused"):
            new = await self.rollout(deployment, new, old)
        await self._write_status(deployment, new, [r for r in owned if r is not new])

    async def rollout(
        self, deployment: dict[str, Any], new: dict[str, Any] | None, old: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """One step of the Deployment's strategy towards `spec.replicas` pods of its template."""
        strategy = ((deployment.get("spec") or {}).get("strategy") or {}).get("type")
        if strategy == "Recreate":
            return await self._recreate(deployment, new, old)
        return await self._rolling(deployment, new, old)

    async def _recreate(
        self, deployment: dict[str, Any], new: dict[str, Any] | None, old: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """Recreate: old ReplicaSets to zero, and once their pods are gone, the new one
        created or scaled to size."""
        for replicaset in old:
            if _replicas(replicaset):
                await self._scale(deployment, replicaset, 0)
        if any(_status(r, "replicas") for r in old):
            return new  # wait for the old pods to go (their ReplicaSets' updates requeue us)
        want = _replicas(deployment)
        if new is None:
            return await self._create_new(deployment, old, want)
        await self._sync_annotations(deployment, new)
        if _replicas(new) != want:
            await self._scale(deployment, new, want)
        return new

    async def _rolling(
        self, deployment: dict[str, Any], new: dict[str, Any] | None, old: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """RollingUpdate: the new ReplicaSet up within maxSurge, old ones down within
        maxUnavailable (`sim.controllers.rolling`); a plain scale is the same step."""
        want = _replicas(deployment)
        surge, unavailable = max_surge_and_unavailable(deployment)
        old_counts = [_counts(r) for r in old]
        if new is None:
            start = rolling.new_replicas(want, surge, old_counts, rolling.Counts("", 0, 0))
            new = await self._create_new(deployment, old, start)
        else:
            await self._sync_annotations(deployment, new)
            target = rolling.new_replicas(want, surge, [_counts(new), *old_counts], _counts(new))
            if not old_counts or all(c.replicas == 0 for c in old_counts):
                target = want  # no rollout under way: a plain scale
            if target != _replicas(new):
                await self._scale(deployment, new, target)
                new = {**new, "spec": {**new["spec"], "replicas": target}}
        plan = rolling.scale_down_old(want, unavailable, _counts(new), old_counts)
        for replicaset in old:
            name = replicaset["metadata"]["name"]
            if name in plan:
                await self._scale(deployment, replicaset, plan[name])
        await self._clean_history(deployment, old)
        return new

    async def _clean_history(self, deployment: dict[str, Any], old: list[dict[str, Any]]) -> None:
        """Old ReplicaSets beyond `revisionHistoryLimit` (10 by default) that run no pods are
        deleted, oldest revision first."""
        limit = int((deployment.get("spec") or {}).get("revisionHistoryLimit", 10))
        idle = [r for r in old if _replicas(r) == 0 and _status(r, "replicas") == 0]
        idle.sort(key=_revision)
        for replicaset in idle[: max(0, len(idle) - limit)]:
            meta = replicaset["metadata"]
            try:
                await self.client.delete(REPLICASETS, meta["name"], meta["namespace"])
            except ApiError as exc:
                if not exc.not_found:
                    raise

    async def _create_new(
        self, deployment: dict[str, Any], old: list[dict[str, Any]], replicas: int
    ) -> dict[str, Any]:
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        collisions = (deployment.get("status") or {}).get("collisionCount")
        hash_ = tpl.template_hash(spec.get("template") or {}, collisions)
        selector = dict(spec.get("selector") or {})
        selector["matchLabels"] = {
            **(selector.get("matchLabels") or {}),
            tpl.POD_TEMPLATE_HASH: hash_,
        }
        revision = max((_revision(r) for r in old), default=0) + 1
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{hash_}",
                "namespace": meta["namespace"],
                "labels": {
                    **((spec.get("template") or {}).get("metadata") or {}).get("labels", {}),
                    tpl.POD_TEMPLATE_HASH: hash_,
                },
                "annotations": self._annotations(deployment, revision),
                "ownerReferences": [owner_reference(DEPLOYMENTS, deployment)],
            },
            "spec": {
                "replicas": replicas,
                "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                "selector": selector,
                "template": tpl.with_hash(spec.get("template") or {}, hash_),
            },
        }
        try:
            created = await self.create(REPLICASETS, body, meta["namespace"])
        except ApiError as exc:
            if not exc.conflict:
                raise
            # Already there: ours from a sync whose result the informer has not shown yet, or a
            # hash collision (another template's ReplicaSet): then count it and try another name.
            existing = await self.client.get(
                REPLICASETS, body["metadata"]["name"], meta["namespace"]
            )
            if (controller_ref(existing) or {}).get("uid") == meta[
                "uid"
            ] and tpl.equal_ignoring_hash(existing["spec"]["template"], spec.get("template") or {}):
                return existing
            await self.patch(
                DEPLOYMENTS,
                meta["name"],
                {"status": {"collisionCount": int(collisions or 0) + 1}},
                meta["namespace"],
                subresource="status",
            )
            raise
        self.recorder.record(
            _ref(deployment),
            NORMAL,
            "ScalingReplicaSet",
            f"Scaled up replica set {body['metadata']['name']} from 0 to {replicas}",
        )
        await self._set_revision(deployment, revision)
        return created

    def _annotations(self, deployment: dict[str, Any], revision: int) -> dict[str, str]:
        surge, _ = max_surge_and_unavailable(deployment)
        replicas = _replicas(deployment)
        return {
            **tpl.inherited_annotations(deployment["metadata"].get("annotations") or {}),
            tpl.REVISION: str(revision),
            tpl.DESIRED_REPLICAS: str(replicas),
            tpl.MAX_REPLICAS: str(replicas + surge),
        }

    async def _sync_annotations(self, deployment: dict[str, Any], new: dict[str, Any]) -> None:
        """The new ReplicaSet follows the Deployment's annotations (a changed
        `group-min-member` reaches it) and its revision shows on the Deployment."""
        want = self._annotations(deployment, _revision(new) or 1)
        have = new["metadata"].get("annotations") or {}
        if have != want:
            patch = {**dict.fromkeys(set(have) - set(want)), **want}
            await self.patch(
                REPLICASETS,
                new["metadata"]["name"],
                {"metadata": {"annotations": patch}},
                new["metadata"]["namespace"],
            )
        await self._set_revision(deployment, _revision(new) or 1)

    async def _set_revision(self, deployment: dict[str, Any], revision: int) -> None:
        if _revision(deployment) != revision:
            meta = deployment["metadata"]
            await self.patch(
                DEPLOYMENTS,
                meta["name"],
                {"metadata": {"annotations": {tpl.REVISION: str(revision)}}},
                meta["namespace"],
            )

    async def _scale(
        self, deployment: dict[str, Any], replicaset: dict[str, Any], replicas: int
    ) -> None:
        meta = replicaset["metadata"]
        before = _replicas(replicaset)
        surge, _ = max_surge_and_unavailable(deployment)
        want = _replicas(deployment)
        await self.patch(
            REPLICASETS,
            meta["name"],
            {
                "metadata": {
                    "annotations": {
                        tpl.DESIRED_REPLICAS: str(want),
                        tpl.MAX_REPLICAS: str(want + surge),
                    }
                },
                "spec": {"replicas": replicas},
            },
            meta["namespace"],
        )
        direction = "up" if replicas > before else "down"
        self.recorder.record(
            _ref(deployment),
            NORMAL,
            "ScalingReplicaSet",
            f"Scaled {direction} replica set {meta['name']} from {before} to {replicas}",
        )

    # ------------------------------------------------------------------ status

    async def _write_status(
        self,
        deployment: dict[str, Any],
        new: dict[str, Any] | None,
        old: list[dict[str, Any]],
    ) -> None:
        meta = deployment["metadata"]
        every = ([new] if new is not None else []) + old
        want = _replicas(deployment)
        available = sum(_status(r, "availableReplicas") for r in every)
        counts = {
            "replicas": sum(_status(r, "replicas") for r in every),
            "updatedReplicas": _status(new, "replicas") if new is not None else 0,
            "readyReplicas": sum(_status(r, "readyReplicas") for r in every),
            "availableReplicas": available,
            "unavailableReplicas": max(0, want - available),
        }
        _, max_unavailable = max_surge_and_unavailable(deployment)
        old_status = deployment.get("status") or {}
        conditions = _conditions(
            old_status.get("conditions") or [],
            available >= want - max_unavailable,
            new,
            complete=counts["updatedReplicas"] == want
            and counts["replicas"] == want
            and available == want,
        )
        status: dict[str, Any] = {
            "observedGeneration": meta.get("generation", 1),
            **{k: v for k, v in counts.items() if v},
            "conditions": conditions,
        }
        if "collisionCount" in old_status:
            status["collisionCount"] = old_status["collisionCount"]
        if status != old_status:
            patch = {**dict.fromkeys(counts, None), **status}  # merge patch: null removes a count
            await self.patch(
                DEPLOYMENTS,
                meta["name"],
                {"status": patch},
                meta["namespace"],
                subresource="status",
            )


def _conditions(
    old: list[dict[str, Any]], is_available: bool, new: dict[str, Any] | None, *, complete: bool
) -> list[dict[str, Any]]:
    """Available (MinimumReplicasAvailable / MinimumReplicasUnavailable) and Progressing
    (NewReplicaSetAvailable once complete, else ReplicaSetUpdated), each keeping its
    lastTransitionTime while its status does not change."""
    name = new["metadata"]["name"] if new is not None else ""
    wanted = [
        (
            "Available",
            "True" if is_available else "False",
            "MinimumReplicasAvailable" if is_available else "MinimumReplicasUnavailable",
            "Deployment has minimum availability."
            if is_available
            else "Deployment does not have minimum availability.",
        ),
        (
            "Progressing",
            "True",
            "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
            f'ReplicaSet "{name}" has successfully progressed.'
            if complete
            else f'ReplicaSet "{name}" is progressing.',
        ),
    ]
    by_type = {c.get("type"): c for c in old}
    now = now_rfc3339()
    out = []
    for type_, status, reason, message in wanted:
        before = by_type.get(type_) or {}
        same = before.get("status") == status
        unchanged = same and before.get("reason") == reason and before.get("message") == message
        out.append(
            {
                "type": type_,
                "status": status,
                "lastUpdateTime": before.get("lastUpdateTime", now) if unchanged else now,
                "lastTransitionTime": before.get("lastTransitionTime", now) if same else now,
                "reason": reason,
                "message": message,
            }
        )
    return out


def _counts(replicaset: dict[str, Any]) -> rolling.Counts:
    meta = replicaset["metadata"]
    return rolling.Counts(
        meta["name"],
        _replicas(replicaset),
        _status(replicaset, "availableReplicas"),
        meta.get("creationTimestamp") or "",
    )


def _ref(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    return {
        "apiVersion": DEPLOYMENTS.api_version,
        "kind": DEPLOYMENTS.kind,
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
