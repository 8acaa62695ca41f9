"""The stand-in's Go-like HTTP transport against raw servers that answer the ways real ones do:
keep-alive, `Connection: close`, a body ended by closing, gzip, a server that closes an idle
connection, one that never answers, one that is not there."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from core.kube.go_transport import GoTransport, TransportError
from tests.helpers import until

Answer = Callable[[bytes], bytes | None]  # request head and body -> raw response (None: hang)


class RawServer:
    """Reads one request at a time (Content-Length bodies) and writes what `answer` returns."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = asyncio.Event()  # a client connection ended
        self.close_after_answer = False
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                response = self.answer(request)
                if response is None:
                    await reader.read()  # hang until the client goes away
                    return
                writer.write(response)
                await writer.drain()
                if self.close_after_answer or b"connection: close" in response.lower():
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.closed.set()


def ok(body: bytes, *extra: bytes) -> bytes:
    headers = b"".join(h + b"\r\n" for h in extra)
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), headers, body)


@pytest_asyncio.fixture
async def transport() -> AsyncIterator[GoTransport]:
    pool = GoTransport()
    yield pool
    await pool.close()


async def served(answer: Answer) -> RawServer:
    server = RawServer(answer)
    await server.start()
    return server


async def test_sends_what_go_sends_and_reuses_the_connection(transport: GoTransport) -> None:
    server = await served(lambda _: ok(b'{"a":1}'))
    url = f"http://127.0.0.1:{server.port}/prefix/v1/filter"
    for _ in range(3):
        assert await transport.post(url, b"{}", b"application/json", 5) == (200, b'{"a":1}')
    assert server.connections == 1 and transport.idle() == 1
    head = server.requests[0].decode()
    assert head.startswith("POST /prefix/v1/filter HTTP/1.1\r\n")
    for header in (
        f"Host: 127.0.0.1:{server.port}",
        "User-Agent: Go-http-client/1.1",
        "Content-Length: 2",
        "Content-Type: application/json",
        "Accept-Encoding: gzip",
    ):
        assert f"\r\n{header}\r\n" in head
    assert server.requests[0].endswith(b"\r\n\r\n{}")
    await server.stop()


async def test_every_path_of_one_server_shares_its_connection_and_extra_headers() -> None:
    """A Binding's URL is new for every pod: each path and query goes out as asked, on the
    one kept connection, with the transport's and the request's extra header lines."""
    pool = GoTransport(headers=b"Authorization: Bearer t\r\n")
    server = await served(lambda _: ok(b"{}"))
    base = f"http://127.0.0.1:{server.port}"
    paths = [f"/api/v1/namespaces/ns/pods/p-{i}/binding" for i in range(50)] + ["/x?a=1&b=2"]
    for path in paths:
        assert await pool.post(base + path, b"{}", b"application/json", 5, b"X-One: 1\r\n") == (
            200,
            b"{}",
        )
    assert [r.split(b" ", 2)[1].decode() for r in server.requests] == paths
    assert all(
        b"\r\nAuthorization: Bearer t\r\n" in r and b"\r\nX-One: 1\r\n" in r
        for r in server.requests
    )
    assert server.connections == 1
    assert len(pool._origins) == 1  # remembered per server, not per URL (no growth per pod)
    await pool.close()
    await server.stop()


async def test_status_and_gzip_body_are_read(transport: GoTransport) -> None:
    packed = gzip.compress(b'{"Error":"no"}')
    answer = ok(packed, b"Content-Encoding: gzip").replace(b"200 OK", b"500 Internal Server Error")
    server = await served(lambda _: answer)
    url = f"http://127.0.0.1:{server.port}/v1/bind"
    assert await transport.post(url, b"{}", b"application/json", 5) == (500, b'{"Error":"no"}')
    await server.stop()


async def test_connection_close_and_a_body_ended_by_eof_are_not_reused(
    transport: GoTransport,
) -> None:
    answers = [
        ok(b"[]", b"Connection: close"),
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n[1]",  # no length: ends when closed
    ]
    server = await served(lambda _: answers.pop(0))
    url = f"http://127.0.0.1:{server.port}/v1/prioritize"
    assert await transport.post(url, b"{}", b"application/json", 5) == (200, b"[]")
    assert await transport.post(url, b"{}", b"application/json", 5) == (200, b"[1]")
    assert server.connections == 2 and transport.idle() == 0
    await server.stop()


async def test_a_connection_the_server_closed_while_idle_is_not_used_again(
    transport: GoTransport,
) -> None:
    server = await served(lambda _: ok(b"{}"))
    server.close_after_answer = True  # as a server's idle timeout does, without saying so
    url = f"http://127.0.0.1:{server.port}/v1/filter"
    assert await transport.post(url, b"{}", b"application/json", 5) == (200, b"{}")
    await asyncio.wait_for(server.closed.wait(), 5)
    await until(lambda: transport.idle() == 0)
    assert await transport.post(url, b"{}", b"application/json", 5) == (200, b"{}")
    assert server.connections == 2
    await server.stop()


async def test_a_deadline_abandons_the_request_and_closes_its_connection(
    transport: GoTransport,
) -> None:
    server = await served(lambda _: None)  # never answers
    url = f"http://127.0.0.1:{server.port}/v1/bind"
    with pytest.raises(TimeoutError):
        await transport.post(url, b"{}", b"application/json", 0.2)
    # The server learns the answer is no longer wanted: its connection ends.
    await asyncio.wait_for(server.closed.wait(), 5)
    assert transport.idle() == 0
    await server.stop()


async def test_no_server_and_a_malformed_answer_are_transport_errors(
    transport: GoTransport,
) -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    with pytest.raises(TransportError, match=f"dial tcp 127.0.0.1:{port}"):
        await transport.post(f"http://127.0.0.1:{port}/v1/filter", b"{}", b"x", 5)
    server = await served(lambda _: b"NOT HTTP AT ALL\r\n\r\n")
    with pytest.raises(TransportError, match="malformed HTTP response"):
        await transport.post(f"http://127.0.0.1:{server.port}/v1/filter", b"{}", b"x", 5)
    with pytest.raises(TransportError, match="unsupported protocol scheme"):
        await transport.post("ftp://127.0.0.1/v1/filter", b"{}", b"x", 5)
    await server.stop()
