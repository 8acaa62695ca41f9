"""The job controller's primitives: **sync** (the
PodGroup, pods once the PodGroup is past Pending, counts and phase), **kill** (every pod but,
softly, the finished ones; the PodGroup deleted) and **kill one target** (a task's pods, one
partition's, or one pod), each writing the job's status."""

from __future__ import annotations

from typing import Any

from core.api.batch import JobSpec
from core.kube.events import WARNING
from core.kube.slow_start import slow_start_batch
from core.records import PodGroupRecord, PodRecord
from flow_controller.job import objects
from flow_controller.job.events import JobEvents
from flow_controller.job.objects import BindMarker
from flow_controller.job.owned import PluginObjects
from flow_controller.job.partitions import in_partition
from flow_controller.job.plugin_registry import build_plugins
from flow_controller.job.plugins import JobContext, Plugin, PluginFailed
from flow_controller.job.state import FINISHED, KILL, SYNC_JOB, Step, plan_action
from flow_controller.job.status import Tally, job_status, task_ready
from flow_controller.job.writer import JobWriter

_FINISHED_PODS = ("Succeeded", "Failed")


class JobPrimitives:
    def __init__(
        self,
        events: JobEvents,
        writer: JobWriter,
        owned: PluginObjects,
        pod_markers: tuple[str, ...],
        gated_schedulers: frozenset[str] | None = None,
        bind_marker: BindMarker | None = None,
    ) -> None:
        self.events = events
        self.writer = writer
        self.owned = owned
        self.pod_markers = pod_markers
        # The schedulerNames whose pods are created behind the queue-allocation gate (vulcan's
        # scheduler's); None: no pod is gated. With markers every Job pod goes to vulcan's
        # extender through the cluster's own scheduler, whatever its schedulerName.
        self.gated_schedulers = gated_schedulers
        self.bind_marker = bind_marker

    def _gated(self, pod: dict[str, Any]) -> bool:
        if self.gated_schedulers is None:
            return False
        return bool(self.pod_markers) or objects.scheduler_of(pod) in self.gated_schedulers

    def _job_pods(self, job: dict[str, Any]) -> list[PodRecord]:
        return self.events.pods_of(
            job["metadata"]["namespace"], job["metadata"]["name"], job["metadata"].get("uid", "")
        )

    async def sync(self, job: dict[str, Any], spec: JobSpec, step: Step) -> None:
        status = job.get("status") or {}
        if not (status.get("state") or {}).get("phase"):
            job = await self.writer.initiate(job, spec)
            status = job["status"]
        phase = status["state"]["phase"]
        if phase == "Pending" and not await self.writer.ensure_volumes(job, spec):
            return  # a claim is missing, or its name was just written back (a new sync follows)
        group = await self.writer.ensure_podgroup(job, spec)
        ctx, plugins = self.plugins(job, spec)
        await self.owned.ensure(ctx, plugins)
        pods = self._job_pods(job)
        tally = Tally()
        if group is None or group.phase == "Pending":
            if group is not None:
                self._podgroup_pending(job, group)
            for pod in pods:
                if pod.deleting:
                    tally.terminating += 1
                else:
                    tally.count(pod)
        else:
            await self._converge(job, spec, pods, tally, ctx, plugins)
        version = int(status.get("version") or 0)
        retry = int(status.get("retryCount") or 0)
        next_phase = step.next_phase(phase, tally.counts(), spec, retry)
        new = job_status(
            status,
            spec,
            tally,
            phase=next_phase,
            version=version,
            retry_count=retry + (1 if step.retry else 0),
        )
        new["controlledResources"] = {
            **(status.get("controlledResources") or {}),
            **{f"plugin-{p.name}": p.name for p in plugins},
            **{
                f"volume-pvc-{v.volume_claim_name}": v.volume_claim_name
                for v in spec.volumes or ()
                if v.volume_claim_name
            },
        }
        # A sync that finishes the job (every pod done) releases what the job holds at once.
        # Volcano leaves that to the kill its next event runs in the finished phase, so for a
        # moment a Completed job still has its plugins' objects and its PodGroup.
        finished = next_phase in FINISHED and phase not in FINISHED
        if finished:
            await self.release_plugins(job, spec, new)
        await self.writer.write_status(job, status, new)
        if finished:
            await self.writer.delete_podgroup(job)

    def plugins(self, job: dict[str, Any], spec: JobSpec) -> tuple[JobContext, list[Plugin]]:
        meta = job["metadata"]
        ctx = JobContext(meta["name"], meta["namespace"], spec, objects.owner_reference(meta))
        plugins, missing = build_plugins(spec.plugins)
        if missing:
            self.writer.event(job, WARNING, "PluginError", f"plugins not implemented: {missing}")
        return ctx, plugins

    def _podgroup_pending(self, job: dict[str, Any], group: PodGroupRecord) -> None:
        """Volcano's PodGroupPending warning, once per PodGroup version."""
        if self.events.note_pending(group.key, group.rv):
            self.writer.event(
                job,
                WARNING,
                "PodGroupPending",
                f"PodGroup {group.key} is Pending: waiting for admission",
            )

    async def _converge(
        self,
        job: dict[str, Any],
        spec: JobSpec,
        pods: list[PodRecord],
        tally: Tally,
        ctx: JobContext,
        plugins: list[Plugin],
    ) -> None:
        """Create the missing pods (tasks whose dependsOn holds), delete surplus and
        out-of-sync ones, and count the rest."""
        meta = job["metadata"]
        status = job["status"]
        version = int(status.get("version") or 0)
        retry = int(status.get("retryCount") or 0)
        by_name = {pod.name: pod for pod in pods}
        wanted: set[str] = set()
        by_task: dict[str, list[PodRecord]] = {}
        for pod in pods:
            by_task.setdefault(pod.task or "", []).append(pod)
        tasks = {t.name or "": t for t in spec.tasks or ()}
        ready = {n: task_ready(by_task.get(n, ()), t.min_available) for n, t in tasks.items()}
        create: list[dict[str, Any]] = []
        delete: list[PodRecord] = []
        for task_name, task in tasks.items():
            allowed = objects.dependencies_met(task, ready)
            for index in range(task.replicas):
                name = objects.pod_name(meta["name"], task_name, index)
                wanted.add(name)
                pod = by_name.get(name)
                if pod is None:
                    if allowed:
                        body = objects.build_pod(
                            meta, spec, task, index, version=version, retry_count=retry
                        )
                        objects.mount_volumes(body, meta["name"], spec)
                        objects.add_markers(body, self.pod_markers)
                        if self.bind_marker is not None:
                            self.bind_marker.add_to(body)
                        if self._gated(body):
                            objects.add_allocation_gate(body)
                        for plugin in plugins:
                            try:
                                plugin.on_pod_create(body, ctx)
                            except PluginFailed as exc:
                                # Volcano only logs it; the sync fails and is retried.
                                self.writer.event(job, WARNING, "PluginError", str(exc))
                                raise
                        create.append(body)
                elif pod.deleting:
                    tally.terminating += 1
                elif pod.out_of_sync:
                    delete.append(pod)
                else:
                    tally.count(pod)
        delete += [p for p in pods if p.name not in wanted and not p.deleting]
        # In parallel, as Volcano's job controller; in slow-start batches, as Kubernetes'.
        await slow_start_batch(create, lambda body: self.writer.create_pod(job, body))
        gone = await slow_start_batch(delete, lambda pod: self.writer.delete_pod(job, pod))
        tally.terminating += sum(gone)

    async def kill(
        self, job: dict[str, Any], spec: JobSpec, step: Step, target: str | tuple[str, str] | None
    ) -> None:
        """`target`: a task or pod name, or (task, partition id) for RestartPartition."""
        status = job.get("status") or {}
        phase = (status.get("state") or {}).get("phase") or "Pending"
        version = int(status.get("version") or 0)
        retry = int(status.get("retryCount") or 0)
        full = step.primitive == KILL
        # The last retry keeps its finished pods for inspection (Volcano #1651).
        soft = step.soft or (full and retry >= spec.max_retry - 1)
        if step.bump:
            version += 1
        pods = self._job_pods(job)
        if isinstance(target, tuple):
            pods = [p for p in pods if in_partition(p, *target)]
            if not pods:
                # No such partition: Volcano skips the kill (no restart, no retry); the job is
                # synced instead, so its counts include the pod whose event asked for it.
                await self.sync(job, spec, plan_action(phase, SYNC_JOB))
                return
        elif target is not None:
            pods = [p for p in pods if target in (p.task, p.name)]
        tally = Tally()
        doomed: list[PodRecord] = []
        for pod in pods:
            if pod.deleting:
                tally.terminating += 1
            elif soft and pod.phase in _FINISHED_PODS:
                # Kept, and counted: Volcano leaves them out, so a finished job's status
                # reads succeeded 0 after its next sync (#4616); the counts say what exists.
                tally.count(pod)
            else:
                doomed.append(pod)
        gone = await slow_start_batch(doomed, lambda pod: self.writer.delete_pod(job, pod))
        tally.terminating += sum(gone)
        retry_count = retry + (1 if step.retry else 0)
        next_phase = step.next_phase(phase, tally.counts(), spec, retry_count)
        new = job_status(
            status, spec, tally, phase=next_phase, version=version, retry_count=retry_count
        )
        if full:
            await self.release_plugins(job, spec, new)
        await self.writer.write_status(job, status, new, running_duration=True)
        if full:
            await self.writer.delete_podgroup(job)

    async def release_plugins(
        self, job: dict[str, Any], spec: JobSpec, new: dict[str, Any]
    ) -> None:
        """Volcano's OnJobDelete: every plugin drops its objects and its marker (from the
        status about to be written, `new`)."""
        ctx, plugins = self.plugins(job, spec)
        await self.owned.delete(ctx, plugins)
        new["controlledResources"] = {
            k: v
            for k, v in (new.get("controlledResources") or {}).items()
            if not k.startswith("plugin-")
        }
