"""The client: kubeconfig loading, retries with backoff on 429/5xx/connection loss, 4xx surfaced
at once, raw binding, and an informer using watch-list."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio
from aiohttp import web
from kubernetes_asyncio.client import Configuration

from core.kube.client import LEASES, NODES, PODS, ApiError, ClientOptions, KubeClient
from core.kube.informer import Informer
from core.records import PodRecord
from sim.apiserver.server import EmbeddedApiServer


class Flaky:
    """A server answering from a script of statuses, counting calls."""

    def __init__(self, script: list[int], retry_after: str | None = None) -> None:
        self.script = script
        self.calls = 0
        self.retry_after = retry_after
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []

    async def handle(self, request: web.Request) -> web.Response:
        status = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        self.requests.append(
            (request.method, request.path, dict(request.headers), await request.read())
        )
        if status == 200:
            return web.json_response({"kind": "Node", "metadata": {"name": "n"}})
        headers = {"Retry-After": self.retry_after} if self.retry_after else {}
        return web.json_response(
            {
                "kind": "Status",
                "status": "Failure",
                "reason": "Boom",
                "message": "scripted",
                "code": status,
            },
            status=status,
            headers=headers,
        )


@pytest_asyncio.fixture
async def flaky_server() -> AsyncIterator[tuple[str, Flaky]]:
    flaky = Flaky([200])
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", flaky.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", flaky
    await runner.cleanup()


def fast_client(url: str, retries: int = 5) -> KubeClient:
    options = ClientOptions(qps=0, max_retries=retries, retry_initial=0.001, retry_max=0.01)
    return KubeClient(Configuration(host=url), options)


async def test_retries_5xx_and_429_then_succeeds(flaky_server: tuple[str, Flaky]) -> None:
    url, flaky = flaky_server
    flaky.script = [503, 500, 429, 200]
    async with fast_client(url) as client:
        node = await client.get(NODES, "n")
    assert node["metadata"]["name"] == "n"
    assert flaky.calls == 4


async def test_gives_up_after_max_retries(flaky_server: tuple[str, Flaky]) -> None:
    url, flaky = flaky_server
    flaky.script = [503]
    async with fast_client(url, retries=3) as client:
        with pytest.raises(ApiError) as exc:
            await client.get(NODES, "n")
    assert exc.value.status == 503 and flaky.calls == 4


@pytest.mark.parametrize("status", [400, 403, 404, 409, 422])
async def test_client_errors_are_not_retried(flaky_server: tuple[str, Flaky], status: int) -> None:
    url, flaky = flaky_server
    flaky.script = [status, 200]
    async with fast_client(url) as client:
        with pytest.raises(ApiError) as exc:
            await client.get(NODES, "n")
    assert exc.value.status == status and exc.value.reason == "Boom"
    assert flaky.calls == 1


async def test_a_lean_post_retries_like_any_request_and_carries_the_token(
    flaky_server: tuple[str, Flaky],
) -> None:
    """The Binding's raw POST (core.kube.go_transport): the same retries on 5xx/429, the
    bearer token and the JSON body, and a 4xx surfaced at once as the same ApiError."""
    url, flaky = flaky_server
    flaky.script = [503, 429, 200]
    configuration = Configuration(host=url, api_key={"BearerToken": "sekret"})
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    options = ClientOptions(qps=0, max_retries=5, retry_initial=0.001, retry_max=0.01)
    async with KubeClient(configuration, options) as client:
        await client.bind_pod("ns", "p", "node-1", uid="u-1")
        assert flaky.calls == 3
        method, path, headers, body = flaky.requests[-1]
        assert (method, path) == ("POST", "/api/v1/namespaces/ns/pods/p/binding")
        assert headers["Authorization"] == "Bearer sekret"
        assert headers["Content-Type"] == "application/json"
        assert headers["User-Agent"] == "vulcan"  # the client names itself on the raw path too
        assert orjson.loads(body) == {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
        }
        flaky.script, flaky.calls = [409, 200], 0
        with pytest.raises(ApiError) as exc:
            await client.bind_pod("ns", "p", "node-2")
        assert exc.value.conflict and exc.value.reason == "Boom" and flaky.calls == 1


async def test_a_lean_post_to_nothing_is_a_retryable_connection_error() -> None:
    async with EmbeddedApiServer() as server:
        port = server.port
    async with fast_client(f"http://127.0.0.1:{port}", retries=2) as client:
        with pytest.raises(ApiError) as exc:
            await client.bind_pod("ns", "p", "node-1")
    assert exc.value.status == 0 and exc.value.retryable


async def test_connection_loss_is_retried() -> None:
    async with EmbeddedApiServer() as server:
        port = server.port
    # Nothing listens on the port now: every attempt fails to connect, then the error surfaces.
    async with fast_client(f"http://127.0.0.1:{port}", retries=2) as client:
        with pytest.raises(ApiError) as exc:
            await client.get(NODES, "n")
    assert exc.value.status == 0 and exc.value.retryable


async def test_kubeconfig_binding_and_watch_list(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    async with EmbeddedApiServer(kubeconfig_out=kubeconfig) as server:
        client = await KubeClient.connect(kubeconfig=str(kubeconfig), qps=0)
        assert client.host == server.url
        pod = {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
        created = await client.create(PODS, pod)
        await client.bind_pod(
            "default",
            "p",
            "node-1",
            uid=created["metadata"]["uid"],
            annotations={"vulcan.sh/why": "test"},
        )
        with pytest.raises(ApiError) as exc:
            await client.bind_pod("default", "p", "node-2")
        assert exc.value.conflict
        informer = Informer(client, PODS, PodRecord, watch_list=True)
        seen_q = asyncio.Event()
        informer.add_handlers(on_add=lambda r: seen_q.set() if r.key == "default/q" else None)
        task = asyncio.create_task(informer.run())
        await informer.wait_synced(5)
        assert informer.items["default/p"].node == "node-1"
        await client.create(PODS, {**pod, "metadata": {"name": "q", "namespace": "default"}})
        await asyncio.wait_for(seen_q.wait(), 5)
        assert informer.relists == 1  # the initial state came as a watch-list stream
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


def _raw_methods(client: KubeClient) -> list[bytes]:
    """The methods of the requests `client` sends on its raw transport from now on."""
    raw = client._lean
    assert raw is not None
    sent: list[bytes] = []
    post = raw.post

    async def counted(*args: Any, **kwargs: Any) -> tuple[int, bytes]:
        sent.append(kwargs.get("method", args[5] if len(args) > 5 else b"POST"))
        return await post(*args, **kwargs)

    raw.post = counted  # type: ignore[method-assign]
    return sent


async def test_a_lean_patch_writes_like_aiohttps_and_its_precondition_holds(
    tmp_path: Path,
) -> None:
    """An admitted member's patch on the raw transport: merged as aiohttp's would be, and
    refused with a conflict when its resourceVersion is stale."""
    kubeconfig = tmp_path / "kubeconfig"
    async with EmbeddedApiServer(kubeconfig_out=kubeconfig) as server:
        client = await KubeClient.connect(kubeconfig=str(kubeconfig), qps=0)
        sent = _raw_methods(client)
        pod = {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "image": "i"}],
                "schedulingGates": [{"name": "a"}, {"name": "b"}],
            },
        }
        created = await client.create(PODS, pod)
        rv = created["metadata"]["resourceVersion"]
        patch = {
            "metadata": {"annotations": {"vulcan.sh/x": "1"}, "resourceVersion": rv},
            "spec": {"schedulingGates": [{"name": "b"}]},
        }
        patched = await client.patch(PODS, "p", patch, "default", lean=True)
        assert patched["metadata"]["annotations"] == {"vulcan.sh/x": "1"}
        assert patched["spec"]["schedulingGates"] == [{"name": "b"}]
        stored = await client.get(PODS, "p", "default")
        assert stored["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
        with pytest.raises(ApiError) as exc:
            await client.patch(PODS, "p", patch, "default", lean=True)  # rv stale now
        assert exc.value.conflict
        assert sent == [b"PATCH", b"PATCH"]  # both on the raw transport
        assert server.url == client.host
        await client.close()


async def test_a_lean_create_makes_the_object_and_a_second_one_conflicts(
    tmp_path: Path,
) -> None:
    """A Volcano Job's pod created on the raw transport: made as aiohttp's create would make
    it, and made twice it is AlreadyExists (a conflict, which the job controller ignores)."""
    kubeconfig = tmp_path / "kubeconfig"
    async with EmbeddedApiServer(kubeconfig_out=kubeconfig):
        client = await KubeClient.connect(kubeconfig=str(kubeconfig), qps=0)
        sent = _raw_methods(client)
        pod = {
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
        created = await client.create(PODS, pod, lean=True)
        stored = await client.get(PODS, "p", "default")
        assert stored["metadata"]["uid"] == created["metadata"]["uid"]
        assert stored["metadata"]["labels"] == {"app": "a"}
        with pytest.raises(ApiError) as exc:
            await client.create(PODS, pod, lean=True)
        assert exc.value.conflict
        assert sent == [b"POST", b"POST"]  # both on the raw transport
        await client.close()


def test_client_flags() -> None:
    import argparse

    from core.kube.client import add_client_flags, options_from_args

    parser = argparse.ArgumentParser()
    add_client_flags(parser)
    options = options_from_args(
        parser.parse_args(
            ["--master", "http://127.0.0.1:1", "--kube-api-qps", "200", "--kube-api-burst", "400"]
        )
    )
    assert (options.master, options.qps, options.burst) == ("http://127.0.0.1:1", 200.0, 400)


async def test_requests_in_flight_are_bounded_by_the_connections_option() -> None:
    """ClientOptions.connections caps the keep-alive connections, so the requests in flight;
    the extender takes 250 so a gang's Bindings go out together."""
    async with EmbeddedApiServer() as server:
        default = await KubeClient.connect(master=server.url, qps=0)
        wide = await KubeClient.connect(master=server.url, qps=0, connections=250)
        try:
            assert default.typed.rest_client.pool_manager.connector.limit == 100
            assert wide.typed.rest_client.pool_manager.connector.limit == 250
            assert wide._session.connector is wide.typed.rest_client.pool_manager.connector
            assert (await wide.list(NODES))["items"] == []
        finally:
            await default.close()
            await wide.close()


async def test_lean_posts_in_flight_are_bounded_by_the_connections_option() -> None:
    """A gang's released binds go out on at most `connections` connections at once, reused,
    as aiohttp's connector bounds every other request (not one new connection per member)."""
    state = {"in_flight": 0, "most": 0}
    gate = asyncio.Event()
    transports: set[int] = set()

    async def binding(request: web.Request) -> web.Response:
        transports.add(id(request.transport))
        state["in_flight"] += 1
        state["most"] = max(state["most"], state["in_flight"])
        if state["in_flight"] >= 3:
            gate.set()
        await gate.wait()
        state["in_flight"] -= 1
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/ns/pods/{name}/binding", binding)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    options = ClientOptions(qps=0, connections=3)
    try:
        async with KubeClient(Configuration(host=f"http://127.0.0.1:{port}"), options) as client:
            await asyncio.gather(*(client.bind_pod("ns", f"p-{i}", "node-1") for i in range(12)))
    finally:
        await runner.cleanup()
    assert state["most"] == 3
    assert len(transports) <= 3


async def test_each_part_of_vulcan_names_itself_as_the_field_manager_of_its_writes(
    apiserver: EmbeddedApiServer,
) -> None:
    """The API server names a write's field manager after its User-Agent's prefix: what
    `kubectl get --show-managed-fields` shows is vulcan's part, not "Python"."""
    import argparse

    from core.kube.client import add_client_flags, options_from_args

    parser = argparse.ArgumentParser()
    add_client_flags(parser)
    args = parser.parse_args(["--master", apiserver.url])
    async with await KubeClient.connect(options_from_args(args, "extender")) as client:
        body = {
            "metadata": {"name": "lease", "namespace": "default"},
            "spec": {"holderIdentity": "a"},
        }
        created = await client.create(LEASES, body, "default")
    [entry] = created["metadata"]["managedFields"]
    assert entry["manager"] == "vulcan-extender"
