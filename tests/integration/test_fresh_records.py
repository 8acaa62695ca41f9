"""The job and queue controllers decide on the informer's copy of an object, or the newer one
their own last write returned (`core.controller.fresh.FreshRecords`), as Volcano's controllers
read their caches; a write made on a stale copy conflicts on the API server and the object is
read from it once. Against the embedded API server (real HTTP)."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import Configuration

from core.controller.fresh import FreshRecords
from core.kube.client import VCJOBS, ApiError, ClientOptions, KubeClient
from core.records import JobRecord
from sim.apiserver.server import EmbeddedApiServer
from tests.integration.controller_harness import eventually, running
from tests.integration.test_job_controller import (
    JOB,
    _has,
    _is,
    admit,
    job_pods,
    phase_of,
    set_phase,
)
from tests.integration.test_job_controller import tf_job as make_job


class _Informer:
    """The informer's items, as the test sets them (a copy the watch has or has not updated)."""

    def __init__(self, client: KubeClient | None = None) -> None:
        self.client = client
        self.resource = VCJOBS
        self.decode = JobRecord
        self.items: dict[str, JobRecord] = {}


async def _obj(fresh: FreshRecords[JobRecord]) -> dict[str, Any] | None:
    record = await fresh.get("default/tf")
    return record.obj if record is not None else None


def _versioned(job: dict[str, Any], rv: str) -> dict[str, Any]:
    return {**job, "metadata": {**job["metadata"], "resourceVersion": rv}}


async def test_a_job_runs_to_completed_without_the_controller_reading_it() -> None:
    async with running([JOB]) as (client, controllers):
        job = await client.create(VCJOBS, make_job())
        assert await eventually(lambda: _is(phase_of(client), "Pending"))
        await admit(client, f"tf-{job['metadata']['uid']}")
        pods = await eventually(lambda: _has(job_pods(client), 3))
        for phase in ("Running", "Succeeded"):
            for name in pods:
                await set_phase(client, name, phase)
        assert await eventually(lambda: _is(phase_of(client), "Completed"))
        status = (await client.get(VCJOBS, "tf", "default"))["status"]
        assert [c["status"] for c in status["conditions"]] == ["Pending", "Running", "Completed"]
        assert controllers.manager is not None
        fresh = controllers.manager.controllers[JOB].main.reconciler.fresh  # type: ignore[attr-defined]
        assert fresh.reads == 0


async def test_a_write_on_a_stale_copy_conflicts_and_the_job_is_read_once() -> None:
    async with EmbeddedApiServer() as server:
        client = KubeClient(Configuration(host=server.url), ClientOptions(qps=0))
        try:
            informer = _Informer(client)
            fresh = FreshRecords(informer)  # type: ignore[arg-type]
            created = await client.create(VCJOBS, make_job())
            informer.items["default/tf"] = JobRecord(created)
            # Someone else changes the job; the watch has not brought it yet.
            changed = await client.patch(
                VCJOBS, "tf", {"metadata": {"labels": {"team": "b"}}}, "default"
            )
            stale = await fresh.get("default/tf")
            assert stale is not None and stale.obj is created
            try:
                await client.replace(
                    VCJOBS, {**stale.obj, "status": {"version": 1}}, subresource="status"
                )
            except ApiError as exc:
                assert exc.conflict
            else:
                raise AssertionError("a write on a stale copy was accepted")
            fresh.conflicted("default/tf")
            live = await fresh.get("default/tf")
            assert live is not None and fresh.reads == 1
            assert live.rv == changed["metadata"]["resourceVersion"]
            written = await client.replace(
                VCJOBS, {**live.obj, "status": {"version": 1}}, subresource="status"
            )
            fresh.wrote(written)
            # Until the watch brings a copy as new, the written one is decided on, unread.
            assert (await _obj(fresh)) is written and fresh.reads == 1
            informer.items["default/tf"] = JobRecord(written)
            assert (await _obj(fresh)) is written  # the informer's, as new
            informer.items["default/tf"] = JobRecord(changed)
            assert (await _obj(fresh)) is changed  # nothing newer of ours is held
            await client.delete(VCJOBS, "tf", "default")
            fresh.conflicted("default/tf")
            assert (await _obj(fresh)) is None
        finally:
            await client.close()


async def test_the_newer_of_the_informers_and_the_written_copy_is_decided_on() -> None:
    informer = _Informer()
    fresh = FreshRecords(informer)  # type: ignore[arg-type]
    seen = _versioned(make_job(), "10")
    informer.items["default/tf"] = JobRecord(seen)
    assert (await _obj(fresh)) is seen
    ours = _versioned(make_job(), "12")
    fresh.wrote(ours)
    assert (await _obj(fresh)) is ours
    caught_up = _versioned(make_job(), "12")
    informer.items["default/tf"] = JobRecord(caught_up)
    assert (await _obj(fresh)) is caught_up
    # Versions compare as numbers, not as strings ("9" < "10").
    fresh.wrote(_versioned(make_job(), "9"))
    informer.items["default/tf"] = JobRecord(seen)
    assert (await _obj(fresh)) is seen
    del informer.items["default/tf"]
    assert (await _obj(fresh)) is None
    assert fresh.reads == 0
