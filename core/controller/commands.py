"""A controller's Command handler, as Volcano's job- and queue-controllers have one: a
`bus.volcano.sh/v1alpha1` Command whose target is of the controller's kind is deleted first,
with its UID as precondition (whoever deletes it executes it: at most once, even across
restarts), then executed by the controller. A reconciler on the runtime like any other:
failures are retried with backoff, counted, and given up with a `FailedSync` event on the
target (where `kubectl describe` shows a Command that could not run)."""

from __future__ import annotations

from abc import abstractmethod

from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef, Reconciler
from core.kube.client import COMMANDS, ApiError, KubeClient, Resource
from core.kube.events import EventRecorder
from core.records import CommandRecord


class CommandReconciler(Reconciler[str]):
    """Consumes the Commands aimed at `target`'s kind; a subclass says how to execute one."""

    target: Resource  # the kind of object the handler's Commands act on

    def __init__(
        self, client: KubeClient, recorder: EventRecorder, metrics: ControllerMetrics
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics

    def setup(self, watch: Builder[str]) -> None:
        self.commands = watch.watch(COMMANDS, CommandRecord, on_add=self._aimed_here)

    def _aimed_here(self, command: CommandRecord) -> str | None:
        target = command.target
        aimed = target.get("kind") == self.target.kind and target.get("apiVersion") in (
            None,
            "",
            self.target.api_version,
        )
        return command.key if aimed else None

    def reference(self, key: str) -> ObjectRef | None:
        command = self.commands.items.get(key)
        return None if command is None else self.target_reference(command)

    def describe(self, key: str) -> str:
        return f"command {key}"

    async def reconcile(self, key: str) -> None:
        command = self.commands.items.get(key)
        if command is None:
            return
        try:  # deleted first: whoever deletes it executes it
            await self.client.delete(COMMANDS, command.name, command.namespace, uid=command.uid)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return  # consumed already (or replaced by a new object of the same name)
            raise
        self.metrics.changes.labels("Command", "deleted").inc()
        self.execute(command)

    @abstractmethod
    def target_reference(self, command: CommandRecord) -> ObjectRef:
        """The object the Command acts on, for its events."""

    @abstractmethod
    def execute(self, command: CommandRecord) -> None:
        """Announce the consumed Command on its target and hand it to the controller."""
