"""The reconciler runtime (`core.controller.runtime`) against the embedded API server: a
reconciler's requeue-after is honoured on the runtime's clock (a fake one here: no sleeping),
a failing key is retried with growing delays and then given up with a `FailedSync` event on
the reconciler's object, every reconcile is counted and timed; and the Command handlers, which
ran on raw workers before, get the same (counted, given up with an event on the target)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import Configuration

from core.controller.clock import FakeClock
from core.controller.informers import SharedInformers
from core.controller.manager import ControllerManager
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy
from core.controller.runtime import Builder, Controller, ObjectRef, Reconciler, build
from core.kube.client import COMMANDS, EVENTS, QUEUES, ClientOptions, KubeClient, Resource
from core.kube.events import CORE_API, EventRecorder
from core.records import QueueRecord
from flow_controller.controllers import factories as flow_factories
from flow_controller.job.controller import JOB
from podgroup_controller.controllers import factories as queue_factories
from podgroup_controller.options import ControllerOptions
from sim.apiserver.server import EmbeddedApiServer, write_kubeconfig
from tests.helpers import until
from tests.integration.controller_harness import eventually, get_or_none

QUEUE = {"apiVersion": QUEUES.api_version, "kind": "Queue", "spec": {"weight": 1}}


def queue(name: str) -> dict[str, Any]:
    return {**QUEUE, "metadata": {"name": name}}


class Scripted(Reconciler[str]):
    """Reconciles Queues by answering from a script: a number (requeue after), None, or an
    exception to raise; it records when each reconcile ran."""

    name = "scripted-controller"

    def __init__(self, answers: list[Any], loop_time: Any, resync: float | None = None) -> None:
        self.answers = answers
        self.calls: list[tuple[str, float]] = []
        self.loop_time = loop_time
        self.resync = resync

    def setup(self, watch: Builder[str]) -> None:
        self.queues = watch.primary(QUEUES, QueueRecord)
        if self.resync is not None:
            watch.resync(self.resync, lambda: [k for k in self.queues.items if k != "quiet"])

    async def reconcile(self, key: str) -> float | None:
        self.calls.append((key, self.loop_time()))
        answer = self.answers.pop(0) if self.answers else None
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    def reference(self, key: str) -> ObjectRef:
        record = self.queues.items.get(key)
        return {
            "apiVersion": QUEUES.api_version,
            "kind": "Queue",
            "name": key,
            "uid": record.uid if record else "",
        }


@contextlib.asynccontextmanager
async def wired(
    answers: list[Any],
    retries: RetryPolicy,
    clock: FakeClock | None = None,
    resync: float | None = None,
) -> AsyncIterator[tuple[KubeClient, Scripted, Controller[str], ControllerMetrics]]:
    async with EmbeddedApiServer() as server:
        client = KubeClient(Configuration(host=server.url), ClientOptions(qps=0))
        informers = SharedInformers(client)
        recorder = EventRecorder(client, "vulcan-test", "instance-1", api=CORE_API)
        metrics = ControllerMetrics()
        reconciler = Scripted(answers, asyncio.get_running_loop().time, resync)
        controller = build(reconciler, informers, recorder, metrics, retries=retries, clock=clock)
        informers.start()
        await informers.wait_synced()
        events = asyncio.create_task(recorder.run())
        running = asyncio.create_task(controller.run())
        try:
            yield client, reconciler, controller, metrics
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            await recorder.flush()
            events.cancel()
            await informers.stop()
            await client.close()


def sample(metrics: ControllerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_requeue_after_is_honoured_on_the_clock_and_a_later_answer_replaces_it() -> None:
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
    start = clock.now()
    async with wired([30.0, 10.0, None], RetryPolicy(), clock) as (client, r, _, metrics):
        await client.create(QUEUES, queue("q"))
        await until(lambda: len(r.calls) == 1)
        # Asked to look again in 30 s: a timer then, and nothing before the clock gets there.
        await until(lambda: clock.pending() == [start + timedelta(seconds=30)])
        assert len(r.calls) == 1

        # An update reconciles at once; its answer (10 s) replaces the pending 30 s.
        await client.patch(QUEUES, "q", {"spec": {"weight": 2}})
        await until(lambda: len(r.calls) == 2)
        await until(lambda: clock.pending() == [start + timedelta(seconds=10)])

        clock.advance(10)
        await until(lambda: len(r.calls) == 3)
        assert clock.pending() == []  # done: nothing more asked
        assert [key for key, _ in r.calls] == ["q", "q", "q"]
        controller = {"controller": "scripted-controller"}
        assert sample(metrics, "vulcan_controller_syncs_total", **controller, result="success") == 3
        assert sample(metrics, "vulcan_controller_sync_duration_seconds_count", **controller) == 3
        assert sample(metrics, "vulcan_controller_workqueue_depth", **controller) == 0


async def test_resync_requeues_the_keys_it_is_given_every_period_on_the_clock() -> None:
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
    async with wired([], RetryPolicy(), clock, resync=60.0) as (client, r, _, _metrics):
        await client.create(QUEUES, queue("a"))
        await client.create(QUEUES, queue("quiet"))
        await until(lambda: len(r.calls) == 2)
        clock.advance(60)
        await until(lambda: len(r.calls) == 3)
        clock.advance(60)
        await until(lambda: len(r.calls) == 4)
        # Only the keys the resync named; "quiet" was reconciled once, when it was added.
        assert sorted(key for key, _ in r.calls) == ["a", "a", "a", "quiet"]


async def test_a_failing_key_is_retried_with_backoff_then_given_up_with_an_event() -> None:
    retries = RetryPolicy(max_retries=3, base=0.01, max_delay=0.03)
    answers = [RuntimeError("the template is gone")] * 4
    async with wired(answers, retries) as (client, r, _, metrics):
        await client.create(QUEUES, queue("broken"))
        events = await eventually(lambda: events_on(client, "broken"))
        assert [(e["type"], e["reason"]) for e in events] == [("Warning", "FailedSync")]
        assert events[0]["note"] == "gave up syncing queue broken: the template is gone"
        assert events[0]["regarding"]["kind"] == "Queue"
        assert len(r.calls) == 4  # the first try and 3 retries, then no more
        gaps = [b - a for (_, a), (_, b) in itertools.pairwise(r.calls)]
        # 10, 20, then 30 ms (capped). Lower bounds only: a timer never fires early.
        for gap, delay in zip(gaps, (0.01, 0.02, 0.03), strict=True):
            assert gap >= delay * 0.9, (gaps, delay)
        labels = {"controller": "scripted-controller"}
        assert sample(metrics, "vulcan_controller_syncs_total", **labels, result="error") == 4
        assert sample(metrics, "vulcan_controller_syncs_total", **labels, result="dropped") == 1
        assert sample(metrics, "vulcan_controller_syncs_total", **labels, result="success") is None

        # The key was forgotten: a new event about it starts again from the first delay.
        r.answers[:] = [None]
        await client.patch(QUEUES, "broken", {"spec": {"weight": 3}})
        await until(lambda: len(r.calls) == 5)
        assert sample(metrics, "vulcan_controller_syncs_total", **labels, result="success") == 1


# ---------------------------------------------------------------- the Command handlers

CONTROLLERS_USER = "system:serviceaccount:vulcan-system:vulcan-controllers"
RBAC_GROUP = "rbac.authorization.k8s.io"
CLUSTER_ROLES = Resource(RBAC_GROUP, "v1", "clusterroles", False, "ClusterRole")
CLUSTER_ROLE_BINDINGS = Resource(
    RBAC_GROUP, "v1", "clusterrolebindings", False, "ClusterRoleBinding"
)


def command(name: str, kind: str, target: str, action: str) -> dict[str, Any]:
    api = {"Job": "batch.volcano.sh/v1alpha1", "Queue": "scheduling.volcano.sh/v1beta1"}[kind]
    return {
        "apiVersion": COMMANDS.api_version,
        "kind": "Command",
        "metadata": {"name": name, "namespace": "default"},
        "action": action,
        "target": {"apiVersion": api, "kind": kind, "name": target, "uid": "u-" + target},
    }


@contextlib.asynccontextmanager
async def controllers_without_command_delete(
    tmp: Path, names: list[str]
) -> AsyncIterator[tuple[KubeClient, ControllerMetrics]]:
    """`names` run as a user who may do everything but delete Commands: every Command they
    try to consume fails (403), as an install missing that RBAC rule would."""
    tokens = tmp / "tokens.csv"
    tokens.write_text(
        f'admin-token,admin,1,"system:masters"\nctl-token,{CONTROLLERS_USER},2,"ctl"\n'
    )
    async with EmbeddedApiServer(token_auth_file=tokens) as server:
        clients = []
        for who in ("admin", "ctl"):
            path = tmp / f"{who}.kubeconfig"
            write_kubeconfig(path, server.url, f"{who}-token")
            clients.append(
                await KubeClient.connect(ClientOptions(kubeconfig=str(path), max_retries=0))
            )
        admin, ctl = clients
        verbs = ["get", "list", "watch", "create", "update", "patch"]
        rules = [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": verbs},
            {"apiGroups": ["*"], "resources": ["pods", "podgroups", "jobs"], "verbs": ["delete"]},
        ]
        await admin.create(CLUSTER_ROLES, {"metadata": {"name": "ctl"}, "rules": rules})
        binding = {
            "metadata": {"name": "ctl"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "ctl",
            },
            "subjects": [{"kind": "Group", "name": "ctl", "apiGroup": "rbac.authorization.k8s.io"}],
        }
        await admin.create(CLUSTER_ROLE_BINDINGS, binding)
        retries = RetryPolicy(max_retries=2, max_delay=0.05)
        available = {
            **queue_factories(ControllerOptions(max_retries=2, retry_max=0.05)),
            **flow_factories(retries),
        }
        metrics = ControllerMetrics()
        manager = ControllerManager(ctl, {n: available[n] for n in names}, metrics, "t")
        task = asyncio.create_task(manager.run())
        try:
            await until(lambda: manager.ready() == (True, "ok"), 10)
            yield admin, metrics
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            for client in clients:
                await client.close()


@pytest.mark.parametrize(
    ("controller", "kind", "handler", "action"),
    [
        (JOB, "Job", "job-command", "AbortJob"),
        ("queue-controller", "Queue", "queue-command", "CloseQueue"),
    ],
)
async def test_a_command_that_cannot_be_consumed_is_given_up_with_an_event_on_its_target(
    tmp_path: Path, controller: str, kind: str, handler: str, action: str
) -> None:
    async with controllers_without_command_delete(tmp_path, [controller]) as (admin, metrics):
        await admin.create(COMMANDS, command("c1", kind, "target-1", action), "default")
        events = await eventually(lambda: _reasons(admin, "target-1", {"FailedSync"}), 20)
        failed = next(e for e in events if e["reason"] == "FailedSync")
        assert failed["type"] == "Warning"
        assert failed["regarding"]["kind"] == kind
        assert failed["note"].startswith("gave up syncing command default/c1: ")
        labels = {"controller": handler}
        assert sample(metrics, "vulcan_controller_syncs_total", **labels, result="dropped") == 1
        assert sample(metrics, "vulcan_controller_syncs_total", **labels, result="error") == 3
        # Not consumed: the Command is still there for an operator to see.
        assert await get_or_none(admin, COMMANDS, "c1", "default") is not None


async def test_a_consumed_job_command_is_counted() -> None:
    async with EmbeddedApiServer() as server:
        client = KubeClient(Configuration(host=server.url), ClientOptions(qps=0))
        metrics = ControllerMetrics()
        factory = flow_factories(RetryPolicy(max_retries=2, max_delay=0.05))[JOB]
        manager = ControllerManager(client, {JOB: factory}, metrics, "t")
        task = asyncio.create_task(manager.run())
        try:
            await until(lambda: manager.ready() == (True, "ok"), 10)
            await client.create(COMMANDS, command("c2", "Job", "train", "AbortJob"), "default")
            await eventually(lambda: _reasons(client, "train", {"CommandIssued"}))
            assert await get_or_none(client, COMMANDS, "c2", "default") is None
            labels = {"controller": "job-command"}
            await until(
                lambda: sample(metrics, "vulcan_controller_syncs_total", **labels, result="success")
            )
            changes = {"kind": "Command", "operation": "deleted"}
            assert sample(metrics, "vulcan_controller_object_changes_total", **changes) == 1
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await client.close()


async def events_on(client: KubeClient, name: str) -> list[dict[str, Any]]:
    """Events about `name` in any namespace (a cluster-scoped Queue's are in `default`)."""
    items = (await client.list(EVENTS))["items"]
    return [e for e in items if e.get("regarding", {}).get("name") == name]


async def _reasons(client: KubeClient, name: str, wanted: set[str]) -> list[dict[str, Any]] | None:
    events = await events_on(client, name)
    return events if wanted <= {e["reason"] for e in events} else None


class SlowStart(Scripted):
    """Its `start` (the queue controller's creates the built-in queues) returns when told."""

    def __init__(self, go: asyncio.Event) -> None:
        super().__init__([], asyncio.get_running_loop().time)
        self.go = go

    async def start(self) -> None:
        await self.go.wait()


async def test_the_manager_is_ready_only_once_every_controller_has_started() -> None:
    go = asyncio.Event()
    async with EmbeddedApiServer() as server:
        client = KubeClient(Configuration(host=server.url), ClientOptions(qps=0))

        def factory(
            client: KubeClient,
            informers: SharedInformers,
            recorder: EventRecorder,
            metrics: ControllerMetrics,
        ) -> Controller[str]:
            return build(SlowStart(go), informers, recorder, metrics, retries=RetryPolicy())

        manager = ControllerManager(client, {"slow": factory}, ControllerMetrics(), "t")
        task = asyncio.create_task(manager.run())
        try:
            await until(lambda: manager.ready()[1] != "informers not synced", 10)
            # Synced, but its start has not returned: not ready, and /readyz says which.
            assert manager.ready() == (False, "controllers starting: slow")
            go.set()
            await until(lambda: manager.ready() == (True, "ok"), 10)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await client.close()
