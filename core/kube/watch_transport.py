"""A watch over HTTP/1.1 without aiohttp: each read's complete lines handed over in one batch.

Why not aiohttp's client: a watch event went through its StreamReader and three async
generators (chunks, lines, the client's stream) before the informer saw it, a task switch per
read and generator hops per line, which under a stream of pod events cost the extender more than
decoding them. Here the socket's read is parsed (httptools: chunked framing), split into lines
and handed to a synchronous `sink` from the reader's own callback; the informer decodes and
applies the batch there. The socket is read by core.kube.watch_socket (which gathers the reads
of a busy watch); a slow sink simply delays the next read, and TCP holds the rest back at the
server.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from collections.abc import Callable
from urllib.parse import urlsplit

import httptools

from core.kube.watch_socket import SocketReader, connect

Sink = Callable[[list[bytes]], None]

# Events a busy watch brings within this of each other are read (and woken for) together: a
# burst of pods costs a wakeup per few events, not per event, for at most this much delay.
READ_WINDOW = 0.002


class WatchFailed(Exception):
    """The watch ended below HTTP (refused, reset, cut mid-event, silent too long), or its
    answer was not a 200 (`status`, `body`: what the server said)."""

    def __init__(self, message: str, status: int = 0, body: bytes = b"") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class _WatchProtocol:
    """One watch request on its own connection (never reused: a watch runs for minutes)."""

    def __init__(self, request: bytes, sink: Sink, read_timeout: float) -> None:
        self.request = request
        self.sink = sink
        self.read_timeout = read_timeout
        self.transport: SocketReader | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.status = 0
        self.error_body: list[bytes] = []
        self.parts: list[bytes] = []  # a line begun in earlier reads
        self.batch: list[bytes] = []
        self.gzip: zlib._Decompress | None = None
        self.eof_delimited = True  # until a Content-Length or chunked says otherwise
        self.headers_done = False
        self.complete = False
        self.last_read = time.monotonic()
        self.timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ the reader's callbacks

    def connection_made(self, transport: SocketReader) -> None:
        self.transport = transport
        transport.write(self.request)
        self.timer = asyncio.get_running_loop().call_later(self.read_timeout, self._check_idle)

    def data_received(self, data: bytes) -> None:
        if self.done.done():
            return
        self.last_read = time.monotonic()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._finish(WatchFailed(f"malformed HTTP response: {exc}"))
            return
        batch = self.batch
        if batch:
            self.batch = []
            try:
                self.sink(batch)
            except BaseException as exc:  # the sink's own error ends the watch, as raised
                self._finish(exc)
                return
        if self.complete:
            self._finish(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.done.done():
            return
        if self.headers_done and self.eof_delimited and self.status != 200:
            self._finish(WatchFailed("watch refused", self.status, b"".join(self.error_body)))
            return
        if self.headers_done and self.eof_delimited:
            # No length and no chunks: the body is whatever came before the server closed.
            last = b"".join(self.parts)
            self.parts = []
            try:
                if last.strip():
                    self.sink([last])
            except BaseException as error:
                self._finish(error)
                return
            self._finish(None)
            return
        self._finish(WatchFailed(f"watch connection lost: {exc or 'EOF'}"))

    # ------------------------------------------------------------------ httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name in (b"content-length", b"transfer-encoding"):
            self.eof_delimited = False
        elif name == b"content-encoding" and value.strip().lower() == b"gzip":
            self.gzip = zlib.decompressobj(wbits=31)

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if self.gzip is not None:
            body = self.gzip.decompress(body)
        if self.status != 200:
            self.error_body.append(body)
            return
        if b"\n" not in body:
            self.parts.append(body)
            return
        lines = body.split(b"\n")
        if self.parts:
            self.parts.append(lines[0])
            lines[0] = b"".join(self.parts)
            self.parts = []
        tail = lines.pop()
        if tail:
            self.parts.append(tail)
        self.batch.extend(line for line in lines if line and not line.isspace())

    def on_message_complete(self) -> None:
        if self.status != 200:
            self._finish(WatchFailed("watch refused", self.status, b"".join(self.error_body)))
            return
        last = b"".join(self.parts)
        self.parts = []
        if last.strip():
            self.batch.append(last)
        # The server ended the watch (its timeoutSeconds): data_received delivers the batch
        # once the parser returns, then the watch is done.
        self.complete = True

    # ------------------------------------------------------------------------ helpers

    def _check_idle(self) -> None:
        idle = time.monotonic() - self.last_read
        if idle >= self.read_timeout:
            self._finish(WatchFailed(f"watch silent for {idle:.0f}s"))
            return
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.read_timeout - idle, self._check_idle)

    def _finish(self, exc: BaseException | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if not self.done.done():
            if exc is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(exc)
        self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


async def watch(
    url: str,
    headers: bytes,
    sink: Sink,
    *,
    read_timeout: float,
    connect_timeout: float,
    ssl_context: ssl.SSLContext | None = None,
    window: float = READ_WINDOW,
) -> None:
    """GET `url` (a watch) and hand each read's complete lines to `sink` until the server ends
    the answer. Raises WatchFailed (or whatever `sink` raised, the watch then closed).
    `headers`: header lines, each ending in CRLF (Authorization, Accept, User-Agent);
    `window`: reads within it of the last one wait for it to pass (core.kube.watch_socket)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WatchFailed(f"unsupported URL {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    request = b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (
        target.encode(),
        parts.netloc.encode(),
        headers,
    )
    context = None
    if parts.scheme == "https":
        context = ssl_context or ssl.create_default_context()
    protocol = _WatchProtocol(request, sink, read_timeout)
    try:
        async with asyncio.timeout(connect_timeout):
            await connect(parts.hostname, port, context, protocol, window)
    except TimeoutError as exc:  # (an OSError too: first)
        raise WatchFailed(f"dial tcp {parts.hostname}:{port}: timed out") from exc
    except OSError as exc:
        raise WatchFailed(f"dial tcp {parts.hostname}:{port}: {exc.strerror or exc}") from exc
    try:
        await protocol.done
    finally:
        protocol.close()  # cancelled (or failed): the server learns the watch is over
