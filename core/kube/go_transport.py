"""Go's default `http.Transport`, as kube-scheduler's extender client has it
(its HTTPExtender over Go's net/http): HTTP/1.1 keep-alive, no cap on open connections, at most
two kept idle per host (net/http's DefaultMaxIdleConnsPerHost), `Accept-Encoding: gzip` sent and
a gzip answer decoded transparently, a whole-request deadline (`httpTimeout`), and a connection
that a request abandoned (deadline, cancellation) closed rather than reused.

Why not aiohttp's client: its request and response objects cost ~90 µs of CPU per call here,
against ~25 µs for this one (both on uvloop, httptools parsing the answer). Go's transport costs
a fraction of either, and with three calls per pod the stand-in's own client overhead, not the
extender's, became a large part of what the throughput benchmark measured. The bytes on the wire
are what Go sends.

It lives in core because the extender posts its Bindings on it too (`KubeClient.request(...,
lean=True)`): a Binding per pod is the extender's only per-pod write, and aiohttp's client was
most of its cost.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from typing import cast
from urllib.parse import urlsplit

import httptools

# net/http's DefaultMaxIdleConnsPerHost: kube-scheduler's extender transport sets no other.
GO_MAX_IDLE_CONNS_PER_HOST = 2

_Host = tuple[str, str, int]  # scheme, host, port


class TransportError(Exception):
    """The request failed below HTTP: refused, reset, closed before the answer, unparsable."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one request at a time (Go does not pipeline)."""

    def __init__(self, pool: GoTransport, host: _Host) -> None:
        self.pool = pool
        self.host = host
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answer: asyncio.Future[tuple[int, bytes]] | None = None
        self.closed = False
        self._body: list[bytes] = []
        self._headers_done = False
        self._eof_delimited = True  # until a Content-Length or chunked says otherwise
        self._gzip = False
        self.keep_alive = False  # of the last answer (llhttp only knows until it completes)

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses, but have its methods.)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"malformed HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._forget(self)
        if self.answer is not None and not self.answer.done():
            if self._headers_done and self._eof_delimited:
                # No length given: the body is whatever came before the server closed.
                self.keep_alive = False
                self._complete()
            else:
                self._fail(TransportError(str(exc) if exc else "EOF"))

    # ------------------------------------------------------------------ httptools callbacks

    def on_message_begin(self) -> None:
        self._body = []
        self._headers_done = False
        self._eof_delimited = True
        self._gzip = False

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name in (b"content-length", b"transfer-encoding"):
            self._eof_delimited = False
        elif name == b"content-encoding":
            self._gzip = value.strip().lower() == b"gzip"

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        self._complete()

    # ------------------------------------------------------------------------ helpers

    def _complete(self) -> None:
        answer, self.answer = self.answer, None
        if answer is None or answer.done():
            return
        body = b"".join(self._body)
        self._body = []
        if self._gzip:
            try:
                body = zlib.decompress(body, wbits=31)
            except zlib.error as exc:
                answer.set_exception(TransportError(f"gzip: {exc}"))
                return
        answer.set_result((self.parser.get_status_code(), body))

    def _fail(self, exc: Exception) -> None:
        answer, self.answer = self.answer, None
        if answer is not None and not answer.done():
            answer.set_exception(exc)

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None
        self.answer = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.answer

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class GoTransport:
    """A pool of connections per host, used as Go's `http.Client{Transport: DefaultTransport}`
    with a `Timeout`: `post()` returns (status, body) or raises TimeoutError / TransportError."""

    def __init__(
        self,
        max_idle_per_host: int = GO_MAX_IDLE_CONNS_PER_HOST,
        *,
        headers: bytes = b"",
        ssl_context: ssl.SSLContext | None = None,
        user_agent: bytes = b"Go-http-client/1.1",
    ) -> None:
        """`headers`: extra header lines sent with every request (each ending in CRLF, e.g. an
        Authorization); `ssl_context`: for https (default: verified as Go's default is);
        `user_agent`: Go's own unless the caller names itself."""
        self.max_idle_per_host = max_idle_per_host
        self._headers = headers
        self._user_agent = user_agent
        self._ssl = ssl_context
        self._idle: dict[_Host, list[_Connection]] = {}
        self._origins: dict[str, tuple[_Host, bytes]] = {}  # scheme://netloc -> host, netloc
        self._open: set[_Connection] = set()

    def idle(self) -> int:
        return sum(len(conns) for conns in self._idle.values())

    async def post(
        self,
        url: str,
        body: bytes,
        content_type: bytes,
        timeout: float,
        headers: bytes = b"",
        method: bytes = b"POST",
    ) -> tuple[int, bytes]:
        """`headers`: more header lines for this request only (each ending in CRLF);
        `method`: another that sends a body (PATCH, PUT) on the same path."""
        host, head = self._target(url, method)
        request = b"".join(
            (
                head,
                self._headers,
                headers,
                b"Content-Length: %d\r\nContent-Type: %s\r\nAccept-Encoding: gzip\r\n\r\n"
                % (len(body), content_type),
                body,
            )
        )
        connection: _Connection | None = None
        try:
            async with asyncio.timeout(timeout):
                connection = await self._connection(host)
                status, answer = await connection.send(request)
        except BaseException:
            # Abandoned mid-request (deadline, cancellation, error): Go closes the connection,
            # which is how the server learns the answer is no longer wanted.
            if connection is not None:
                connection.close()
            raise
        if connection.keep_alive:
            self._release(connection)
        else:
            connection.close()
        return status, answer

    async def close(self) -> None:
        for connection in list(self._open):
            connection.close()
        self._idle.clear()

    # ------------------------------------------------------------------------ pool

    def _target(self, url: str, method: bytes = b"POST") -> tuple[_Host, bytes]:
        """(scheme, host, port) and the request's head (request line, Host, User-Agent).
        Origins are remembered, not URLs: a Binding's URL is new for every pod."""
        slash = url.find("/", url.find("://") + 3) if "://" in url else -1
        origin, path = (url[:slash], url[slash:]) if slash >= 0 else (url, "/")
        known = self._origins.get(origin)
        if known is None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise TransportError(f"unsupported protocol scheme {parts.scheme!r}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            known = ((parts.scheme, parts.hostname, port), parts.netloc.encode())
            self._origins[origin] = known
        host, netloc = known
        path = path.split("#", 1)[0]
        return host, b"%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n" % (
            method,
            path.encode(),
            netloc,
            self._user_agent,
        )

    async def _connection(self, host: _Host) -> _Connection:
        idle = self._idle.get(host)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        scheme, hostname, port = host
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                lambda: _Connection(self, host),
                hostname,
                port,
                ssl=(self._ssl or ssl.create_default_context()) if scheme == "https" else None,
            )
        except OSError as exc:
            raise TransportError(f"dial tcp {hostname}:{port}: {exc.strerror or exc}") from exc
        self._open.add(connection)
        return connection

    def _release(self, connection: _Connection) -> None:
        idle = self._idle.setdefault(connection.host, [])
        if connection.closed or len(idle) >= self.max_idle_per_host:
            connection.close()
            return
        idle.append(connection)

    def _forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        idle = self._idle.get(connection.host)
        if idle and connection in idle:
            idle.remove(connection)
