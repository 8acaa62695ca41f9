"""The job controller's Command handler: a `bus.volcano.sh/v1alpha1` Command whose target is a
Volcano Job is deleted first (so it runs at most once, even across restarts), announced on the
Job (`CommandIssued`) and handed to the Job's reconcile as a request. A reconciler of its own on
the runtime: failures are retried with backoff, counted, and given up with a `FailedSync` event
on the target Job."""

from __future__ import annotations

from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef, Reconciler
from core.kube.client import COMMANDS, VCJOBS, ApiError, KubeClient
from core.kube.events import NORMAL, EventRecorder
from core.records import CommandRecord
from flow_controller.job import state as js
from flow_controller.job.events import JobEvents

JOB_COMMAND = "job-command"


def _job_command(command: CommandRecord) -> str | None:
    target = command.target
    is_job = target.get("kind") == "Job" and target.get("apiVersion") in (
        None,
        "",
        VCJOBS.api_version,
    )
    return command.key if is_job else None


class JobCommandReconciler(Reconciler[str]):
    name = JOB_COMMAND

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        events: JobEvents,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.events = events

    def setup(self, watch: Builder[str]) -> None:
        self.commands = watch.watch(COMMANDS, CommandRecord, on_add=_job_command)

    def reference(self, key: str) -> ObjectRef | None:
        """The target Job: where `kubectl describe` shows a Command that could not run."""
        command = self.commands.items.get(key)
        if command is None:
            return None
        namespace = key.split("/", 1)[0]
        job = str(command.target.get("name") or "")
        return VCJOBS.reference(job, namespace, str(command.target.get("uid") or ""))

    def describe(self, key: str) -> str:
        return f"command {key}"

    async def reconcile(self, key: str) -> None:
        command = self.commands.items.get(key)
        if command is None:
            return
        namespace, name = key.split("/", 1)
        try:  # deleted first: a Command runs at most once, even across restarts
            await self.client.delete(COMMANDS, name, namespace, uid=command.uid)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return
            raise
        self.metrics.changes.labels("Command", "deleted").inc()
        job = command.target.get("name", "")
        self.recorder.record(
            VCJOBS.reference(job, namespace, command.target.get("uid", "")),
            NORMAL,
            "CommandIssued",
            f"Start to execute command {command.action}",
        )
        self.events.request(
            f"{namespace}/{job}", js.Request(js.COMMAND_ISSUED, action=command.action)
        )
