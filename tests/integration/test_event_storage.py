"""Events are stored once and served by core/v1 and events.k8s.io/v1 alike: what vulcan's
recorder writes (events.k8s.io/v1) is what `kubectl get events` and `kubectl describe pod` show,
and what is written through core/v1 is read, selected, watched, patched and deleted through
events.k8s.io/v1."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio
from kubernetes_asyncio.client import Configuration

from core.kube.client import KubeClient
from core.kube.events import EventRecorder, object_reference
from sim.apiserver.server import EmbeddedApiServer, write_kubeconfig

KUBECTL = shutil.which("kubectl")
CORE = "/api/v1/namespaces/default/events"
NEW = "/apis/events.k8s.io/v1/namespaces/default/events"
POD = {"metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


async def call(
    server: EmbeddedApiServer, method: str, path: str, body: Any = None, content_type: str = ""
) -> tuple[int, Any]:
    headers = {"Content-Type": content_type} if content_type else {}
    data = orjson.dumps(body) if body is not None else None
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, server.url + path, data=data, headers=headers) as response,
    ):
        return response.status, orjson.loads(await response.read())


@pytest_asyncio.fixture
async def pod(apiserver: EmbeddedApiServer) -> dict[str, Any]:
    status, body = await call(apiserver, "POST", "/api/v1/namespaces/default/pods", POD)
    assert status == 201
    return dict(body)


def new_event(name: str, pod: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "eventTime": "2026-01-02T03:04:05.000006Z",
        "reportingController": "vulcan/extender",
        "reportingInstance": "ext-0",
        "action": "Binding",
        "reason": "GangAdmitted",
        "regarding": object_reference(pod),
        "note": "gang admitted",
        "type": "Normal",
        **extra,
    }


def core_event(name: str, pod: dict[str, Any]) -> dict[str, Any]:
    ref = object_reference(pod)
    return {
        "metadata": {"name": name},
        "involvedObject": ref,
        "reason": "Pulled",
        "message": "image pulled",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:04:09Z",
        "count": 2,
        "type": "Normal",
    }


async def test_one_event_two_apis(apiserver: EmbeddedApiServer, pod: dict[str, Any]) -> None:
    status, created = await call(apiserver, "POST", NEW, new_event("p1.new", pod))
    assert status == 201 and created["apiVersion"] == "events.k8s.io/v1"
    status, as_core = await call(apiserver, "GET", f"{CORE}/p1.new")
    assert status == 200 and as_core["apiVersion"] == "v1"
    assert as_core["metadata"] == created["metadata"]  # same object, same resourceVersion
    assert as_core["involvedObject"] == created["regarding"]
    assert as_core["message"] == "gang admitted"
    assert as_core["reportingComponent"] == "vulcan/extender"
    assert as_core["eventTime"] == created["eventTime"] and as_core["firstTimestamp"] is None

    status, _ = await call(apiserver, "POST", CORE, core_event("p1.core", pod))
    assert status == 201
    status, as_new = await call(apiserver, "GET", f"{NEW}/p1.core")
    assert status == 200 and as_new["kind"] == "Event"
    assert as_new["note"] == "image pulled" and as_new["deprecatedCount"] == 2
    assert as_new["deprecatedSource"] == {"component": "kubelet", "host": "node-1"}
    assert as_new["deprecatedLastTimestamp"] == "2026-01-02T03:04:09Z"
    assert as_new["eventTime"] is None and "message" not in as_new

    for path, selector in ((CORE, "involvedObject.name=p1"), (NEW, "regarding.name=p1")):
        status, listed = await call(apiserver, "GET", f"{path}?fieldSelector={selector}")
        assert status == 200
        assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["p1.core", "p1.new"]
    status, listed = await call(
        apiserver, "GET", f"{NEW}?fieldSelector=reportingController=kubelet"
    )
    assert [i["metadata"]["name"] for i in listed["items"]] == []  # source, not reporting
    status, listed = await call(apiserver, "GET", f"{CORE}?fieldSelector=regarding.name=p1")
    assert status == 400  # each API has its own field names
    status, listed = await call(apiserver, "GET", f"{NEW}?limit=1")
    assert listed["kind"] == "EventList" and listed["apiVersion"] == "events.k8s.io/v1"
    assert len(listed["items"]) == 1 and listed["metadata"]["continue"]
    assert "note" in listed["items"][0]

    # A series update through the new API (what client-go's recorder sends) and a delete
    # through the old one.
    patch = {"series": {"count": 2, "lastObservedTime": "2026-01-02T03:05:00.000000Z"}}
    status, patched = await call(
        apiserver, "PATCH", f"{NEW}/p1.new", patch, "application/strategic-merge-patch+json"
    )
    assert status == 200 and patched["series"]["count"] == 2 and patched["note"]
    status, as_core = await call(apiserver, "GET", f"{CORE}/p1.new")
    assert as_core["series"] == patch["series"] and as_core["message"] == "gang admitted"
    status, _ = await call(apiserver, "DELETE", f"{CORE}/p1.new")
    assert status == 200
    assert (await call(apiserver, "GET", f"{NEW}/p1.new"))[0] == 404


async def test_watches_of_either_api_see_writes_of_the_other(
    apiserver: EmbeddedApiServer, pod: dict[str, Any]
) -> None:
    seen: dict[str, list[dict[str, Any]]] = {CORE: [], NEW: []}
    started = asyncio.Event()

    async def watch(session: aiohttp.ClientSession, path: str) -> None:
        async with session.get(f"{apiserver.url}{path}?watch=true&allowWatchBookmarks=true") as r:
            started.set()
            async for line in r.content:
                event = orjson.loads(line)
                if event["type"] != "BOOKMARK":
                    seen[path].append(event)
                if len(seen[path]) == 2:
                    return

    async with aiohttp.ClientSession() as session:
        watchers = [asyncio.create_task(watch(session, path)) for path in (CORE, NEW)]
        await started.wait()
        await call(apiserver, "POST", NEW, new_event("a.new", pod))
        await call(apiserver, "POST", CORE, core_event("b.core", pod))
        await asyncio.wait_for(asyncio.gather(*watchers), 10)
    assert [e["object"]["apiVersion"] for e in seen[CORE]] == ["v1", "v1"]
    assert [e["object"]["apiVersion"] for e in seen[NEW]] == ["events.k8s.io/v1"] * 2
    assert seen[CORE][0]["object"]["message"] == "gang admitted"
    assert seen[NEW][1]["object"]["note"] == "image pulled"
    assert [e["object"]["metadata"]["resourceVersion"] for e in seen[CORE]] == [
        e["object"]["metadata"]["resourceVersion"] for e in seen[NEW]
    ]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_shows_what_the_recorder_wrote(
    apiserver: EmbeddedApiServer, pod: dict[str, Any], tmp_path: Path
) -> None:
    async with KubeClient(Configuration(host=apiserver.url)) as client:
        recorder = EventRecorder(client, "vulcan/extender", "ext-0")
        task = asyncio.create_task(recorder.run())
        recorder.record(
            object_reference({**pod, "apiVersion": "v1", "kind": "Pod"}),
            "Warning",
            "GangTimedOut",
            "gang default/p1 timed out",
        )
        await asyncio.wait_for(recorder.flush(), 5)
        await recorder.close()
        await task
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, apiserver.url)

    async def kubectl(*args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            KUBECTL or "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "--cache-dir",
            str(tmp_path / "cache"),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "KUBECTL_COMMAND_HEADERS": "false"},
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        return out.decode()

    listed = (await kubectl("get", "events")).splitlines()
    assert listed[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert listed[1].split()[1:] == [
        "Warning",
        "GangTimedOut",
        "pod/p1",
        "gang",
        "default/p1",
        "timed",
        "out",
    ]
    described = await kubectl("describe", "pod", "p1")
    events = described.split("Events:", 1)[1].splitlines()
    assert events[1].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert events[3].split()[:2] == ["Warning", "GangTimedOut"]
    assert events[3].split()[-5:] == ["vulcan/extender", "gang", "default/p1", "timed", "out"]
