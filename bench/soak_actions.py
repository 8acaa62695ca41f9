"""The soak's hands: carries out the workload's actions on the API server as a user would
(creates, deletes, vcctl's Commands, `kubectl annotate node`), and remembers every object it
submitted and every one it deleted, so the end can account for each."""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.soak_topology import hypernodes
from bench.soak_workload import NAMESPACE, Action
from core.kube.client import (
    COMMANDS,
    HYPERNODES,
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    VCJOBS,
    ApiError,
    KubeClient,
    Resource,
)
from sim.kubelet.keys import NODE_STATE_FAILED, NODE_STATE_READY, SIM_NODE_STATE
from vcctl.bus import command_for

log = logging.getLogger("vulcan.soak")

DEPLOYMENTS = Resource("apps", "v1", "deployments", True, "Deployment")
KINDS: dict[str, Resource] = {
    "Deployment": DEPLOYMENTS,
    "Job": VCJOBS,
    "PodGroup": PODGROUPS,
    "Pod": PODS,
    "Queue": QUEUES,
    "PriorityClass": PRIORITY_CLASSES,
}


@dataclass(slots=True)
class Submitted:
    kind: str  # Job | PodGroup | Pod
    key: str  # namespace/name
    uid: str = ""
    group: str = ""  # for a pod of a bare gang: its PodGroup's key
    rejected: str = ""  # the API server's refusal, if any
    deleted: bool = False  # by the soak
    cleaned: str = ""  # how it had ended when the soak removed it (a finished gang or pod)


@dataclass
class Actor:
    client: KubeClient
    seed: int
    submitted: dict[tuple[str, str], Submitted] = field(default_factory=dict)
    deleted_pods: set[str] = field(default_factory=set)  # uids of pods the soak deleted
    counts: Counter[str] = field(default_factory=Counter)
    node_names: list[str] = field(default_factory=list)
    _rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        # Which member a delete-member picks is reproducible too.
        self._rng = random.Random(self.seed * 7919 + 1)

    async def run(self, action: Action) -> None:
        try:
            await getattr(self, "_" + action.kind.replace("-", "_"))(action)
        except ApiError as exc:
            # A disruption aimed at something already gone is not a failure of the soak.
            self.counts[
                f"{action.kind} (target gone)" if exc.not_found else f"{action.kind} failed"
            ] += 1
            if not exc.not_found:
                log.warning("soak action %s %s failed: %s", action.kind, action.name, exc)

    # ------------------------------------------------------------------ submissions

    async def _setup(self, action: Action) -> None:
        try:
            await self.client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        except ApiError as exc:
            if not exc.conflict:
                raise
        for obj in action.objects:
            try:
                await self.client.create(KINDS[obj["kind"]], obj)
            except ApiError as exc:
                if not exc.conflict:
                    raise
        nodes = await self.client.list(NODES)
        self.node_names = sorted(n["metadata"]["name"] for n in nodes["items"])
        self.counts["queues"] = sum(1 for o in action.objects if o["kind"] == "Queue")

    async def _hypernodes(self, _action: Action) -> None:
        """The HyperNode tree over the nodes the setup found (`bench.soak_topology`)."""
        tree = hypernodes(self.node_names)
        for obj in tree:
            try:
                await self.client.create(HYPERNODES, obj)
            except ApiError as exc:
                if not exc.conflict:
                    raise
        self.counts["hypernodes"] = len(tree)

    async def _submit(self, obj: dict[str, Any], group: str = "") -> None:
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        record = Submitted(obj["kind"], key, group=group)
        self.submitted[(obj["kind"], key)] = record
        try:
            created = await self.client.create(KINDS[obj["kind"]], obj)
            record.uid = created["metadata"].get("uid", "")
        except ApiError as exc:
            record.rejected = f"{exc.status} {exc.reason}: {exc.message}"

    async def _job(self, action: Action) -> None:
        await self._submit(action.objects[0])
        self.counts["jobs submitted"] += 1

    async def _gang(self, action: Action) -> None:
        group, *pods = action.objects
        await self._submit(group)
        for pod in pods:
            await self._submit(pod, group=action.name)
        self.counts["gangs submitted"] += 1

    async def _pod(self, action: Action) -> None:
        await self._submit(action.objects[0])
        self.counts["plain pods submitted"] += 1

    async def clean_up(self, finished_gangs: set[str], finished_pods: dict[str, str]) -> None:
        """Removes finished bare gangs and plain pods (`finished_pods`: key -> phase), as a
        user cleans up, so that a long soak does not pile them up (jobs have a TTL)."""
        for (kind, key), record in list(self.submitted.items()):
            if record.deleted or record.cleaned or record.rejected:
                continue
            # Marked cleaned before the deletes go out: the soak's end cancels this mid-way,
            # and a pod deleted but not marked would read as lost.
            if kind == "PodGroup" and key in finished_gangs:
                marked = [o for o in self.submitted.values() if o.key == key or o.group == key]
                for other in marked:
                    other.cleaned = finished_pods.get(other.key, "Completed")
                delete = self._remove_gang(key)
                counted = "finished gangs cleaned up"
            elif kind == "Pod" and not record.group and key in finished_pods:
                marked = [record]
                record.cleaned = finished_pods[key]
                self.deleted_pods.add(record.uid)
                ns, name = key.split("/")
                delete = self.client.delete(PODS, name, ns)
                counted = "finished plain pods cleaned up"
            else:
                continue
            try:
                await delete
                self.counts[counted] += 1
            except ApiError as exc:
                if not exc.not_found:
                    for other in marked:
                        other.cleaned = ""
                    log.warning("soak clean-up of %s %s failed: %s", kind, key, exc)

    async def _deployment(self, action: Action) -> None:
        await self._submit(action.objects[0])
        self.counts["deployments submitted"] += 1

    async def _delete_deployment(self, action: Action) -> None:
        ns, name = action.name.split("/")
        record = self.submitted.get(("Deployment", action.name))
        if record is not None:
            record.deleted = True
        await self.client.delete(DEPLOYMENTS, name, ns, propagation="Background")
        self.counts["deployments deleted"] += 1

    async def deployment_states(self) -> dict[str, str]:
        """Each submitted Deployment still there: `ready R/N` from its status."""
        states: dict[str, str] = {}
        for (kind, key), record in self.submitted.items():
            if kind != "Deployment" or record.deleted or record.rejected:
                continue
            ns, name = key.split("/")
            try:
                obj = await self.client.get(DEPLOYMENTS, name, ns)
            except ApiError as exc:
                if exc.not_found:
                    continue
                raise
            status = obj.get("status") or {}
            wanted = (obj.get("spec") or {}).get("replicas", 1)
            states[key] = f"ready {status.get('readyReplicas', 0)}/{wanted}"
        return states

    # ------------------------------------------------------------------ disruptions

    async def _delete_job(self, action: Action) -> None:
        ns, name = action.name.split("/")
        record = self.submitted.get(("Job", action.name))
        if record is not None:
            record.deleted = True
        for pod in (await self.client.list(PODS, ns, labelSelector=f"volcano.sh/job-name={name}"))[
            "items"
        ]:
            self.deleted_pods.add(pod["metadata"]["uid"])
        await self.client.delete(VCJOBS, name, ns, propagation="Background")
        self.counts["jobs deleted"] += 1

    async def _delete_gang(self, action: Action) -> None:
        for (kind, key), record in self.submitted.items():
            if record.cleaned:
                continue
            if (kind == "PodGroup" and key == action.name) or record.group == action.name:
                record.deleted = True
        await self._remove_gang(action.name)
        self.counts["gangs deleted"] += 1

    async def _remove_gang(self, gang: str) -> None:
        ns, name = gang.split("/")
        for pod in (await self.client.list(PODS, ns, labelSelector=f"soak-gang={name}"))["items"]:
            self.deleted_pods.add(pod["metadata"]["uid"])
            try:
                await self.client.delete(PODS, pod["metadata"]["name"], ns)
            except ApiError as exc:
                if not exc.not_found:
                    raise
        await self.client.delete(PODGROUPS, name, ns)

    async def _delete_member(self, action: Action) -> None:
        """One bound member of a job deleted by hand (`kubectl delete pod`)."""
        ns, name = action.name.split("/")
        pods = (await self.client.list(PODS, ns, labelSelector=f"volcano.sh/job-name={name}"))[
            "items"
        ]
        bound = sorted(
            (
                p
                for p in pods
                if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
            ),
            key=lambda p: p["metadata"]["name"],
        )
        if not bound:
            self.counts["delete-member (none bound)"] += 1
            return
        victim = self._rng.choice(bound)
        self.deleted_pods.add(victim["metadata"]["uid"])
        await self.client.delete(PODS, victim["metadata"]["name"], ns)
        self.counts["members deleted"] += 1

    async def _command(self, action: Action, verb: str) -> None:
        ns, name = action.name.split("/")
        job = await self.client.get(VCJOBS, name, ns)
        await self.client.create(COMMANDS, command_for(job, VCJOBS, verb), ns)

    async def _suspend(self, action: Action) -> None:
        await self._command(action, "AbortJob")
        self.counts["suspends"] += 1

    async def _resume(self, action: Action) -> None:
        await self._command(action, "ResumeJob")
        self.counts["resumes"] += 1

    async def _node_fail(self, action: Action) -> None:
        await self._annotate_node(action, NODE_STATE_FAILED)
        self.counts["node failures"] += 1

    async def _node_recover(self, action: Action) -> None:
        await self._annotate_node(action, NODE_STATE_READY)
        self.counts["node recoveries"] += 1

    async def _annotate_node(self, action: Action, state: str) -> None:
        name = self.node_names[int(action.name) % len(self.node_names)]
        patch = {"metadata": {"annotations": {SIM_NODE_STATE: state}}}
        await self.client.patch(NODES, name, patch)
        log.info("node %s annotated %s=%s", name, SIM_NODE_STATE, state)
