"""The job controller's Command handler: a Command whose target is a Volcano Job is consumed
(`core.controller.commands`), announced on the Job (`CommandIssued`) and handed to the Job's
reconcile as a request."""

from __future__ import annotations

from core.controller.commands import CommandReconciler
from core.controller.metrics import ControllerMetrics
from core.controller.runtime import ObjectRef
from core.kube.client import VCJOBS, KubeClient
from core.kube.events import NORMAL, EventRecorder
from core.records import CommandRecord
from flow_controller.job import state as js
from flow_controller.job.events import JobEvents

JOB_COMMAND = "job-command"


class JobCommandReconciler(CommandReconciler):
    name = JOB_COMMAND
    target = VCJOBS

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        events: JobEvents,
    ) -> None:
        super().__init__(client, recorder, metrics)
        self.events = events

    def target_reference(self, command: CommandRecord) -> ObjectRef:
        job = str(command.target.get("name") or "")
        return VCJOBS.reference(job, command.namespace, str(command.target.get("uid") or ""))

    def execute(self, command: CommandRecord) -> None:
        self.recorder.record(
            self.target_reference(command),
            NORMAL,
            "CommandIssued",
            f"Start to execute command {command.action}",
        )
        job = str(command.target.get("name") or "")
        self.events.request(
            f"{command.namespace}/{job}", js.Request(js.COMMAND_ISSUED, action=command.action)
        )
