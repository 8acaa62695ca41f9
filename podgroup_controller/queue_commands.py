"""The queue-controller's Command handler: a `bus.volcano.sh/v1alpha1` Command whose target is
a Queue (action OpenQueue or CloseQueue) is deleted first, with its UID as precondition (whoever
deletes it executes it: at most once, even across restarts), announced on the Queue and handed
to the Queue's reconcile as an action. A reconciler of its own on the runtime: failures are
retried with backoff, counted, and given up with a `FailedSync` event on the target Queue."""

from __future__ import annotations

from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef, Reconciler
from core.kube.client import COMMANDS, QUEUES, ApiError, KubeClient
from core.kube.events import NORMAL, WARNING, EventRecorder
from core.records import CommandRecord
from podgroup_controller.queue_state import CLOSE_QUEUE, OPEN_QUEUE
from podgroup_controller.queues import QueueReconciler

QUEUE_COMMAND = "queue-command"
QUEUE_ACTIONS = (OPEN_QUEUE, CLOSE_QUEUE)


def _queue_command(command: CommandRecord) -> str | None:
    target = command.target
    is_queue = target.get("kind") == QUEUES.kind and (
        target.get("apiVersion") in (None, "", QUEUES.api_version)
    )
    return command.key if is_queue else None


class QueueCommandReconciler(Reconciler[str]):
    name = QUEUE_COMMAND

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        queues: QueueReconciler,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.queues = queues

    def setup(self, watch: Builder[str]) -> None:
        self.commands = watch.watch(COMMANDS, CommandRecord, on_add=_queue_command)

    def reference(self, key: str) -> ObjectRef | None:
        """The target Queue: where `kubectl describe` shows a Command that could not run."""
        command = self.commands.items.get(key)
        if command is None:
            return None
        target = command.target
        return self.queues.ref(str(target.get("name") or ""), str(target.get("uid") or ""))

    def describe(self, key: str) -> str:
        return f"command {key}"

    async def reconcile(self, key: str) -> None:
        command = self.commands.items.get(key)
        if command is None:
            return
        try:
            # Deleted first, with its UID as precondition: whoever deletes it executes it.
            await self.client.delete(COMMANDS, command.name, command.namespace, uid=command.uid)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return  # consumed already (or replaced by a new object of the same name)
            raise
        self.metrics.changes.labels("Command", "deleted").inc()
        target = str(command.target.get("name") or "")
        ref = self.queues.ref(target, str(command.target.get("uid") or ""))
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
        self.queues.request(target, command.action)
