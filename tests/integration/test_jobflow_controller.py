"""The JobFlow and JobTemplate controllers in-process against the embedded API server (real
HTTP). No job controller runs here: the test plays it, writing each Job's phase as Volcano's
job controller would, so every flow rule is driven exactly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from core.kube.client import JOBFLOWS, JOBTEMPLATES, PODS, VCJOBS, ApiError, KubeClient
from tests.integration.controller_harness import (
    Controllers,
    events_about,
    eventually,
    get_or_none,
    running,
)

FLOWS = ["jobflow-controller", "jobtemplate-controller"]
NS = "default"


def template(name: str, tasks: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "minAvailable": 1,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": task,
                    "replicas": 1,
                    "template": {"spec": {"containers": [container], "restartPolicy": "Never"}},
                }
                for task in tasks
            ],
        },
    }


def jobflow(
    name: str,
    steps: list[tuple[str, list[str]]],
    *,
    retain: str | None = "retain",
    annotations: dict[str, str] | None = None,
    probes: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    flows = []
    for step, targets in steps:
        item: dict[str, Any] = {"name": step}
        if targets:
            item["dependsOn"] = {"targets": targets}
            if probes and step in probes:
                item["dependsOn"]["probe"] = probes[step]
        flows.append(item)
    spec: dict[str, Any] = {"flows": flows}
    if retain:
        spec["jobRetainPolicy"] = retain
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
        "spec": spec,
    }


PIPELINE = [("a", []), ("b", ["a"]), ("c", ["b"]), ("d", ["b"]), ("e", ["c", "d"])]


async def setup(client: KubeClient, flow: dict[str, Any], extra: tuple[str, ...] = ()) -> None:
    steps = {f["name"] for f in flow["spec"]["flows"]} | set(extra)
    for step in sorted(steps):
        await client.create(JOBTEMPLATES, template(step))
    await client.create(JOBFLOWS, flow)


async def jobs(client: KubeClient, flow: str = "p") -> dict[str, dict[str, Any]]:
    items = (await client.list(VCJOBS, NS))["items"]
    return {
        j["metadata"]["name"]: j
        for j in items
        if j["metadata"]["name"].startswith(f"{flow}-")
        and not j["metadata"].get("deletionTimestamp")
    }


async def finish(client: KubeClient, job: str, phase: str = "Completed", **extra: Any) -> None:
    status = {"state": {"phase": phase}, **extra}
    await client.patch(VCJOBS, job, {"status": status}, NS, subresource="status")


async def flow_status(client: KubeClient, name: str = "p") -> dict[str, Any]:
    return (await client.get(JOBFLOWS, name, NS)).get("status") or {}


async def phase_is(client: KubeClient, phase: str, name: str = "p") -> bool:
    return ((await flow_status(client, name)).get("state") or {}).get("phase") == phase


async def has_jobs(client: KubeClient, *names: str) -> bool:
    return set(names) <= set(await jobs(client))


def _controller(controllers: Controllers) -> Any:
    assert controllers.manager is not None
    return controllers.manager.controllers["jobflow-controller"]


def _fresh(controllers: Controllers) -> Any:
    return _controller(controllers).reconciler.fresh


async def test_the_pipeline_runs_stage_by_stage_and_retain_outlives_the_flow() -> None:
    async with running(FLOWS) as (client, controllers):
        await setup(client, jobflow("p", PIPELINE))
        await eventually(lambda: has_jobs(client, "p-a"))
        job_a = (await jobs(client))["p-a"]
        meta = job_a["metadata"]
        assert meta["labels"]["volcano.sh/createdByJobFlow"] == "default.p"
        assert meta["annotations"]["volcano.sh/createdByJobTemplate"] == "default.a"
        assert meta["ownerReferences"][0]["kind"] == "JobFlow"
        assert meta["ownerReferences"][0]["controller"] is True
        assert job_a["spec"]["tasks"][0]["name"] == "main"  # the template's spec
        await finish(client, "p-a", "Running")
        await eventually(lambda: phase_is(client, "Running"))
        assert set(await jobs(client)) == {"p-a"}  # b waits for a to complete
        await finish(client, "p-a")
        await eventually(lambda: has_jobs(client, "p-b"))
        await finish(client, "p-b")
        await eventually(lambda: has_jobs(client, "p-c", "p-d"))  # in parallel
        await finish(client, "p-c")
        await asyncio.sleep(0)  # e needs both c and d
        assert "p-e" not in await jobs(client)
        await finish(client, "p-d")
        await eventually(lambda: has_jobs(client, "p-e"))
        await finish(client, "p-e", runningDuration="3s")
        await eventually(lambda: phase_is(client, "Succeed"))
        status = await flow_status(client)
        assert status["completedJobs"] == ["p-a", "p-b", "p-c", "p-d", "p-e"]
        entry = status["jobStatusList"][0]
        assert entry["name"] == "p-a" and entry["state"] == "Completed"
        assert [h["state"] for h in entry["runningHistories"]][-1] == "Completed"
        assert status["conditions"]["p-e"]["runningDuration"] == "3s"
        # The JobTemplate controller lists the Jobs made from each template.
        await eventually(
            lambda: _depends_on(client, "e"),
        )
        reasons = [e["reason"] for e in await events_about(client, "p")]
        assert reasons.count("Created") == 5 and "JobFinished" in reasons
        # Every sync decided on the informer's copy or its own last write's answer.
        assert _fresh(controllers).reads == 0
        # retain: deleting the flow keeps its Jobs (released from its ownership).
        await client.delete(JOBFLOWS, "p", NS)
        await eventually(lambda: _gone(client, JOBFLOWS, "p"))
        left = await jobs(client)
        assert set(left) == {"p-a", "p-b", "p-c", "p-d", "p-e"}
        assert all(not j["metadata"].get("ownerReferences") for j in left.values())


async def test_a_status_write_on_a_stale_copy_conflicts_and_the_flow_is_read_once() -> None:
    async with running(FLOWS) as (client, controllers):
        await setup(client, jobflow("p", [("a", [])]))
        await eventually(lambda: has_jobs(client, "p-a"))
        fresh = _fresh(controllers)
        flows = fresh.informer
        stale = flows.items["default/p"]  # Pending
        await finish(client, "p-a", "Running")
        await eventually(lambda: phase_is(client, "Running"))
        await eventually(lambda: _informer_phase(flows, "Running"))
        await eventually(lambda: _idle(controllers))  # the syncs those versions woke are done
        # As if the watch had not brought the flow's last versions: the sync decides the
        # Running status again on the old copy, and its write conflicts.
        flows.items["default/p"] = stale
        with pytest.raises(ApiError) as raised:
            await fresh_reconcile(controllers, "default/p")
        assert raised.value.conflict
        assert fresh.reads == 0
        # The retry reads the flow from the API server once and finds nothing to write.
        assert await fresh_reconcile(controllers, "default/p") is None
        assert fresh.reads == 1
        assert await phase_is(client, "Running")


async def fresh_reconcile(controllers: Controllers, key: str) -> Any:
    return await _controller(controllers).reconciler.reconcile(key)


async def _idle(controllers: Controllers) -> bool:
    queue = _controller(controllers).queue
    return len(queue) == 0 and not queue.in_flight


async def _informer_phase(flows: Any, phase: str) -> bool:
    record = flows.items.get("default/p")
    return record is not None and record.phase == phase


async def _depends_on(client: KubeClient, name: str) -> bool:
    status = (await client.get(JOBTEMPLATES, name, NS)).get("status") or {}
    return status.get("jobDependsOnList") == ["p-e"]


async def _gone(client: KubeClient, resource: Any, name: str) -> bool:
    return await get_or_none(client, resource, name, NS) is None


async def test_delete_policy_removes_the_jobs_once_the_flow_succeeded() -> None:
    async with running(FLOWS) as (client, _):
        await setup(client, jobflow("p", [("a", []), ("b", ["a"])], retain="delete"))
        await eventually(lambda: has_jobs(client, "p-a"))
        await finish(client, "p-a")
        await eventually(lambda: has_jobs(client, "p-b"))
        await finish(client, "p-b")
        await eventually(lambda: phase_is(client, "Succeed"))
        await eventually(lambda: _no_jobs(client))
        flow = await client.get(JOBFLOWS, "p", NS)
        assert "vulcan.sh/retain-jobs" not in (flow["metadata"].get("finalizers") or [])


async def _no_jobs(client: KubeClient) -> bool:
    return not await jobs(client)


async def test_a_failing_middle_job_fails_the_flow_and_later_jobs_never_start() -> None:
    async with running(FLOWS) as (client, _):
        await setup(client, jobflow("p", PIPELINE))
        await eventually(lambda: has_jobs(client, "p-a"))
        await finish(client, "p-a")
        await eventually(lambda: has_jobs(client, "p-b"))
        await finish(client, "p-b", "Failed")
        await eventually(lambda: phase_is(client, "Failed"))
        assert set(await jobs(client)) == {"p-a", "p-b"}
        status = await flow_status(client)
        assert status["failedJobs"] == ["p-b"] and status["completedJobs"] == ["p-a"]
        flow = await client.get(JOBFLOWS, "p", NS)
        assert flow["metadata"]["annotations"]["vulcan.sh/failure-reason"] == "job p-b Failed"
        notes = {e["reason"]: e.get("note", "") for e in await events_about(client, "p")}
        assert "Skipped" in notes and "Failed" in notes


async def test_retries_run_a_failed_job_again_then_fail_the_flow() -> None:
    async with running(FLOWS) as (client, _):
        flow = jobflow("p", [("a", []), ("b", ["a"])], annotations={"vulcan.sh/max-retries": "1"})
        await setup(client, flow)
        await eventually(lambda: has_jobs(client, "p-a"))
        await finish(client, "p-a")
        await eventually(lambda: has_jobs(client, "p-b"))
        first = (await jobs(client))["p-b"]["metadata"]["uid"]
        await finish(client, "p-b", "Failed")
        await eventually(lambda: _recreated(client, "p-b", first))
        again = (await jobs(client))["p-b"]
        assert again["metadata"]["annotations"]["vulcan.sh/flow-retry"] == "1"
        stored = await client.get(JOBFLOWS, "p", NS)
        assert json.loads(stored["metadata"]["annotations"]["vulcan.sh/retries-used"]) == {"b": 1}
        assert not await phase_is(client, "Failed")
        await finish(client, "p-b", "Failed")
        await eventually(lambda: phase_is(client, "Failed"))
        assert "Retrying" in [e["reason"] for e in await events_about(client, "p")]


async def _recreated(client: KubeClient, name: str, uid: str) -> bool:
    job = (await jobs(client)).get(name)
    return job is not None and job["metadata"]["uid"] != uid


async def test_on_failure_runs_the_clean_up_job_then_fails_the_flow() -> None:
    async with running(FLOWS) as (client, _):
        flow = jobflow("p", PIPELINE, annotations={"vulcan.sh/on-failure": "cleanup"})
        await setup(client, flow, extra=("cleanup",))
        await eventually(lambda: has_jobs(client, "p-a"))
        assert "p-cleanup" not in await jobs(client)
        await finish(client, "p-a", "Failed")
        await eventually(lambda: has_jobs(client, "p-cleanup"))
        assert await phase_is(client, "Running")  # the clean-up still runs
        await finish(client, "p-cleanup")
        await eventually(lambda: phase_is(client, "Failed"))
        assert set(await jobs(client)) == {"p-a", "p-cleanup"}


async def test_an_invalid_flow_is_failed_with_the_reason() -> None:
    async with running(FLOWS) as (client, _):
        # A cycle (admission would refuse it; this API server runs no webhook).
        await setup(client, jobflow("p", [("a", ["b"]), ("b", ["a"])]))
        await eventually(lambda: phase_is(client, "Failed"))
        flow = await client.get(JOBFLOWS, "p", NS)
        assert "not DAG" in flow["metadata"]["annotations"]["vulcan.sh/failure-reason"]
        assert "InvalidFlow" in [e["reason"] for e in await events_about(client, "p")]
        assert not await jobs(client)


async def test_a_task_status_probe_starts_a_job_once_the_target_task_runs() -> None:
    probe = {"taskStatusList": [{"taskName": "main", "phase": "Running"}]}
    async with running(FLOWS) as (client, _):
        await setup(client, jobflow("p", [("a", []), ("b", ["a"])], probes={"b": probe}))
        await eventually(lambda: has_jobs(client, "p-a"))
        await finish(client, "p-a", "Running", taskStatusCount={"main": {"phase": {"Pending": 1}}})
        await asyncio.sleep(0.3)
        assert "p-b" not in await jobs(client)
        await finish(client, "p-a", "Running", taskStatusCount={"main": {"phase": {"Running": 1}}})
        await eventually(lambda: has_jobs(client, "p-b"))


@pytest.fixture
async def answering() -> AsyncIterator[tuple[list[int], int, list[int]]]:
    """A test HTTP server standing in for a target's service: answers 503 until told; `hits`
    counts the probes it answered."""
    codes = [503]
    hits = [0]

    async def handle(_: web.Request) -> web.Response:
        hits[0] += 1
        return web.Response(status=codes[0])

    app = web.Application()
    app.router.add_get("/ready", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield hits, port, codes
    await runner.cleanup()


async def test_an_http_probe_gates_a_job_until_the_target_answers(answering: Any) -> None:
    hits, port, codes = answering
    probe = {"httpGetList": [{"taskName": "main", "path": "/ready", "port": port}]}
    async with running(FLOWS) as (client, _):
        await setup(client, jobflow("p", [("a", []), ("b", ["a"])], probes={"b": probe}))
        await eventually(lambda: has_jobs(client, "p-a"))
        # The target's pod runs at 127.0.0.1 (the test plays its kubelet).
        await client.create(PODS, target_pod("p-a", "main"))
        await client.patch(
            PODS,
            "p-a-main-0",
            {"status": {"phase": "Running", "podIP": "127.0.0.1"}},
            NS,
            subresource="status",
        )
        await finish(client, "p-a", "Running")
        await eventually(lambda: _answered(hits))  # a probe was refused (503)
        assert "p-b" not in await jobs(client)
        codes[0] = 200
        await eventually(lambda: has_jobs(client, "p-b"))


async def _answered(hits: list[int]) -> bool:
    return hits[0] > 0


def target_pod(job: str, task: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-{task}-0",
            "namespace": NS,
            "labels": {"volcano.sh/job-name": job, "volcano.sh/task-spec": task},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def test_a_restarted_controller_starts_nothing_twice() -> None:
    async with running(FLOWS) as (client, controllers):
        await setup(client, jobflow("p", PIPELINE))
        await eventually(lambda: has_jobs(client, "p-a"))
        await finish(client, "p-a")
        await eventually(lambda: has_jobs(client, "p-b"))
        before = {n: j["metadata"]["uid"] for n, j in (await jobs(client)).items()}
        await restart(controllers)
        await finish(client, "p-b")
        await eventually(lambda: has_jobs(client, "p-c", "p-d"))
        after = {n: j["metadata"]["uid"] for n, j in (await jobs(client)).items()}
        assert {n: after[n] for n in before} == before  # the same Jobs, none made again
        created = [e for e in await events_about(client, "p") if e["reason"] == "Created"]
        assert len(created) == 4


async def restart(controllers: Controllers) -> None:
    await controllers.restart()
