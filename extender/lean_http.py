"""The extender's listening socket: kube-scheduler's `POST /v1/<verb>` calls answered on raw
HTTP/1.1 (httptools, one `transport.write` per answer), every other request (`/metrics`,
`/healthz`, `/readyz`, `/debug/...`, a verb with the wrong method) served by the aiohttp
application as before.

Why: under the throughput benchmark aiohttp's request and response machinery (stream readers,
request and response objects, header multidicts, the payload writer) cost more of the
extender's CPU than the verbs themselves, three times per pod. The verbs need none of it: a
JSON body in, a JSON body out, status 200 (or 400 for a malformed request).

A connection is served here until one of its requests is not a verb; then that request and the
rest of the connection are handed to aiohttp's own protocol (a scraper's or a probe's
connection never carries a verb, kube-scheduler's never carries anything else). As aiohttp with
`handler_cancellation`, a verb whose client went away is cancelled, so an abandoned bind creates
no Binding; answers go out in request order. A verb that answers at once (a tuple, not an
awaitable: filter with nothing to wait for) is written from the parser's callback, without a
task: one task per call was ~8% of the extender's own CPU under the throughput benchmark.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import cast

import httptools
from aiohttp import web

log = logging.getLogger("vulcan.extender.http")

# body -> (status, JSON body), now or once awaited: a verb that needs no I/O (filter,
# prioritize, preempt) answers in the same callback that parsed its request, with no task.
Result = tuple[int, bytes]
Answer = Callable[[bytes], Result | Awaitable[Result]]

MAX_BODY = 256 * 1024 * 1024  # as the aiohttp application's client_max_size
_REASONS = {200: b"OK", 400: b"Bad Request", 413: b"Payload Too Large", 500: b"Server Error"}


class _HandOff(Exception):
    """Raised inside the parser's callback to stop it at a request aiohttp must serve."""


class _Connection(asyncio.Protocol):
    def __init__(self, site: LeanSite) -> None:
        self.site = site
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self._url = b""
        self._body: list[bytes] = []
        self._size = 0
        self._answer: Answer | None = None
        self._raw: list[bytes] = []  # the current request's bytes so far (for a hand-off)
        self._chunk = b""
        self._in_message = False
        self._completed_in_chunk = False  # a request ended earlier in the chunk being parsed
        self._pipelined = False  # the current request began mid-chunk, behind another
        self._expect_continue = False
        # Answers not written yet, in request order: tasks, or futures already done behind one.
        self._pending: collections.deque[tuple[asyncio.Future[Result], bool]] = collections.deque()

    # ------------------------------------------------------------------ asyncio

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.site.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.site.connections.discard(self)
        for task, _ in self._pending:
            task.cancel()  # the client is gone: nothing it asked for is done now
        self._pending.clear()

    def data_received(self, data: bytes) -> None:
        self._completed_in_chunk = False
        if self._in_message:
            self._raw.append(data)
        self._chunk = data
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _HandOff):
                self._hand_off()
            else:
                log.exception("extender HTTP connection failed")
                self._fail(500, b"internal error")
        except httptools.HttpParserError as exc:
            self._fail(400, f"malformed request: {exc}".encode())

    # ------------------------------------------------------------------ httptools

    def on_message_begin(self) -> None:
        self._in_message = True
        self._pipelined = self._completed_in_chunk
        self._raw = [self._chunk]
        self._url = b""
        self._body = []
        self._size = 0
        self._expect_continue = False

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"expect" and value.lower() == b"100-continue":
            self._expect_continue = True

    def on_headers_complete(self) -> None:
        path = self._url.split(b"?", 1)[0]
        answer = self.site.verbs.get(path) if self.parser.get_method() == b"POST" else None
        if answer is None:
            raise _HandOff
        self._answer = answer
        if self._expect_continue and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > MAX_BODY:
            raise httptools.HttpParserError("request body too large")
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._in_message = False
        self._completed_in_chunk = True
        self._raw = []
        answer, self._answer = self._answer, None
        assert answer is not None
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body = []
        keep_alive = self.parser.should_keep_alive()
        loop = asyncio.get_running_loop()
        try:
            result = answer(body)
        except Exception as exc:  # as a task's exception: logged, answered 500
            failed: asyncio.Future[Result] = loop.create_future()
            failed.set_exception(exc)
            self._queue(failed, keep_alive)
            return
        if isinstance(result, tuple):
            if not self._pending:
                self._write(*result, keep_alive)
                return
            done: asyncio.Future[Result] = loop.create_future()
            done.set_result(result)
            self._queue(done, keep_alive)  # written after the answers before it
            return
        task = (
            loop.create_task(result)
            if isinstance(result, Coroutine)
            else asyncio.ensure_future(result)
        )
        self._pending.append((task, keep_alive))
        self.site.tasks.add(task)
        task.add_done_callback(self._answered)

    # ------------------------------------------------------------------ answers

    def _queue(self, done: asyncio.Future[Result], keep_alive: bool) -> None:
        self._pending.append((done, keep_alive))
        self._answered(done)

    def _answered(self, task: asyncio.Future[Result]) -> None:
        self.site.tasks.discard(task)
        while self._pending and self._pending[0][0].done():
            done, keep_alive = self._pending.popleft()
            if done.cancelled():
                continue
            error = done.exception()
            if error is not None:
                log.error("extender verb failed", exc_info=error)
                self._write(500, b'{"Error":"internal error"}', keep_alive)
            else:
                self._write(*done.result(), keep_alive)

    def _write(self, status: int, body: bytes, keep_alive: bool = True) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
            % (
                status,
                _REASONS.get(status, b"Error"),
                len(body),
                b"" if keep_alive else b"Connection: close\r\n",
                body,
            )
        )
        if not keep_alive:
            transport.close()

    def _fail(self, status: int, message: bytes) -> None:
        self._write(status, b'{"Error":%s}' % _json_string(message), keep_alive=False)

    def _hand_off(self) -> None:
        """Give the connection, from the request being parsed on, to aiohttp's protocol."""
        transport = self.transport
        if transport is None:
            return
        if self._pipelined or self._pending:
            # Its bytes cannot be told apart from the answered requests' before it.
            self._fail(400, b"a pipelined request to a path other than /v1/<verb>")
            return
        self.site.connections.discard(self)
        server = self.site.runner.server
        assert server is not None
        handler = server()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        handler.data_received(b"".join(self._raw))
        self._raw = []

    def close_if_idle(self) -> None:
        if not self._pending and not self._in_message and self.transport is not None:
            self.transport.close()


def _json_string(text: bytes) -> bytes:
    return b'"%s"' % text.replace(b"\\", b"\\\\").replace(b'"', b'\\"')


class LeanSite(web.BaseSite):
    """A TCP site of an aiohttp runner whose `POST` paths in `verbs` are answered on raw HTTP;
    `runner.cleanup()` stops it like any site, waiting up to `drain_timeout` for answers in
    flight (held binds) before cancelling them."""

    def __init__(
        self,
        runner: web.BaseRunner,
        verbs: dict[bytes, Answer],
        host: str,
        port: int,
        *,
        backlog: int = 1024,
        drain_timeout: float = 5.0,
    ) -> None:
        super().__init__(runner, backlog=backlog)
        self.runner = runner
        self.verbs = verbs
        self._host = host
        self._port = port
        self.drain_timeout = drain_timeout
        self.connections: set[_Connection] = set()
        self.tasks: set[asyncio.Future[Result]] = set()

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        sockets = self._server.sockets if self._server is not None else ()
        return int(sockets[0].getsockname()[1]) if sockets else self._port

    async def start(self) -> None:
        await super().start()
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _Connection(self),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=True,
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()  # no new connections
        for connection in list(self.connections):
            connection.close_if_idle()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=self.drain_timeout)
        for task in list(self.tasks):
            task.cancel()
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.close()
        with contextlib.suppress(RuntimeError):
            await super().stop()
