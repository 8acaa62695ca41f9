"""EventRecorder (series aggregation, spam filter, best-effort retries) and StatusWriter
(coalescing, /status vs the object itself) against the embedded API server."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import Configuration

from core.kube import events as events_module
from core.kube.client import EVENTS, PODGROUPS, QUEUES, ApiError, KubeClient
from core.kube.events import EventRecorder, micro_time, object_reference
from core.kube.status import StatusWriter
from sim.apiserver.server import EmbeddedApiServer
from tests.helpers import until

NS = "default"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
POD_REF = {"apiVersion": "v1", "kind": "Pod", "namespace": NS, "name": "p1", "uid": "u-1"}


@pytest_asyncio.fixture
async def client(apiserver: EmbeddedApiServer) -> AsyncIterator[KubeClient]:
    async with KubeClient(Configuration(host=apiserver.url)) as kube:
        yield kube


@pytest_asyncio.fixture
async def recorder(client: KubeClient) -> AsyncIterator[EventRecorder]:
    rec = EventRecorder(client, "vulcan/controllers", "ctrl-0", retry_base=0.01)
    task = asyncio.create_task(rec.run())
    yield rec
    await asyncio.wait_for(rec.close(), 5)
    await asyncio.wait_for(task, 5)


@pytest_asyncio.fixture
async def writer(client: KubeClient) -> AsyncIterator[StatusWriter]:
    status = StatusWriter(client, interval=0.3, retry_base=0.01)
    task = asyncio.create_task(status.run())
    yield status
    await asyncio.wait_for(status.close(), 5)
    await asyncio.wait_for(task, 5)


async def events(client: KubeClient, namespace: str = NS) -> list[dict[str, Any]]:
    return (await client.list(EVENTS, namespace))["items"]


# --------------------------------------------------------------------------- events


async def test_first_record_creates_an_event_with_the_right_fields(
    client: KubeClient, recorder: EventRecorder
) -> None:
    recorder.record(POD_REF, "Normal", "Scheduled", "assigned to node-1", action="Binding")
    await asyncio.wait_for(recorder.flush(), 5)
    [event] = await events(client)
    assert event["apiVersion"] == "events.k8s.io/v1" and event["kind"] == "Event"
    assert re.fullmatch(r"p1\.[0-9a-f]{16}", event["metadata"]["name"])
    assert event["metadata"]["namespace"] == NS
    assert event["regarding"] == POD_REF
    assert event["reason"] == "Scheduled" and event["note"] == "assigned to node-1"
    assert event["type"] == "Normal" and event["action"] == "Binding"
    assert event["reportingController"] == "vulcan/controllers"
    assert event["reportingInstance"] == "ctrl-0"
    assert MICRO_TIME.match(event["eventTime"])
    assert "series" not in event


async def test_repeats_become_a_series_and_other_reasons_new_events(
    client: KubeClient, recorder: EventRecorder
) -> None:
    recorder.record(POD_REF, "Warning", "FailedScheduling", "0/3 nodes available")
    await asyncio.wait_for(recorder.flush(), 5)
    [first] = await events(client)
    assert first["type"] == "Warning" and "series" not in first
    recorder.record(POD_REF, "Warning", "FailedScheduling", "0/3 nodes available")
    await asyncio.wait_for(recorder.flush(), 5)
    [second] = await events(client)
    assert second["series"]["count"] == 2
    for _ in range(2):
        recorder.record(POD_REF, "Warning", "FailedScheduling", "0/3 nodes available")
    await asyncio.wait_for(recorder.flush(), 5)
    [series] = await events(client)
    assert series["metadata"]["name"] == first["metadata"]["name"]
    assert series["series"]["count"] == 4
    assert MICRO_TIME.match(series["series"]["lastObservedTime"])
    assert series["type"] == "Warning" and series["eventTime"] == first["eventTime"]
    assert recorder.stats.created == 1 and recorder.stats.aggregated == 3

    recorder.record(POD_REF, "Warning", "Unschedulable", "gang of 3 does not fit")
    recorder.record(POD_REF, "Warning", "FailedScheduling", "another note")  # note differs
    await asyncio.wait_for(recorder.flush(), 5)
    by_note = {e["note"]: e for e in await events(client)}
    assert set(by_note) == {"0/3 nodes available", "gang of 3 does not fit", "another note"}
    assert by_note["gang of 3 does not fit"]["reason"] == "Unschedulable"
    assert by_note["gang of 3 does not fit"]["type"] == "Warning"
    assert "series" not in by_note["another note"]


async def test_repeats_before_the_first_write_create_one_event_with_a_series(
    client: KubeClient, recorder: EventRecorder
) -> None:
    for _ in range(5):
        recorder.record(POD_REF, "Normal", "Evict", "preempted")  # no await: nothing written yet
    await asyncio.wait_for(recorder.flush(), 5)
    [event] = await events(client)
    assert event["series"]["count"] == 5


async def test_cluster_scoped_objects_go_to_default_and_notes_are_truncated(
    client: KubeClient, recorder: EventRecorder
) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "research", "uid": "q-1"},
    }
    recorder.record(object_reference(queue), "Normal", "Opened", "é" * 2000, action="Open")
    await asyncio.wait_for(recorder.flush(), 5)
    [event] = await events(client, "default")
    assert event["regarding"] == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": "research",
        "uid": "q-1",
    }
    assert len(event["note"].encode()) <= 1024 and event["note"].endswith("...")


async def test_spam_filter_caps_new_events_per_object(client: KubeClient) -> None:
    rec = EventRecorder(client, "vulcan/controllers", "ctrl-0", spam_burst=3)
    task = asyncio.create_task(rec.run())
    try:
        for i in range(6):
            rec.record(POD_REF, "Normal", f"Reason{i}", "n")
        other = {**POD_REF, "name": "p2", "uid": "u-2"}
        rec.record(other, "Normal", "Reason0", "n")  # another object has its own budget
        rec.record(POD_REF, "Normal", "Reason0", "n")  # a repeat is a series, not a new event
        await asyncio.wait_for(rec.flush(), 5)
    finally:
        await rec.close()
        await task
    names = sorted((e["regarding"]["name"], e["reason"]) for e in await events(client))
    assert names == [("p1", "Reason0"), ("p1", "Reason1"), ("p1", "Reason2"), ("p2", "Reason0")]
    assert rec.stats.spam_dropped == 3


class _Permits:
    """Stands in for the recorder's token bucket: one write goes out per permit given."""

    qps = 50.0

    def __init__(self) -> None:
        self._permits = asyncio.Semaphore(0)
        self.waiting = 0

    async def acquire(self) -> None:
        self.waiting += 1
        try:
            await self._permits.acquire()
        finally:
            self.waiting -= 1

    def give(self, count: int) -> None:
        for _ in range(count):
            self._permits.release()


@pytest_asyncio.fixture
async def paced(client: KubeClient) -> AsyncIterator[tuple[EventRecorder, _Permits]]:
    """A recorder paced as the extender's is, its token bucket replaced by permits the test
    gives out one by one."""
    rec = EventRecorder(client, "vulcan", "vulcan-extender", qps=50, burst=100)
    assert (rec.limiter.qps, rec.limiter.burst) == (50, 100)
    permits = _Permits()
    rec.limiter = permits  # type: ignore[assignment]
    task = asyncio.create_task(rec.run())
    yield rec, permits
    permits.give(100)  # a failed assertion must not leave the workers waiting
    await asyncio.wait_for(rec.close(), 5)
    await asyncio.wait_for(task, 5)


def _admitted(rec: EventRecorder, index: int) -> None:
    rec.record({**POD_REF, "name": f"m{index}", "uid": f"u-m{index}"}, "Normal", "Admitted", "n")


async def test_writes_are_paced_by_the_event_qps_bucket(
    client: KubeClient, paced: tuple[EventRecorder, _Permits]
) -> None:
    rec, permits = paced
    for i in range(5):
        _admitted(rec, i)
    # Both workers wait for the bucket; nothing is written without a token.
    await until(lambda: permits.waiting == rec.workers)
    assert await events(client) == []
    permits.give(3)
    await until(lambda: rec.stats.created == 3 and permits.waiting == rec.workers)
    assert len(await events(client)) == 3
    # The rest wait in the queue, nothing lost: they go out as tokens come.
    permits.give(2)
    await asyncio.wait_for(rec.flush(), 5)
    written = sorted(e["regarding"]["name"] for e in await events(client))
    assert written == [f"m{i}" for i in range(5)]


async def _burst_behind_two_writes(
    rec: EventRecorder, permits: _Permits, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """m0..m<count-1> recorded into a cache of five, m0 and m1 being written already."""
    monkeypatch.setattr(events_module, "CACHE_SIZE", 5)
    _admitted(rec, 0)
    _admitted(rec, 1)
    await until(lambda: permits.waiting == rec.workers)  # m0 and m1 are being written
    for i in range(2, count):
        _admitted(rec, i)


async def test_events_pushed_out_before_their_write_are_counted(
    client: KubeClient, paced: tuple[EventRecorder, _Permits], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, permits = paced
    await _burst_behind_two_writes(rec, permits, monkeypatch, 8)
    # Eight recorded, five remembered: the three oldest were pushed out unwritten.
    assert rec.stats.overflowed == 3
    permits.give(100)
    await asyncio.wait_for(rec.flush(), 5)
    written = sorted(e["regarding"]["name"] for e in await events(client))
    assert "m2" not in written
    assert {f"m{i}" for i in range(3, 8)} <= set(written)


async def test_an_important_event_is_neither_queued_behind_nor_pushed_out_by_a_burst(
    client: KubeClient, paced: tuple[EventRecorder, _Permits], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gang's members say GangCommitted one by one, its PodGroup once: that one is written in
    its own lane, so the burst before it neither delays it nor pushes it out unwritten."""
    rec, permits = paced
    await _burst_behind_two_writes(rec, permits, monkeypatch, 12)
    group = {**POD_REF, "kind": "PodGroup", "name": "g1", "uid": "u-g1"}
    rec.record(group, "Normal", "GangCommitted", "whole", important=True)
    # The important lane's own worker waits with the group's event, behind no other.
    await until(lambda: permits.waiting == rec.workers + 1)
    # Twelve in the ordinary lane, five remembered: m0..m6 pushed out (m0 and m1 are written
    # all the same: their writes had begun).
    assert rec.stats.overflowed == 7
    permits.give(3)
    await until(lambda: rec.stats.created == 3)
    written = {(e["regarding"]["kind"], e["regarding"]["name"]) for e in await events(client)}
    assert written == {("Pod", "m0"), ("Pod", "m1"), ("PodGroup", "g1")}
    permits.give(100)
    await asyncio.wait_for(rec.flush(), 5)
    assert rec.stats.created == 8  # and m7..m11, the ordinary lane's last five


async def test_failed_writes_are_retried_then_dropped(
    client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = client.request
    failures = {"left": 2}

    async def flaky(method: str, path: str, **kwargs: Any) -> Any:
        if method != "GET" and "/events" in path and failures["left"] > 0:
            failures["left"] -= 1
            raise ApiError(503, "ServiceUnavailable", "try later")
        return await real(method, path, **kwargs)

    monkeypatch.setattr(client, "request", flaky)
    rec = EventRecorder(client, "c", "i", max_retries=3, retry_base=0.001)
    task = asyncio.create_task(rec.run())
    try:
        rec.record(POD_REF, "Normal", "Flaky", "eventually written")
        await asyncio.wait_for(rec.flush(), 5)
        assert [e["reason"] for e in await events(client)] == ["Flaky"]

        failures["left"] = 100  # the API server stays down: give up, do not hang
        rec.record(POD_REF, "Normal", "Lost", "never written")
        await asyncio.wait_for(rec.flush(), 5)
        assert rec.stats.failed == 1
        assert [e["reason"] for e in await events(client)] == ["Flaky"]
    finally:
        await rec.close()
        await task


async def test_record_rejects_unknown_types_and_micro_time_format() -> None:
    rec = EventRecorder(None, "c", "i")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        rec.record(POD_REF, "Error", "X", "y")
    assert micro_time(0) == "1970-01-01T00:00:00.000000Z"


# --------------------------------------------------------------------------- status


async def make_podgroup(client: KubeClient, name: str) -> None:
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": 2},
    }
    await client.create(PODGROUPS, group)


async def test_a_burst_of_submits_is_coalesced_into_at_most_two_writes(
    client: KubeClient, writer: StatusWriter
) -> None:
    await make_podgroup(client, "pg")
    for i in range(50):
        writer.submit(PODGROUPS, NS, "pg", {"phase": "Pending", "running": i}, subresource=False)
        await asyncio.sleep(0)  # let the workers run between submits
    await asyncio.wait_for(writer.flush(), 5)
    assert 1 <= writer.stats.writes <= 2
    assert writer.stats.coalesced >= 48
    stored = await client.get(PODGROUPS, "pg", NS)
    assert stored["status"] == {"phase": "Pending", "running": 49}


def patches_timed(client: KubeClient, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The loop times of the client's PATCH requests from now on, as they are sent."""
    loop = asyncio.get_running_loop()
    patch_times: list[float] = []
    real = client.request

    async def spy(method: str, path: str, **kwargs: Any) -> Any:
        if method == "PATCH":
            patch_times.append(loop.time())
        return await real(method, path, **kwargs)

    monkeypatch.setattr(client, "request", spy)
    return patch_times


async def test_writes_wait_for_the_interval_without_flush(
    client: KubeClient, writer: StatusWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make_podgroup(client, "pg")
    patch_times = patches_timed(client, monkeypatch)
    writer.submit(PODGROUPS, NS, "pg", {"phase": "Pending"}, subresource=False)
    while writer.stats.writes < 1:
        await asyncio.sleep(0.01)
    writer.submit(PODGROUPS, NS, "pg", {"phase": "Inqueue"}, subresource=False)
    while writer.stats.writes < 2:
        await asyncio.sleep(0.01)  # no flush: the writer gets there on its own
    assert len(patch_times) == 2
    assert patch_times[1] - patch_times[0] >= writer.interval  # but only after the interval
    assert (await client.request("GET", PODGROUPS.path(NS, "pg")))["status"] == {"phase": "Inqueue"}


async def test_an_urgent_status_does_not_wait_for_the_interval(client: KubeClient) -> None:
    await make_podgroup(client, "pg")
    slow = StatusWriter(client, interval=3600, retry_base=0.01)  # coalesced writes: an hour
    task = asyncio.create_task(slow.run())
    try:
        slow.submit(PODGROUPS, NS, "pg", {"phase": "Pending", "running": 0}, subresource=False)
        await until(lambda: slow.stats.writes >= 1)
        slow.submit(PODGROUPS, NS, "pg", {"phase": "Pending", "running": 1}, subresource=False)
        # A phase change goes out at once, carrying the latest status (the coalesced count).
        slow.submit(
            PODGROUPS, NS, "pg", {"phase": "Inqueue", "running": 1}, subresource=False, urgent=True
        )
        await until(lambda: slow.stats.writes >= 2, timeout=5)  # far less than the hour
        status = (await client.get(PODGROUPS, "pg", NS))["status"]
        assert status == {"phase": "Inqueue", "running": 1}
        assert slow.pending == 0
    finally:
        await asyncio.wait_for(slow.close(), 5)
        await asyncio.wait_for(task, 5)


async def test_a_submit_with_a_longer_interval_waits_it_unless_a_normal_one_replaces_it(
    client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiting gang's reason flipping back (extender.reason_flips) is submitted with a long
    interval; a change that matters, replacing it before it is written, keeps the writer's."""
    await make_podgroup(client, "pg")
    patch_times = patches_timed(client, monkeypatch)
    writer = StatusWriter(client, interval=0.2, retry_base=0.01)
    task = asyncio.create_task(writer.run())
    try:
        writer.submit(PODGROUPS, NS, "pg", {"phase": "Pending", "running": 0}, subresource=False)
        await until(lambda: writer.stats.writes >= 1)
        slow = {"phase": "Pending", "running": 1}
        writer.submit(PODGROUPS, NS, "pg", slow, subresource=False, interval=3600)
        # The slow change waits its hour (flush writes it only to end the test).
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(until(lambda: writer.stats.writes >= 2), 1.0)
        assert writer.pending == 1
        writer.submit(PODGROUPS, NS, "pg", {"phase": "Pending", "running": 2}, subresource=False)
        await until(lambda: writer.stats.writes >= 2, timeout=5)
        assert (await client.get(PODGROUPS, "pg", NS))["status"]["running"] == 2
        assert patch_times[1] - patch_times[0] >= writer.interval
    finally:
        await asyncio.wait_for(writer.close(), 5)
        await asyncio.wait_for(task, 5)


async def test_objects_are_written_independently(client: KubeClient, writer: StatusWriter) -> None:
    await make_podgroup(client, "a")
    await make_podgroup(client, "b")
    writer.submit(PODGROUPS, NS, "a", {"phase": "Running", "running": 2}, subresource=False)
    writer.submit(PODGROUPS, NS, "b", {"phase": "Inqueue"}, subresource=False)
    writer.submit(PODGROUPS, NS, "a", {"phase": "Running", "running": 3}, subresource=False)
    await asyncio.wait_for(writer.flush(), 5)
    assert (await client.get(PODGROUPS, "a", NS))["status"] == {"phase": "Running", "running": 3}
    assert (await client.get(PODGROUPS, "b", NS))["status"] == {"phase": "Inqueue"}
    assert writer.stats.writes == 2 and writer.stats.coalesced == 1


async def test_queue_status_goes_through_the_status_subresource(
    client: KubeClient, writer: StatusWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {"weight": 1},
    }
    await client.create(QUEUES, queue)
    paths: list[str] = []
    real = client.request

    async def spy(method: str, path: str, **kwargs: Any) -> Any:
        paths.append(f"{method} {path}")
        return await real(method, path, **kwargs)

    monkeypatch.setattr(client, "request", spy)
    status = {"state": "Open", "allocated": {"cpu": "2"}}
    writer.submit(QUEUES, None, "research", status, subresource=True)
    await asyncio.wait_for(writer.flush(), 5)
    assert paths == ["PATCH /apis/scheduling.volcano.sh/v1beta1/queues/research/status"]
    stored = await real("GET", QUEUES.path(None, "research"))
    assert stored["status"] == status and stored["spec"]["weight"] == 1


async def test_identical_status_is_not_rewritten_and_removed_fields_go_away(
    client: KubeClient, writer: StatusWriter
) -> None:
    await make_podgroup(client, "pg")
    writer.submit(PODGROUPS, NS, "pg", {"phase": "Running", "running": 2}, subresource=False)
    await asyncio.wait_for(writer.flush(), 5)
    rv = (await client.get(PODGROUPS, "pg", NS))["metadata"]["resourceVersion"]
    writer.submit(PODGROUPS, NS, "pg", {"running": 2, "phase": "Running"}, subresource=False)
    await asyncio.wait_for(writer.flush(), 5)
    assert writer.stats.writes == 1 and writer.stats.skipped == 1
    assert (await client.get(PODGROUPS, "pg", NS))["metadata"]["resourceVersion"] == rv
    # Go's omitempty drops a zero count: the field must disappear, not keep its old value.
    writer.submit(PODGROUPS, NS, "pg", {"phase": "Completed"}, subresource=False)
    await asyncio.wait_for(writer.flush(), 5)
    assert (await client.get(PODGROUPS, "pg", NS))["status"] == {"phase": "Completed"}


async def test_missing_objects_are_dropped_and_transient_errors_retried(
    client: KubeClient, writer: StatusWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer.submit(PODGROUPS, NS, "ghost", {"phase": "Pending"}, subresource=False)
    await asyncio.wait_for(writer.flush(), 5)
    assert writer.stats.dropped == 1 and writer.stats.writes == 0

    await make_podgroup(client, "pg")
    real = client.request
    failures = {"left": 2}

    async def flaky(method: str, path: str, **kwargs: Any) -> Any:
        if method == "PATCH" and failures["left"] > 0:
            failures["left"] -= 1
            raise ApiError(503, "ServiceUnavailable", "try later")
        return await real(method, path, **kwargs)

    monkeypatch.setattr(client, "request", flaky)
    writer.submit(PODGROUPS, NS, "pg", {"phase": "Inqueue"}, subresource=False)
    await asyncio.wait_for(writer.flush(), 5)
    assert writer.stats.writes == 1 and failures["left"] == 0
    assert (await real("GET", PODGROUPS.path(NS, "pg")))["status"] == {"phase": "Inqueue"}


KUBE_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


async def test_core_api_recorder_writes_what_client_go_record_writes(client: KubeClient) -> None:
    """Volcano's controllers record core/v1 Events: first/lastTimestamp, count, source."""
    clock = [1_700_000_000.0]
    rec = EventRecorder(
        client, "vulcan-controllers", "ctrl-0", api=events_module.CORE_API, clock=lambda: clock[0]
    )
    task = asyncio.create_task(rec.run())
    try:
        rec.record(POD_REF, "Normal", "Created", "made pod p1")
        await asyncio.wait_for(rec.flush(), 5)
        [event] = (await client.list(events_module.CORE_EVENTS, NS))["items"]
        assert event["apiVersion"] == "v1"
        assert event["involvedObject"] == POD_REF and event["message"] == "made pod p1"
        assert event["source"] == {"component": "vulcan-controllers"}
        assert event["firstTimestamp"] == event["lastTimestamp"] == "2023-11-14T22:13:20Z"
        assert event["count"] == 1 and event["eventTime"] is None
        assert "series" not in event
        clock[0] += 30
        rec.record(POD_REF, "Normal", "Created", "made pod p1")
        await asyncio.wait_for(rec.flush(), 5)
        [again] = (await client.list(events_module.CORE_EVENTS, NS))["items"]
        assert again["metadata"]["name"] == event["metadata"]["name"]
        assert again["count"] == 2 and again["lastTimestamp"] == "2023-11-14T22:13:50Z"
        assert again["firstTimestamp"] == "2023-11-14T22:13:20Z"
        # Through events.k8s.io/v1 the same object shows its deprecated* fields.
        [seen] = await events(client)
        assert seen["deprecatedLastTimestamp"] == "2023-11-14T22:13:50Z"
        assert seen["deprecatedCount"] == 2 and seen["note"] == "made pod p1"
        assert seen["reportingController"] == "vulcan-controllers"
        assert KUBE_TIME.match(seen["deprecatedFirstTimestamp"])
    finally:
        await asyncio.wait_for(rec.close(), 5)
        await asyncio.wait_for(task, 5)
