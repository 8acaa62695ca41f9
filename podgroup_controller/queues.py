"""The Queue controller (Volcano's `queue-controller`).

- Creates the built-in `root` and `default` queues when they are missing.
- SyncQueue: `spec.parent: root` for a queue without a parent; PodGroups counted per phase
  (metrics); the state machine (`queue_state.transition`) applied to the pending actions and a
  sync, `status.state` written through the status subresource only when it changes; children
  follow their parent (parent Closing/Closed ⇒ open children are annotated
  `volcano.sh/closed-by-parent: "true"` and closed; parent Open ⇒ those are reopened, and the
  annotation becomes "false").
- Commands (`bus.volcano.sh/v1alpha1`, target kind Queue, action OpenQueue/CloseQueue) are
  deleted first, then applied: at most once, even across restarts (`queue_commands`).

The work queue is keyed by queue name, so one queue is never reconciled by two workers at once;
actions wait in `_actions` in arrival order. Each reconcile decides on the informer's copy of
the queue, or the newer one this controller's last write of it returned (`core.controller.fresh`):
a CloseQueue right after an OpenQueue sees the Open it wrote, not the Closed the informer may
still hold.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections import Counter

from core.api import keys
from core.controller.fresh import FreshRecords
from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef, Reconciler
from core.controller.selection import QUEUE
from core.decisions import decision
from core.kube.client import PODGROUPS, QUEUES, ApiError, KubeClient
from core.kube.events import NORMAL, WARNING, EventRecorder
from core.records import PodGroupRecord, QueueRecord
from podgroup_controller.queue_state import (
    CLOSE_QUEUE,
    CLOSING,
    OPEN,
    OPEN_QUEUE,
    SYNC_QUEUE,
    TransitionRefused,
    is_closed,
    normalize,
    transition,
)

log = logging.getLogger("vulcan.controllers.queue")

BUILTIN_QUEUES = (
    # root first: default's parent is root.
    (keys.ROOT_QUEUE, {"weight": 1, "reclaimable": False}),
    (keys.DEFAULT_QUEUE, {"weight": 1, "reclaimable": True}),
)


class QueueReconciler(Reconciler[str]):
    name = QUEUE

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.started = asyncio.Event()  # the built-in queues exist; the loops run
        self._actions: dict[str, list[str]] = {}
        self._groups: dict[str, dict[str, str]] = {}  # queue -> PodGroup key -> phase

    def setup(self, watch: Builder[str]) -> None:
        self.watch = watch
        # The handlers return the queues to sync; `request` queues one with an action.
        self.queues = watch.watch(
            QUEUES,
            QueueRecord,
            on_add=self._queue_added,
            on_update=self._queue_updated,
            on_delete=self._queue_deleted,
        )
        self.fresh = FreshRecords(self.queues)
        self.podgroups = watch.watch(
            PODGROUPS,
            PodGroupRecord,
            on_add=self._group_added,
            on_update=self._group_updated,
            on_delete=self._group_deleted,
        )

    # ------------------------------------------------------------------ requests

    def request(self, queue: str, action: str = SYNC_QUEUE) -> None:
        if action != SYNC_QUEUE:
            pending = self._actions.setdefault(queue, [])
            if not pending or pending[-1] != action:  # the same action twice in a row is once
                pending.append(action)
        self.watch.enqueue(queue)

    # ------------------------------------------------------------------ event handlers

    def _queue_added(self, queue: QueueRecord) -> str:
        return queue.name

    def _queue_updated(self, old: QueueRecord, new: QueueRecord) -> list[str] | None:
        # Our own status and annotation writes come back here too; a sync after them is a
        # no-op, and it catches a Closing queue whose last PodGroup left meanwhile.
        if (old.parent, old.state, old.closed_by_parent) == (
            new.parent,
            new.state,
            new.closed_by_parent,
        ):
            return None
        if old.parent != new.parent and new.parent:
            return [new.name, new.parent]  # its new parent decides whether it must close
        return [new.name]

    def _queue_deleted(self, queue: QueueRecord) -> None:
        self._actions.pop(queue.name, None)
        self.fresh.forget(queue.name)
        self.metrics.forget_queue(queue.name)

    def _group_added(self, group: PodGroupRecord) -> str:
        self._groups.setdefault(group.queue, {})[group.key] = group.phase
        return group.queue

    def _group_updated(self, old: PodGroupRecord, new: PodGroupRecord) -> list[str] | None:
        if (old.queue, old.phase) == (new.queue, new.phase):
            return None
        return [self._group_deleted(old), self._group_added(new)]

    def _group_deleted(self, group: PodGroupRecord) -> str:
        members = self._groups.get(group.queue)
        if members is not None:
            members.pop(group.key, None)
            if not members:
                del self._groups[group.queue]
        return group.queue

    # ------------------------------------------------------------------ the loop

    async def start(self) -> None:
        await self.ensure_builtin_queues()
        self.started.set()

    async def ensure_builtin_queues(self) -> None:
        """`root` and `default`, as Volcano's scheduler creates them at start when missing."""
        for name, spec in BUILTIN_QUEUES:
            if name in self.queues.items:
                continue
            body = {
                "apiVersion": QUEUES.api_version,
                "kind": QUEUES.kind,
                "metadata": {"name": name},
                "spec": spec,
            }
            try:
                await self.client.create(QUEUES, body)
            except ApiError as exc:
                if not exc.conflict:
                    raise
                continue
            self.metrics.changes.labels("Queue", "created").inc()
            log.info("created built-in queue", extra={"queue": name})

    def ref(self, name: str, uid: str = "") -> ObjectRef:
        record = self.queues.items.get(name)
        return {
            "apiVersion": QUEUES.api_version,
            "kind": QUEUES.kind,
            "name": name,
            "uid": uid or (record.uid if record else ""),
        }

    def reference(self, key: str) -> ObjectRef:
        return self.ref(key)

    def given_up(self, key: str, exc: BaseException) -> bool:
        self._actions.pop(key, None)
        return False  # and the runtime's FailedSync

    # ------------------------------------------------------------------ SyncQueue

    def counts(self, queue: str) -> dict[str, int]:
        return dict(Counter(self._groups.get(queue, {}).values()))

    async def reconcile(self, name: str) -> None:
        actions = self._actions.pop(name, [])
        try:
            queue = await self.fresh.get(name)
        except ApiError:
            self._requeue(name, actions)
            raise
        if queue is None:
            if actions:
                log.info("actions for a missing queue dropped", extra={"queue": name})
            return
        # A copy: the sync notes its own writes on it, and the informer's is shared.
        await self._sync(copy.copy(queue), actions)

    def _requeue(self, name: str, actions: list[str]) -> None:
        """Put back actions not applied yet, ahead of any that arrived meanwhile."""
        if actions:
            self._actions[name] = actions + self._actions.get(name, [])

    async def _sync(self, queue: QueueRecord, actions: list[str]) -> None:
        name = queue.name
        counts = self.counts(name)
        self.metrics.set_queue_counts(name, counts)
        refused: tuple[int, TransitionRefused] | None = None
        explicit = actions
        state = queue.state
        try:
            if not queue.parent and name != keys.ROOT_QUEUE:
                self.fresh.wrote(
                    await self.client.patch(QUEUES, name, {"spec": {"parent": keys.ROOT_QUEUE}})
                )
                queue.parent = keys.ROOT_QUEUE
            if not explicit:
                # Recomputed on every sync, so never queued again: a parent the informer
                # showed Open but that has closed since just makes this a no-op.
                actions = await self._follow_parent(queue)
            for index, action in enumerate([*actions, SYNC_QUEUE]):
                if action == CLOSE_QUEUE and name == keys.ROOT_QUEUE:
                    self.recorder.record(
                        self.ref(name, queue.uid),
                        WARNING,
                        "CloseQueueRefused",
                        "the root queue cannot be closed",
                    )
                    continue
                parent_state = await self._parent_state(queue) if action == OPEN_QUEUE else None
                try:
                    state = transition(
                        state,
                        action,
                        has_podgroups=bool(self._groups.get(name)),
                        parent_state=parent_state,
                    )
                except TransitionRefused as exc:
                    refused = (index, exc)
                    break
                if action == OPEN_QUEUE and queue.closed_by_parent == "true":
                    await self._mark_closed_by_parent(name, False)
                    queue.closed_by_parent = "false"
            if state != queue.state:
                await self._write_state(queue, state, sum(counts.values()))
        except ApiError:
            # Nothing decided here is stored: the actions are applied again on the retry.
            self._requeue(name, explicit)
            raise
        await self._propagate(name, state)
        if refused is not None and explicit:
            index, exc = refused
            action = actions[index]
            self._requeue(name, actions[index:])
            self.recorder.record(
                self.ref(name, queue.uid), WARNING, f"{action}Refused", f"{action}: {exc}"
            )
            raise exc

    async def _follow_parent(self, queue: QueueRecord) -> list[str]:
        """The child's side of following its parent: the parent's sync asks its children to
        close or reopen, but may have looked at a child the informer had not caught up with
        (a parent closed and reopened quickly); so each queue also checks its parent itself."""
        parent = self.queues.items.get(queue.parent) if queue.name != keys.ROOT_QUEUE else None
        if parent is None:
            return []
        if is_closed(parent.state) and not is_closed(queue.state):
            if queue.closed_by_parent != "true":
                await self._mark_closed_by_parent(queue.name, True)
                queue.closed_by_parent = "true"
            return [CLOSE_QUEUE]
        if normalize(parent.state) == OPEN and queue.closed_by_parent == "true":
            return [OPEN_QUEUE] if is_closed(queue.state) else []
        return []

    async def _parent_state(self, queue: QueueRecord) -> str | None:
        if not queue.parent or queue.name == keys.ROOT_QUEUE:
            return None
        parent = await self.fresh.get(queue.parent)
        return parent.state if parent is not None else None

    async def _write_state(self, queue: QueueRecord, state: str, groups: int) -> None:
        self.fresh.wrote(
            await self.client.patch(
                QUEUES, queue.name, {"status": {"state": state}}, subresource="status"
            )
        )
        self.metrics.changes.labels("Queue", "state").inc()
        before = normalize(queue.state)
        if before != state:  # writing "Open" over a never-written state is no news
            note = f"queue state {before} -> {state}"
            if state == CLOSING:
                note += f" until its {groups} PodGroups are gone"
            self.recorder.record(self.ref(queue.name, queue.uid), NORMAL, "StateChanged", note)
        if before != state:
            decision("queue state", queue=queue.name, from_state=before, state=state)

    async def _mark_closed_by_parent(self, name: str, closed: bool) -> None:
        value = "true" if closed else "false"
        self.fresh.wrote(
            await self.client.patch(
                QUEUES, name, {"metadata": {"annotations": {keys.CLOSED_BY_PARENT: value}}}
            )
        )

    async def _propagate(self, name: str, state: str) -> None:
        """Children follow a closing parent, and come back with it when it reopens — only those
        it closed (a child closed by its own Command stays closed)."""
        for listed in list(self.queues.items.values()):
            child = await self.fresh.get(listed.name) if listed.parent == name else None
            if child is None or child.parent != name or child.name == name:
                continue
            if is_closed(state) and not is_closed(child.state):
                if child.closed_by_parent != "true":
                    await self._mark_closed_by_parent(child.name, True)
                self.request(child.name, CLOSE_QUEUE)
            elif state == OPEN and child.closed_by_parent == "true" and is_closed(child.state):
                self.request(child.name, OPEN_QUEUE)
