"""A controller key that keeps failing is retried with growing delays, then given up with a
Warning event on the object — the way vulcan's controllers use the work queue."""

from __future__ import annotations

import asyncio
import itertools

from kubernetes_asyncio.client import Configuration

from core.kube.client import EVENTS, ClientOptions, KubeClient
from core.kube.events import EventRecorder
from core.kube.workqueue import WorkQueue
from sim.apiserver.server import EmbeddedApiServer


async def test_give_up_records_a_warning_event() -> None:
    async with EmbeddedApiServer() as server:
        client = KubeClient(Configuration(host=server.url), ClientOptions(qps=0))
        recorder = EventRecorder(client, "vulcan-test", "instance-1")
        recorder_task = asyncio.create_task(recorder.run())
        queue: WorkQueue[str] = WorkQueue("jobs", base_delay=0.01, max_delay=0.05)
        attempts: list[float] = []
        gave_up = asyncio.Event()
        loop = asyncio.get_running_loop()

        async def handler(key: str) -> None:
            attempts.append(loop.time())
            raise RuntimeError("template job-x not found")

        def on_give_up(key: str, exc: BaseException) -> None:
            namespace, name = key.split("/")
            recorder.record(
                {
                    "kind": "Job",
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "namespace": namespace,
                    "name": name,
                    "uid": "u1",
                },
                "Warning",
                "SyncJobFailed",
                f"giving up on {key}: {exc}",
            )
            gave_up.set()

        workers = asyncio.create_task(
            queue.run_workers(2, handler, max_retries=4, on_give_up=on_give_up)
        )
        queue.add("default/train")
        await asyncio.wait_for(gave_up.wait(), 10)
        await recorder.flush()
        events = (await client.list(EVENTS, "default"))["items"]
        await queue.shutdown()
        workers.cancel()
        recorder_task.cancel()
        await asyncio.gather(workers, recorder_task, return_exceptions=True)
        await client.close()
    assert len(attempts) == 5  # the first try and 4 retries
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    # Retried with growing delays: 10, 20, 40 ms, then capped at 50 ms. Only lower bounds are
    # checked (a timer never fires early, but a loaded machine may fire it late).
    for gap, delay in zip(gaps, (0.01, 0.02, 0.04, 0.05), strict=True):
        assert gap >= delay * 0.9, (gaps, delay)
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "SyncJobFailed")]
    assert events[0]["regarding"]["name"] == "train"
    assert "template job-x not found" in events[0]["note"]
