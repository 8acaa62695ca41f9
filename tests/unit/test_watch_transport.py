"""core.kube.watch_transport: a watch's answer, however the server frames and splits it, reaches
the sink as whole lines; a non-200, a cut, silence and the sink's own error end the watch."""

from __future__ import annotations

import asyncio
import gzip
import ssl
from collections.abc import AsyncIterator, Callable

import pytest

from core.certs import write_serving_certs
from core.kube.watch_transport import WatchFailed, watch

CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Script:
    """A server answering each request with `pieces`, written one by one (then, unless
    `hold`, closing)."""

    def __init__(self, pieces: list[bytes], hold: bool = False) -> None:
        self.pieces = pieces
        self.hold = hold
        self.requests: list[bytes] = []
        self.closed = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.requests.append(await reader.readuntil(b"\r\n\r\n"))
        for piece in self.pieces:
            writer.write(piece)
            await writer.drain()
        if self.hold:
            await reader.read()  # until the client closes
            self.closed.set()
        writer.close()


async def serve(script: Script, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    server = await asyncio.start_server(script.handle, "127.0.0.1", 0, ssl=tls)
    scheme = "https" if tls else "http"
    async with server:
        port = server.sockets[0].getsockname()[1]
        yield f"{scheme}://127.0.0.1:{port}/api/v1/pods?watch=true"


async def run(
    script: Script,
    sink: Callable[[list[bytes]], None] | None = None,
    read_timeout: float = 30,
    tls: tuple[ssl.SSLContext, ssl.SSLContext] | None = None,
) -> list[list[bytes]]:
    """The batches `script` reaches the sink in; `tls`: (the server's, the client's)."""
    batches: list[list[bytes]] = []
    async for url in serve(script, tls[0] if tls else None):
        await watch(
            url,
            b"Authorization: Bearer t\r\n",
            sink or batches.append,
            read_timeout=read_timeout,
            connect_timeout=5,
            ssl_context=tls[1] if tls else None,
        )
    return batches


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server's TLS context and a client's that trusts it (and checks its name)."""
    certs = write_serving_certs(tmp_path_factory.mktemp("certs"))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(certs.cert_file, certs.key_file)
    client = ssl.create_default_context(cadata=certs.ca_pem.decode())
    return server, client


def lines(batches: list[list[bytes]]) -> list[bytes]:
    return [line for batch in batches for line in batch]


async def test_lines_split_anywhere_by_chunks_and_reads_arrive_whole() -> None:
    body = b'{"a":1}\n\n{"b":2}\n{"c":' + b"3" * 100_000 + b"}\n" + b'{"d":4}'
    pieces = [body[i : i + 5] for i in range(0, 40, 5)] + [body[40:70_000], body[70_000:]]
    script = Script([CHUNKED, *(chunk(p) for p in pieces), b"0\r\n\r\n"])
    got = lines(await run(script))
    assert got == [b'{"a":1}', b'{"b":2}', b'{"c":' + b"3" * 100_000 + b"}", b'{"d":4}']
    request = script.requests[0]
    assert request.startswith(b"GET /api/v1/pods?watch=true HTTP/1.1\r\n")
    assert b"Authorization: Bearer t\r\n" in request


async def test_a_gzipped_answer_is_decoded() -> None:
    packed = gzip.compress(b'{"a":1}\n{"b":2}\n')
    head = CHUNKED.replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n")
    script = Script([head, chunk(packed[:10]), chunk(packed[10:]), b"0\r\n\r\n"])
    assert lines(await run(script)) == [b'{"a":1}', b'{"b":2}']


async def test_an_answer_without_length_ends_with_the_connection() -> None:
    head = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
    assert lines(await run(Script([head, b'{"a":1}\n{"b"', b":2}"]))) == [b'{"a":1}', b'{"b":2}']


async def test_a_refusal_carries_its_status_and_body() -> None:
    body = b'{"kind":"Status","code":403,"reason":"Forbidden"}'
    head = b"HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\n\r\n" % len(body)
    with pytest.raises(WatchFailed) as exc:
        await run(Script([head, body], hold=True))
    assert (exc.value.status, exc.value.body) == (403, body)


async def test_a_refusal_without_length_ends_with_the_connection() -> None:
    with pytest.raises(WatchFailed) as exc:
        await run(
            Script([b"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\n", b"boom"])
        )
    assert (exc.value.status, exc.value.body) == (500, b"boom")


async def test_a_cut_inside_a_chunk_fails_and_the_partial_line_is_not_delivered() -> None:
    batches: list[list[bytes]] = []
    script = Script([CHUNKED, chunk(b'{"a":1}\n'), b'20\r\n{"b":'])
    with pytest.raises(WatchFailed, match="lost"):
        await run(script, batches.append)
    assert lines(batches) == [b'{"a":1}']


async def test_a_silent_server_times_out_and_is_closed() -> None:
    script = Script([CHUNKED, chunk(b'{"a":1}\n')], hold=True)
    with pytest.raises(WatchFailed, match="silent"):
        await run(script, read_timeout=0.2)
    await asyncio.wait_for(script.closed.wait(), 10)


async def test_the_sinks_error_ends_the_watch_and_closes_it() -> None:
    def sink(_lines: list[bytes]) -> None:
        raise ValueError("bad event")

    script = Script([CHUNKED, chunk(b'{"a":1}\n')], hold=True)
    with pytest.raises(ValueError, match="bad event"):
        await run(script, sink)
    await asyncio.wait_for(script.closed.wait(), 10)


async def test_nothing_listening_is_a_watch_failure() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(WatchFailed, match="dial tcp"):
        await watch(
            f"http://127.0.0.1:{port}/x", b"", lambda _: None, read_timeout=5, connect_timeout=5
        )


async def test_over_tls_events_in_quick_succession_arrive_whole_and_in_order(
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    events = [b'{"n":%d,"pad":"%s"}' % (n, b"x" * (n * 37 % 3000)) for n in range(500)]
    body = b"".join(event + b"\n" for event in events)
    pieces = [body[i : i + 1500] for i in range(0, len(body), 1500)]
    script = Script([CHUNKED, *(chunk(p) for p in pieces), b"0\r\n\r\n"])
    assert lines(await run(script, tls=tls)) == events


async def test_over_tls_a_server_not_trusted_is_refused(
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    script = Script([CHUNKED, b"0\r\n\r\n"])
    with pytest.raises(WatchFailed, match="CERTIFICATE_VERIFY_FAILED"):
        await run(script, tls=(tls[0], ssl.create_default_context()))


async def test_over_tls_a_cut_inside_a_chunk_fails(
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    batches: list[list[bytes]] = []
    script = Script([CHUNKED, chunk(b'{"a":1}\n'), b'20\r\n{"b":'])
    with pytest.raises(WatchFailed, match="lost"):
        await run(script, batches.append, tls=tls)
    assert lines(batches) == [b'{"a":1}']
