"""The load generator of the API-server benchmark: raw aiohttp sends (all at once with a
concurrency, or paced open-loop), timed GETs, a watch fan-out round, and the wall time and CPU
(Usage) each phase cost the server and this client."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import aiohttp
import orjson

from bench.apiserver_common import JSON, MERGE_PATCH, BenchError, ServerProcess
from bench.apiserver_objects import PodRef

# ------------------------------------------------------------------------ load generator


@dataclass(slots=True)
class Usage:
    """Wall time and CPU of the server and of this load generator over one phase, to tell which
    side was the bottleneck."""

    wall: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0

    def __str__(self) -> str:
        wall = self.wall or 1e-9
        return (
            f"server CPU {100 * self.server_cpu / wall:.0f}%, "
            f"load generator CPU {100 * self.client_cpu / wall:.0f}%"
        )


@contextlib.contextmanager
def measured(server: ServerProcess, usage: Usage) -> Iterator[Usage]:
    """Adds the phase's wall time and CPU to `usage` (so one Usage can sum several slices)."""
    wall, server_cpu, client_cpu = time.perf_counter(), server.cpu_seconds(), time.process_time()
    yield usage
    usage.wall += time.perf_counter() - wall
    usage.server_cpu += server.cpu_seconds() - server_cpu
    usage.client_cpu += time.process_time() - client_cpu


def new_session(limit: int) -> aiohttp.ClientSession:
    # One keep-alive connection per in-flight request; no total timeout (lists and watches are
    # long), but a stalled read fails the run instead of hanging it.
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=300),
    )


async def send_all(
    session: aiohttp.ClientSession,
    base: str,
    method: str,
    requests: Sequence[tuple[str, bytes]],
    *,
    concurrency: int,
    expect: int,
    content_type: str = JSON,
) -> None:
    """Send every request with `concurrency` in flight; each response body is read (the
    connection is reused) and its status checked."""
    pending = iter(requests)
    headers = {"Content-Type": content_type}

    async def worker() -> None:
        for path, body in pending:  # shared iterator: each request goes out once
            async with session.request(method, base + path, data=body, headers=headers) as r:
                answer = await r.read()
                if r.status != expect:
                    raise BenchError(f"{method} {path}: {r.status} {answer[:300]!r}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


@dataclass(slots=True)
class Paced:
    achieved_rate: float
    max_lag_ms: float


async def send_paced(
    session: aiohttp.ClientSession,
    base: str,
    requests: Sequence[tuple[str, bytes]],
    *,
    rate: float,
    concurrency: int,
) -> Paced:
    """POST request i at start + i/rate (an open-loop schedule: a slow server shows up as lag
    and a lower achieved rate, not as a politely slower client)."""
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05
    next_index = 0
    max_lag = 0.0
    headers = {"Content-Type": JSON}

    async def worker() -> None:
        nonlocal next_index, max_lag
        while next_index < len(requests):
            index = next_index
            next_index += 1
            due = start + index / rate
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            max_lag = max(max_lag, loop.time() - due)
            path, body = requests[index]
            async with session.post(base + path, data=body, headers=headers) as r:
                answer = await r.read()
                if r.status != 201:
                    raise BenchError(f"POST {path}: {r.status} {answer[:300]!r}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = loop.time() - start
    return Paced(len(requests) / elapsed, max_lag * 1000)


async def timed_get(session: aiohttp.ClientSession, url: str) -> tuple[bytes, float]:
    """GET `url` and read the whole body; returns it and the seconds taken."""
    start = time.perf_counter()
    async with session.get(url) as r:
        body = await r.read()
        if r.status != 200:
            raise BenchError(f"GET {url}: {r.status} {body[:300]!r}")
    return body, time.perf_counter() - start


async def current_rv(session: aiohttp.ClientSession, base: str) -> str:
    # A selector that matches nothing: the list's resourceVersion without 100k items.
    url = f"{base}/api/v1/pods?labelSelector=bench.vulcan%2Fnone%3Dnone"
    body, _ = await timed_get(session, url)
    return str(orjson.loads(body)["metadata"]["resourceVersion"])


@dataclass(slots=True)
class WatchRound:
    seconds: float  # first change sent -> the last watcher has every event
    patch_seconds: float  # first change sent -> the last PATCH answered
    events: int
    watchers: int
    usage: Usage = field(default_factory=Usage)

    @property
    def per_watcher_rate(self) -> float:
        return self.events / self.seconds

    @property
    def total_rate(self) -> float:
        return self.events * self.watchers / self.seconds


async def watch_round(
    server: ServerProcess,
    session: aiohttp.ClientSession,
    targets: Sequence[PodRef],
    *,
    watchers: int,
    label_value: str,
    concurrency: int,
) -> WatchRound:
    """Open `watchers` watches on all pods from the current resourceVersion, merge-patch each
    target once (a label), and time until every watcher has received every MODIFIED event."""
    base = server.url
    rv = await current_rv(session, base)
    url = f"{base}/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=900"
    expected = len(targets)
    done_at: list[float] = []
    connected = 0
    all_connected = asyncio.Event()
    patch = orjson.dumps({"metadata": {"labels": {"bench.vulcan/round": label_value}}})
    patches = [(ref.path, patch) for ref in targets]

    async with new_session(watchers) as watch_session:

        async def watch() -> None:
            nonlocal connected
            async with watch_session.get(url) as r:
                if r.status != 200:
                    raise BenchError(f"watch: {r.status} {(await r.read())[:300]!r}")
                # The server registers the watcher before it sends the headers.
                connected += 1
                if connected == watchers:
                    all_connected.set()
                seen = 0
                rest = b""
                async for chunk in r.content.iter_any():
                    lines = (rest + chunk).split(b"\n")
                    rest = lines.pop()
                    for line in lines:
                        if not line.startswith(b'{"type":"MODIFIED"'):
                            raise BenchError(f"unexpected watch event: {line[:200]!r}")
                    seen += len(lines)
                    if seen >= expected:
                        done_at.append(time.perf_counter())
                        return
                raise BenchError(f"watch ended after {seen} of {expected} events")

        tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
        try:
            await asyncio.wait_for(all_connected.wait(), 60)
            usage = Usage()
            with measured(server, usage):
                start = time.perf_counter()
                await send_all(
                    session,
                    base,
                    "PATCH",
                    patches,
                    concurrency=concurrency,
                    expect=200,
                    content_type=MERGE_PATCH,
                )
                patched = time.perf_counter()
                await asyncio.wait_for(asyncio.gather(*tasks), 600)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return WatchRound(max(done_at) - start, patched - start, expected, watchers, usage)
