"""extender.lean_http: the verbs answered on raw HTTP/1.1, everything else by the aiohttp
application, over real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from core.serving import start_app
from extender.lean_http import LeanSite


@dataclass
class Verbs:
    """`/v1/echo` answers its body; `/v1/held` waits for `release` (as a held gang bind)."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    held_started: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: list[str] = field(default_factory=list)
    was_cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    async def echo(self, body: bytes) -> tuple[int, bytes]:
        return 200, b'{"echo":%s}' % body

    async def held(self, body: bytes) -> tuple[int, bytes]:
        self.held_started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.append(body.decode())
            self.was_cancelled.set()
            raise
        return 200, b'{"held":%s}' % body

    async def bad(self, body: bytes) -> tuple[int, bytes]:
        return 400, b'{"Error":"no"}'

    def now(self, body: bytes) -> tuple[int, bytes]:
        """Answers at once, not awaitable (as filter with nothing to wait for)."""
        return 200, b'{"now":%s}' % body

    def broken(self, body: bytes) -> tuple[int, bytes]:
        raise RuntimeError("a bug in a verb")


@dataclass
class Served:
    url: str
    port: int
    runner: web.AppRunner
    verbs: Verbs


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    verbs = Verbs()
    app = web.Application()

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text="metrics here")

    async def echo_route(request: web.Request) -> web.Response:
        status, body = await verbs.echo(await request.read())
        return web.Response(body=body, status=status, content_type="application/json")

    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/echo", echo_route)
    routes: dict[bytes, Any] = {
        b"/v1/echo": verbs.echo,
        b"/v1/held": verbs.held,
        b"/v1/bad": verbs.bad,
        b"/v1/now": verbs.now,
        b"/v1/broken": verbs.broken,
    }
    runner, port = await start_app(
        app,
        "127.0.0.1",
        0,
        shutdown_timeout=5.0,
        site=lambda r: LeanSite(r, routes, "127.0.0.1", 0, drain_timeout=5.0),
    )
    try:
        yield Served(f"http://127.0.0.1:{port}", port, runner, verbs)
    finally:
        verbs.release.set()
        await runner.cleanup()


def request(path: str, body: bytes = b"1", method: str = "POST") -> bytes:
    return b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
        method.encode(),
        path.encode(),
        len(body),
        body,
    )


async def read_answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head.split(b"\r\n", 1)[0], await reader.readexactly(length)


async def test_verbs_and_other_paths_share_one_keep_alive_connection(served: Served) -> None:
    connector = aiohttp.TCPConnector(limit=1)  # every request on the same connection
    async with aiohttp.ClientSession(connector=connector) as http:
        async with http.post(f"{served.url}/v1/echo", data=b"[1,2]") as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "application/json"
            assert await response.read() == b'{"echo":[1,2]}'
        async with http.post(f"{served.url}/v1/bad", data=b"{}") as response:
            assert (response.status, await response.read()) == (400, b'{"Error":"no"}')
        # Not a verb: handed to the aiohttp application, on the same connection.
        async with http.get(f"{served.url}/metrics") as response:
            assert (response.status, await response.text()) == (200, "metrics here")
        # The connection is aiohttp's now, and its routes still answer the verb.
        async with http.post(f"{served.url}/v1/echo", data=b"3") as response:
            assert await response.read() == b'{"echo":3}'
        async with http.get(f"{served.url}/nowhere") as response:
            assert response.status == 404


async def test_pipelined_verbs_are_answered_in_request_order(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(request("/v1/held", b"1") + request("/v1/echo", b"2"))
    await served.verbs.held_started.wait()
    served.verbs.release.set()
    assert await read_answer(reader) == (b"HTTP/1.1 200 OK", b'{"held":1}')
    assert await read_answer(reader) == (b"HTTP/1.1 200 OK", b'{"echo":2}')
    writer.close()


async def test_an_answer_given_at_once_waits_behind_one_still_awaited(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(request("/v1/now", b"1"))
    assert await read_answer(reader) == (b"HTTP/1.1 200 OK", b'{"now":1}')
    # Pipelined behind a held verb: written after it, in request order.
    writer.write(request("/v1/held", b"2") + request("/v1/now", b"3") + request("/v1/now", b"4"))
    await served.verbs.held_started.wait()
    other_reader, other_writer = await asyncio.open_connection("127.0.0.1", served.port)
    other_writer.write(request("/v1/now", b"5"))  # another connection is not held up
    assert await read_answer(other_reader) == (b"HTTP/1.1 200 OK", b'{"now":5}')
    served.verbs.release.set()
    assert await read_answer(reader) == (b"HTTP/1.1 200 OK", b'{"held":2}')
    assert await read_answer(reader) == (b"HTTP/1.1 200 OK", b'{"now":3}')
    assert await read_answer(reader) == (b"HTTP/1.1 200 OK", b'{"now":4}')
    writer.close()
    other_writer.close()


async def test_a_verb_that_fails_at_once_is_answered_500_and_the_connection_kept(
    served: Served,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(request("/v1/broken", b"1") + request("/v1/now", b"2"))
    assert await read_answer(reader) == (
        b"HTTP/1.1 500 Server Error",
        b'{"Error":"internal error"}',
    )
    assert await read_answer(reader) == (b"HTTP/1.1 200 OK", b'{"now":2}')
    writer.close()


async def test_a_verb_whose_client_went_away_is_cancelled(served: Served) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(request("/v1/held", b"7"))
    await served.verbs.held_started.wait()
    writer.close()
    await writer.wait_closed()
    await asyncio.wait_for(served.verbs.was_cancelled.wait(), 10)
    assert served.verbs.cancelled == ["7"]


async def test_a_malformed_request_gets_400_and_the_connection_closes(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"POST /v1/echo HTTP/1.1\r\nContent-Length: nope\r\n\r\n")
    status, body = await read_answer(reader)
    assert status == b"HTTP/1.1 400 Bad Request"
    assert body.startswith(b'{"Error":"malformed request')
    assert await reader.read() == b""  # closed
    writer.close()


async def test_stopping_waits_for_a_verb_in_flight(served: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(request("/v1/held", b"9"))
    await served.verbs.held_started.wait()
    stopping = asyncio.create_task(served.runner.cleanup())
    await asyncio.sleep(0)
    assert not stopping.done()
    served.verbs.release.set()
    assert await read_answer(reader) == (b"HTTP/1.1 200 OK", b'{"held":9}')
    await stopping
    assert served.verbs.cancelled == []
    writer.close()
