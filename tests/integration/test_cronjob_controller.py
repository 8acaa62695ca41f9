"""The CronJob controller in-process against the embedded API server (real HTTP), on a fake
clock: schedule times minutes apart are reached by moving the clock, never by sleeping. No job
controller runs: the test plays it, writing each Job's phase as Volcano's would."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio.client import Configuration

from core.controller.clock import FakeClock
from core.controller.manager import ControllerManager
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy
from core.kube.client import CRONJOBS, VCJOBS, ApiError, ClientOptions, KubeClient
from flow_controller.controllers import factories
from flow_controller.cronjob.controller import CRONJOB
from sim.apiserver.server import EmbeddedApiServer
from tests.helpers import until
from tests.integration.controller_harness import events_about, eventually

NS = "default"

# Volcano's example/cronjob/cronjob.yaml, as written.
EXAMPLE: dict[str, Any] = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "CronJob",
    "metadata": {"name": "volcano-cronjob-example", "namespace": NS},
    "spec": {
        "schedule": "*/5 * * * *",
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 60,
        "successfulJobsHistoryLimit": 5,
        "failedJobsHistoryLimit": 3,
        "jobTemplate": {
            "spec": {
                "schedulerName": "volcano",
                "tasks": [
                    {
                        "replicas": 1,
                        "name": "task-1",
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "busybox-container",
                                        "image": "busybox:latest",
                                        "command": [
                                            "/bin/sh",
                                            "-c",
                                            "date; echo Hello from Volcano CronJob",
                                        ],
                                    }
                                ],
                                "restartPolicy": "OnFailure",
                            }
                        },
                    }
                ],
                "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
                "minAvailable": 1,
            }
        },
    },
}


def cronjob(name: str, schedule: str, **spec: Any) -> dict[str, Any]:
    obj = copy.deepcopy(EXAMPLE)
    obj["metadata"]["name"] = name
    obj["spec"].pop("startingDeadlineSeconds")
    obj["spec"].update({"schedule": schedule, "concurrencyPolicy": "Allow", **spec})
    return obj


def minute_after(moment: datetime, every: int = 1) -> datetime:
    """The first time after `moment` whose minute is a multiple of `every`, at second 0."""
    t = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while t.minute % every:
        t += timedelta(minutes=1)
    return t


def job_name(cron: str, at: datetime) -> str:
    return f"{cron}-{int(at.timestamp()) // 60}"


class Manager:
    """The cronjob-controller in a ControllerManager on the fake clock; stoppable and
    restartable (a restart rebuilds everything from the API server, timers included)."""

    def __init__(self, client: KubeClient, clock: FakeClock) -> None:
        self.client, self.clock = client, clock
        self.task: asyncio.Task[None] | None = None
        self.metrics = ControllerMetrics()
        self.manager: ControllerManager | None = None

    async def start(self) -> None:
        retries = RetryPolicy(max_retries=5, max_delay=0.5)
        manager = ControllerManager(
            self.client,
            {CRONJOB: factories(retries, clock=self.clock)[CRONJOB]},
            metrics=self.metrics,
            identity="t",
        )
        self.manager = manager
        self.task = asyncio.create_task(manager.run())
        await until(lambda: manager.ready() == (True, "ok"), 10)

    def reads(self) -> int:
        """How many times the running controller read a CronJob from the API server."""
        assert self.manager is not None
        return self.manager.controllers[CRONJOB].reconciler.fresh.reads  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None


@contextlib.asynccontextmanager
async def cluster() -> AsyncIterator[tuple[KubeClient, FakeClock]]:
    async with managed() as (client, clock, _):
        yield client, clock


@contextlib.asynccontextmanager
async def managed() -> AsyncIterator[tuple[KubeClient, FakeClock, Manager]]:
    clock = FakeClock(datetime.now(UTC))
    async with EmbeddedApiServer() as server:
        client = KubeClient(Configuration(host=server.url), ClientOptions(qps=0))
        manager = Manager(client, clock)
        await manager.start()
        try:
            yield client, clock, manager
        finally:
            await manager.stop()
            await client.close()


async def job_or_none(client: KubeClient, name: str) -> Any:
    try:
        return await client.get(VCJOBS, name, NS)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def status_of(client: KubeClient, name: str) -> dict[str, Any]:
    return (await client.get(CRONJOBS, name, NS)).get("status") or {}


async def finish(client: KubeClient, name: str, phase: str, at: datetime) -> None:
    """Play Volcano's job controller: the Job reaches `phase` at `at`."""
    job = await client.get(VCJOBS, name, NS)
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    job["status"] = {"state": {"phase": phase, "lastTransitionTime": stamp}}
    await client.replace(VCJOBS, job, "status")


async def reasons(client: KubeClient, name: str) -> list[str]:
    return [e.get("reason") for e in await events_about(client, name)]


async def next_timer(clock: FakeClock, at: datetime) -> None:
    """Wait until the controller waits for `at` (its requeue is the schedule time + 100 ms)."""
    due = at + timedelta(milliseconds=100)
    await until(lambda: due in clock.pending(), 10)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.asyncio
async def test_volcano_example_runs_at_its_schedule_completes_and_forbid_skips() -> None:
    async with managed() as (client, clock, manager):
        name = EXAMPLE["metadata"]["name"]
        await client.create(CRONJOBS, EXAMPLE)
        first = minute_after(clock.now(), 5)
        await next_timer(clock, first)
        assert (await status_of(client, name)).get("active") is None

        clock.set(first + timedelta(seconds=1))
        job = await eventually(lambda: job_or_none(client, job_name(name, first)))
        owner = job["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("CronJob", name, True)
        assert job["metadata"]["annotations"]["volcano.sh/cronjob-scheduled-timestamp"] == (
            stamp(first)
        )
        assert job["spec"]["tasks"][0]["name"] == "task-1"
        status = await eventually(lambda: _with(status_of(client, name), lambda s: s.get("active")))
        assert [a["name"] for a in status["active"]] == [job_name(name, first)]
        assert status["lastScheduleTime"] == stamp(first)

        # Forbid: the next time comes while the first Job still runs: skipped, and said so.
        await finish(client, job_name(name, first), "Running", first)
        second = first + timedelta(minutes=5)
        await next_timer(clock, second)
        clock.set(second + timedelta(seconds=1))
        await eventually(lambda: _with(reasons(client, name), lambda r: "JobAlreadyActive" in r))
        assert await job_or_none(client, job_name(name, second)) is None

        # The Job completes after the skipped time's 60 s deadline: it leaves the active list
        # and sets lastSuccessfulTime; the skipped time is not run late.
        done = second + timedelta(seconds=90)
        clock.set(done)
        await finish(client, job_name(name, first), "Completed", done)
        status = await eventually(
            lambda: _with(status_of(client, name), lambda s: s.get("lastSuccessfulTime"))
        )
        assert status["lastSuccessfulTime"] == stamp(done)
        assert not status.get("active")
        assert "SawCompletedJob" in await reasons(client, name)

        # The third time runs.
        third = second + timedelta(minutes=5)
        await next_timer(clock, third)
        clock.set(third + timedelta(seconds=2))
        await eventually(lambda: job_or_none(client, job_name(name, third)))
        assert await job_or_none(client, job_name(name, second)) is None
        assert "SuccessfulCreate" in await reasons(client, name)
        # The creation skew is observed per Job made (not per sync).
        skew = manager.metrics.cronjob_creation_skew.collect()[0]
        count = next(s.value for s in skew.samples if s.name.endswith("_count"))
        assert count == 2
        # Each sync decided on the informer's copy or on what its own status write returned
        # (Forbid's skip above read the active list that write put there), never a GET.
        assert manager.reads() == 0


async def _with(probe: Any, test: Any) -> Any:
    value = await probe
    return value if test(value) else None


@pytest.mark.asyncio
async def test_replace_deletes_the_running_job_and_creates_the_next() -> None:
    async with cluster() as (client, clock):
        await client.create(
            CRONJOBS, cronjob("every-minute", "* * * * *", concurrencyPolicy="Replace")
        )
        first = minute_after(clock.now())
        await next_timer(clock, first)
        clock.set(first + timedelta(seconds=1))
        await eventually(lambda: job_or_none(client, job_name("every-minute", first)))
        await finish(client, job_name("every-minute", first), "Running", first)

        second = first + timedelta(minutes=1)
        await next_timer(clock, second)
        clock.set(second + timedelta(seconds=1))
        await eventually(lambda: job_or_none(client, job_name("every-minute", second)))
        status = await eventually(
            lambda: _with(
                status_of(client, "every-minute"),
                lambda s: (
                    [a["name"] for a in s.get("active") or []] == [job_name("every-minute", second)]
                ),
            )
        )
        assert status["lastScheduleTime"] == stamp(second)
        old = await job_or_none(client, job_name("every-minute", first))
        assert old is None or old["metadata"].get("deletionTimestamp")
        seen = await reasons(client, "every-minute")
        assert "SuccessfulDelete" in seen
        assert "UnexpectedJob" not in seen  # the Job it deleted itself is not a stranger


@pytest.mark.asyncio
async def test_history_limits_keep_the_newest_finished_jobs() -> None:
    async with cluster() as (client, clock):
        name = "history"
        await client.create(
            CRONJOBS,
            cronjob(name, "* * * * *", successfulJobsHistoryLimit=2, failedJobsHistoryLimit=1),
        )
        at = minute_after(clock.now())
        made: list[str] = []
        for run in range(5):
            await next_timer(clock, at)
            clock.set(at + timedelta(seconds=1))
            made.append(job_name(name, at))
            await eventually(lambda: job_or_none(client, made[-1]))
            # Runs 0, 1, 3 complete; 2 and 4 fail.
            phase = "Failed" if run in (2, 4) else "Completed"
            await finish(client, made[-1], phase, at + timedelta(seconds=10))
            await eventually(lambda: _with(status_of(client, name), lambda s: not s.get("active")))
            at += timedelta(minutes=1)

        async def remaining() -> list[str]:
            items = (await client.list(VCJOBS, NS))["items"]
            return sorted(
                j["metadata"]["name"] for j in items if not j["metadata"].get("deletionTimestamp")
            )

        expected = sorted([made[1], made[3], made[4]])
        await eventually(lambda: _with(remaining(), lambda names: names == expected))
        assert "SuccessfulDelete" in await reasons(client, name)


@pytest.mark.asyncio
async def test_suspended_cronjob_creates_nothing_and_a_missed_deadline_is_reported() -> None:
    async with cluster() as (client, clock):
        await client.create(CRONJOBS, cronjob("paused", "* * * * *", suspend=True))
        await client.create(CRONJOBS, cronjob("late", "0 * * * *", startingDeadlineSeconds=10))
        start = clock.now()
        top = start.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        await next_timer(clock, top)
        # The controller was away: it looks again 5 minutes after the hour, past the deadline.
        clock.set(top + timedelta(minutes=5))
        await eventually(lambda: _with(reasons(client, "late"), lambda r: "MissSchedule" in r))
        items = (await client.list(VCJOBS, NS))["items"]
        assert items == []
        assert not (await status_of(client, "paused")).get("lastScheduleTime")


@pytest.mark.asyncio
async def test_a_restarted_controller_runs_the_time_it_missed_while_down() -> None:
    async with managed() as (client, clock, manager):
        name = "restarts"
        await client.create(CRONJOBS, cronjob(name, "* * * * *", startingDeadlineSeconds=120))
        first = minute_after(clock.now())
        await next_timer(clock, first)
        await manager.stop()
        # Down across the schedule time; back within the deadline: the run happens, once.
        clock.set(first + timedelta(seconds=30))
        assert await job_or_none(client, job_name(name, first)) is None
        await manager.start()
        await eventually(lambda: job_or_none(client, job_name(name, first)))
        status = await eventually(
            lambda: _with(status_of(client, name), lambda s: s.get("lastScheduleTime"))
        )
        assert status["lastScheduleTime"] == stamp(first)
        await next_timer(clock, first + timedelta(minutes=1))
        items = (await client.list(VCJOBS, NS))["items"]
        assert [j["metadata"]["name"] for j in items] == [job_name(name, first)]
