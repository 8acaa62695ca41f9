"""The queue-controller's Command handler: a Command whose target is a Queue (action OpenQueue
or CloseQueue) is consumed (`core.controller.commands`), announced on the Queue and handed to
the Queue's reconcile as an action."""

from __future__ import annotations

from core.controller.commands import CommandReconciler
from core.controller.metrics import ControllerMetrics
from core.controller.runtime import ObjectRef
from core.kube.client import QUEUES, KubeClient
from core.kube.events import NORMAL, WARNING, EventRecorder
from core.records import CommandRecord
from podgroup_controller.queue_state import CLOSE_QUEUE, OPEN_QUEUE
from podgroup_controller.queues import QueueReconciler

QUEUE_COMMAND = "queue-command"
QUEUE_ACTIONS = (OPEN_QUEUE, CLOSE_QUEUE)


class QueueCommandReconciler(CommandReconciler):
    name = QUEUE_COMMAND
    target = QUEUES

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        queues: QueueReconciler,
    ) -> None:
        super().__init__(client, recorder, metrics)
        self.queues = queues

    def target_reference(self, command: CommandRecord) -> ObjectRef:
        target = command.target
        return self.queues.ref(str(target.get("name") or ""), str(target.get("uid") or ""))

    def execute(self, command: CommandRecord) -> None:
        ref = self.target_reference(command)
        if command.action not in QUEUE_ACTIONS:
            self.recorder.record(
                ref,
                WARNING,
                "UnknownCommand",
                f"command {command.name}: action {command.action!r} is not one of "
                f"{', '.join(QUEUE_ACTIONS)}",
            )
            return
        self.recorder.record(
            ref,
            NORMAL,
            command.action,
            f"Start to execute command {command.name}, and clean it up to make sure executed "
            "not more than once.",
        )
        self.queues.request(str(command.target.get("name") or ""), command.action)
