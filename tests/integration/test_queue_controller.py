"""The Queue controller against the embedded API server: built-in queues, the Open/Closing/Closed
state machine driven by Commands, at-most-once Commands, parents closing their children,
the refusals (closing root, opening under a closed parent), and the per-queue metrics."""

from __future__ import annotations

import itertools
from typing import Any

from core.controller.manager import ControllerManager
from core.controller.selection import QUEUE
from core.kube.client import COMMANDS, PODGROUPS, QUEUES, KubeClient
from tests.integration.controller_harness import events_about, eventually, get_or_none, running

CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"
_names = itertools.count()


async def make_queue(client: KubeClient, name: str, parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": 1}
    if parent:
        spec["parent"] = parent
    return await client.create(
        QUEUES,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": spec,
        },
    )


async def command(client: KubeClient, queue: dict[str, Any], action: str) -> str:
    """What `vcctl queue operate` creates: a Command in `default` targeting the queue."""
    name = f"{queue['metadata']['name']}-{action.lower()}-{next(_names)}"
    target = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": queue["metadata"]["name"],
        "uid": queue["metadata"]["uid"],
        "controller": True,
    }
    await client.create(
        COMMANDS,
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [target]},
            "action": action,
            "target": target,
        },
    )
    return name


async def make_group(client: KubeClient, name: str, queue: str, phase: str = "Pending") -> None:
    await client.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": 1, "queue": queue},
            "status": {"phase": phase},
        },
    )


async def queue_in(client: KubeClient, name: str, state: str) -> Any:
    queue = await get_or_none(client, QUEUES, name)
    return queue if queue and (queue.get("status") or {}).get("state") == state else None


async def state_of(client: KubeClient, name: str) -> str:
    return ((await client.get(QUEUES, name)).get("status") or {}).get("state", "")


async def command_gone(client: KubeClient, name: str) -> bool:
    return await get_or_none(client, COMMANDS, name, "default") is None


async def reasons(client: KubeClient, queue: str) -> list[str]:
    # Events about cluster-scoped objects live in `default`.
    return [e["reason"] for e in await events_about(client, queue)]


def gauge(manager: ControllerManager, phase: str, queue: str) -> float:
    value = manager.metrics.registry.get_sample_value(
        f"volcano_queue_pod_group_{phase}_count", {"queue_name": queue}
    )
    return -1.0 if value is None else value


async def test_builtin_queues_are_created_open_and_default_is_under_root() -> None:
    async with running([QUEUE]) as (client, controllers):
        root = await eventually(lambda: queue_in(client, "root", "Open"))
        default = await eventually(lambda: queue_in(client, "default", "Open"))
        assert root["spec"]["reclaimable"] is False and root["spec"]["weight"] == 1
        assert not root["spec"].get("parent")
        assert default["spec"]["reclaimable"] is True
        assert (await eventually(lambda: _parent(client, "default"))) == "root"
        # A restarted controller finds them and creates nothing.
        manager = await controllers.restart()
        await manager.controllers[QUEUE].main.reconciler.started.wait()
        await eventually(lambda: _idle(manager))
        assert (
            manager.metrics.registry.get_sample_value(
                "vulcan_controller_object_changes_total", {"kind": "Queue", "operation": "created"}
            )
            is None
        )


async def _parent(client: KubeClient, name: str) -> str:
    return (await client.get(QUEUES, name))["spec"].get("parent", "")


async def _idle(manager: ControllerManager) -> bool:
    controller = manager.controllers[QUEUE].main
    started = controller.reconciler.started.is_set()
    return started and not (len(controller.queue) or controller.queue.in_flight)


async def test_close_waits_for_the_podgroups_then_open() -> None:
    async with running([QUEUE]) as (client, controllers):
        q = await make_queue(client, "team")
        await eventually(lambda: queue_in(client, "team", "Open"))
        assert await _parent(client, "team") == "root"
        await make_group(client, "job-a", "team", phase="Running")
        manager = controllers.manager
        assert manager is not None
        await eventually(lambda: _gauge_is(manager, "running", "team", 1.0))
        closing = await command(client, q, "CloseQueue")
        await eventually(lambda: queue_in(client, "team", "Closing"))
        assert await command_gone(client, closing)
        # Closing for as long as a PodGroup is left, whatever its phase.
        await client.patch(PODGROUPS, "job-a", {"status": {"phase": "Completed"}}, "default")
        await eventually(lambda: _gauge_is(manager, "completed", "team", 1.0))
        assert await state_of(client, "team") == "Closing"
        await client.delete(PODGROUPS, "job-a", "default")
        await eventually(lambda: queue_in(client, "team", "Closed"))
        assert gauge(manager, "completed", "team") == 0.0
        opening = await command(client, q, "OpenQueue")
        await eventually(lambda: queue_in(client, "team", "Open"))
        assert await command_gone(client, opening)
        got = await eventually(lambda: _has_reasons(client, "team", {"CloseQueue", "OpenQueue"}))
        assert {"StateChanged"} <= set(got)


async def _gauge_is(manager: ControllerManager, phase: str, queue: str, value: float) -> bool:
    return gauge(manager, phase, queue) == value


async def _has_reasons(client: KubeClient, queue: str, wanted: set[str]) -> list[str] | None:
    got = await reasons(client, queue)
    return got if wanted <= set(got) else None


async def test_close_without_podgroups_closes_at_once() -> None:
    async with running([QUEUE]) as (client, _):
        q = await make_queue(client, "empty")
        await eventually(lambda: queue_in(client, "empty", "Open"))
        await command(client, q, "CloseQueue")
        await eventually(lambda: queue_in(client, "empty", "Closed"))


async def test_commands_are_consumed_once_even_across_a_restart() -> None:
    async with running([QUEUE]) as (client, controllers):
        q = await make_queue(client, "once")
        await eventually(lambda: queue_in(client, "once", "Open"))
        name = await command(client, q, "CloseQueue")
        await eventually(lambda: queue_in(client, "once", "Closed"))
        assert await command_gone(client, name)
        # Reopened by other means; a restarted controller must not close it again.
        await client.patch(QUEUES, "once", {"status": {"state": "Open"}}, subresource="status")
        manager = await controllers.restart()
        await eventually(lambda: _idle(manager))
        assert await state_of(client, "once") == "Open"
        assert (await reasons(client, "once")).count("CloseQueue") == 1
        # A Command left over while no controller ran is executed by the next one.
        await controllers.stop()
        late = await command(client, q, "CloseQueue")
        await controllers.start()
        await eventually(lambda: queue_in(client, "once", "Closed"))
        assert await command_gone(client, late)


async def test_parent_close_propagates_and_reopen_restores_only_its_own() -> None:
    async with running([QUEUE]) as (client, _):
        parent = await make_queue(client, "org")
        await make_queue(client, "org-a", parent="org")
        b = await make_queue(client, "org-b", parent="org")
        await make_queue(client, "org-a-x", parent="org-a")  # a grandchild
        for name in ("org", "org-a", "org-b", "org-a-x"):
            await eventually(lambda name=name: queue_in(client, name, "Open"))
        await command(client, b, "CloseQueue")  # closed by its own Command
        await eventually(lambda: queue_in(client, "org-b", "Closed"))
        await command(client, parent, "CloseQueue")
        for name in ("org", "org-a", "org-a-x"):
            closed = await eventually(lambda name=name: queue_in(client, name, "Closed"))
            if name != "org":
                assert closed["metadata"]["annotations"][CLOSED_BY_PARENT] == "true"
        b_now = await client.get(QUEUES, "org-b")
        assert CLOSED_BY_PARENT not in (b_now["metadata"].get("annotations") or {})
        await command(client, parent, "OpenQueue")
        for name in ("org", "org-a", "org-a-x"):
            opened = await eventually(lambda name=name: queue_in(client, name, "Open"))
            if name != "org":
                assert opened["metadata"]["annotations"][CLOSED_BY_PARENT] == "false"
        assert await state_of(client, "org-b") == "Closed"  # it was not closed by its parent


async def test_refusals_closing_root_and_opening_under_a_closed_parent() -> None:
    async with running([QUEUE], max_retries=2, retry_base=0.01) as (client, _):
        root = await eventually(lambda: queue_in(client, "root", "Open"))
        await command(client, root, "CloseQueue")
        assert await eventually(lambda: _has_reasons(client, "root", {"CloseQueueRefused"}))
        assert await state_of(client, "root") == "Open"
        parent = await make_queue(client, "p")
        child = await make_queue(client, "c", parent="p")
        await eventually(lambda: queue_in(client, "c", "Open"))
        await command(client, parent, "CloseQueue")
        await eventually(lambda: queue_in(client, "c", "Closed"))
        await command(client, child, "OpenQueue")
        got = await eventually(
            lambda: _has_reasons(client, "c", {"OpenQueueRefused", "FailedSync"})
        )
        assert "OpenQueueRefused" in got
        assert await state_of(client, "c") == "Closed"


async def test_a_parent_closed_and_reopened_at_once_leaves_its_children_open() -> None:
    async with running([QUEUE]) as (client, _):
        parent = await make_queue(client, "lab")
        for i in range(3):
            await make_queue(client, f"lab-{i}", parent="lab")
        for i in range(3):
            await eventually(lambda i=i: queue_in(client, f"lab-{i}", "Open"))
        await command(client, parent, "CloseQueue")
        await command(client, parent, "OpenQueue")
        await eventually(lambda: queue_in(client, "lab", "Open"))
        for i in range(3):
            await eventually(lambda i=i: _settled_open(client, f"lab-{i}"))


async def _settled_open(client: KubeClient, name: str) -> bool:
    queue = await client.get(QUEUES, name)
    annotation = (queue["metadata"].get("annotations") or {}).get(CLOSED_BY_PARENT)
    return queue.get("status", {}).get("state") == "Open" and annotation in (None, "false")


async def test_a_queue_opened_and_closed_again_at_once_ends_closed_never_read() -> None:
    """Decided on the informer's copy or the controller's own last write (as Volcano's queue
    controller reads its cache): the queue is never read from the API server."""
    async with running([QUEUE]) as (client, controllers):
        q = await make_queue(client, "swift")
        await eventually(lambda: queue_in(client, "swift", "Open"))
        await command(client, q, "CloseQueue")
        await eventually(lambda: queue_in(client, "swift", "Closed"))
        opening = await command(client, q, "OpenQueue")
        closing = await command(client, q, "CloseQueue")
        assert await eventually(lambda: command_gone(client, opening))
        assert await eventually(lambda: command_gone(client, closing))
        manager = controllers.manager
        assert manager is not None
        await eventually(lambda: _idle(manager))
        assert await state_of(client, "swift") == "Closed"
        assert manager.controllers[QUEUE].main.reconciler.fresh.reads == 0
