"""The kube-scheduler stand-in's extender client against a real HTTP server: connections are
pooled as Go's default transport pools them (net/http's Transport)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import pytest_asyncio
from aiohttp import web

from core.kube.go_transport import GO_MAX_IDLE_CONNS_PER_HOST
from core.serving import start_app
from sim.scheduler.config import ExtenderConfig
from sim.scheduler.extenders import ExtenderError, HTTPExtender
from tests.helpers import until
from tests.unit.test_sim_scheduler import node, pod


class HoldingBinder:
    """An extender whose bind verb answers only when released, as a gang's barrier does;
    it counts the connections the requests came on."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = 0
        self.connections: set[tuple[str, int]] = set()  # client address and port

    async def bind(self, request: web.Request) -> web.Response:
        assert request.transport is not None
        self.connections.add(request.transport.get_extra_info("peername"))
        self.waiting += 1
        await self.release.wait()
        self.waiting -= 1
        return web.json_response({})


@pytest_asyncio.fixture
async def binder() -> AsyncIterator[tuple[HoldingBinder, str]]:
    server = HoldingBinder()
    app = web.Application()
    app.router.add_post("/v1/bind", server.bind)
    runner, port = await start_app(app, "127.0.0.1", 0, shutdown_timeout=1.0)
    yield server, f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


async def test_held_binds_each_open_a_connection_and_only_two_stay_idle(
    binder: tuple[HoldingBinder, str],
) -> None:
    server, prefix = binder
    extender = HTTPExtender(ExtenderConfig(url_prefix=prefix, bind_verb="bind"))
    try:
        burst = 6
        binds = [
            asyncio.create_task(extender.bind(pod(f"member-{i}"), "node-1")) for i in range(burst)
        ]
        await until(lambda: server.waiting == burst)
        assert len(server.connections) == burst  # no cap on open connections
        server.release.set()
        await asyncio.wait_for(asyncio.gather(*binds), 5)
        # Go keeps two idle per host and closes the rest once their answers are read.
        assert extender.transport.idle() == GO_MAX_IDLE_CONNS_PER_HOST
        # The next burst opens new connections again, beyond the two kept.
        second = [
            asyncio.create_task(extender.bind(pod(f"other-{i}"), "node-1")) for i in range(burst)
        ]
        await asyncio.wait_for(asyncio.gather(*second), 5)
        assert len(server.connections) == 2 * burst - GO_MAX_IDLE_CONNS_PER_HOST
        # Every call's latency is kept for benchmarks, as the scheduler waited for it.
        latencies = extender.latencies["bind"]
        assert len(latencies) == 2 * burst and all(0 < t < 5 for t in latencies)
        assert "filter" not in extender.latencies
    finally:
        await extender.close()


async def test_prioritize_answers_are_read_in_any_casing_and_scores_must_be_integers() -> None:
    """Go matches the HostPriority fields case-insensitively and refuses a non-integer score."""
    answers = [
        [{"Host": "node-1", "Score": 7}, {"host": "node-2", "SCORE": 3}],
        [{"Host": "node-1", "Score": True}],
    ]

    async def prioritize(request: web.Request) -> web.Response:
        return web.json_response(answers.pop(0))

    app = web.Application()
    app.router.add_post("/v1/prioritize", prioritize)
    runner, port = await start_app(app, "127.0.0.1", 0, shutdown_timeout=1.0)
    config = ExtenderConfig(
        url_prefix=f"http://127.0.0.1:{port}/v1", prioritize_verb="prioritize", weight=1
    )
    extender = HTTPExtender(config)
    try:
        assert await extender.prioritize(pod("p"), []) == {"node-1": 7, "node-2": 3}
        with pytest.raises(ExtenderError, match="cannot unmarshal number True"):
            await extender.prioritize(pod("p"), [])
    finally:
        await extender.close()
        await runner.cleanup()


async def test_filter_and_prioritize_send_the_args_go_would_encode() -> None:
    """The stand-in builds ExtenderArgs from parts (the pod encoded once per cycle, filter's
    passing names reused by prioritize); every body is still exactly the JSON of the args."""
    received: list[tuple[str, bytes]] = []
    keep: list[list[str]] = [["n1", "n2", "n3"], ["n1", "n3"]]  # all pass, then n2 fails

    async def verb(request: web.Request) -> web.Response:
        raw = await request.read()
        received.append((request.path, raw))
        if request.path.endswith("/prioritize"):
            return web.json_response([{"Host": "n3", "Score": 2}])
        names = keep.pop(0)
        failed = {"n2": "too full"} if len(names) < 3 else {}
        return web.json_response({"NodeNames": names, "FailedNodes": failed, "Error": ""})

    app = web.Application()
    app.router.add_post("/v1/filter", verb)
    app.router.add_post("/v1/prioritize", verb)
    runner, port = await start_app(app, "127.0.0.1", 0, shutdown_timeout=1.0)
    config = ExtenderConfig(
        url_prefix=f"http://127.0.0.1:{port}/v1",
        filter_verb="filter",
        prioritize_verb="prioritize",
        weight=1,
        node_cache_capable=True,
    )
    extender = HTTPExtender(config)
    nodes = [node("n1"), node("n2"), node("n3")]
    first, second = pod("first"), pod("second")
    try:
        passing, failed, _ = await extender.filter(first, nodes)
        assert [n.name for n in passing] == ["n1", "n2", "n3"] and failed == {}
        assert await extender.prioritize(first, passing) == {"n3": 2}
        passing, failed, _ = await extender.filter(second, nodes)
        assert [n.name for n in passing] == ["n1", "n3"] and failed == {"n2": "too full"}
        assert await extender.prioritize(second, passing) == {"n3": 2}
    finally:
        await extender.close()
        await runner.cleanup()

    def args(p: Any, names: list[str]) -> bytes:
        return orjson.dumps({"Pod": p.raw, "Nodes": None, "NodeNames": names})

    assert received == [
        ("/v1/filter", args(first, ["n1", "n2", "n3"])),
        ("/v1/prioritize", args(first, ["n1", "n2", "n3"])),
        ("/v1/filter", args(second, ["n1", "n2", "n3"])),
        ("/v1/prioritize", args(second, ["n1", "n3"])),
    ]
