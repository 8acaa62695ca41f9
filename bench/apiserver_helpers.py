"""The helper processes of the API-server benchmark, run as `python -m bench.apiserver_scale`
with an internal flag: the trivial baseline server (`--baseline-server`) and the /healthz probe
(`--probe`); and the parent's side of the probe (`probing`, `ProbeStats`)."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import signal
import statistics
import sys
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
from aiohttp import web

from bench.apiserver_common import JSON, REPO, STOP_TIMEOUT, BenchError, self_argv

PROBE_INTERVAL = 0.02
IDLE_PROBE_SECONDS = 3.0


# ----------------------------------------------------------------------- baseline server


def run_baseline_server() -> int:
    """The trivial server: what aiohttp + orjson cost without any API-server logic."""
    # Pre-built once per size, so a GET costs only aiohttp's and the socket's work.
    blob: dict[str, bytes] = {"body": b""}

    async def create(request: web.Request) -> web.Response:
        # Decode and re-encode, as any JSON API has to; the API server does both too.
        obj = orjson.loads(await request.read())
        return web.Response(body=orjson.dumps(obj), status=201, content_type=JSON)

    async def set_blob(request: web.Request) -> web.Response:
        size = int(request.query["size"])
        blob["body"] = b" " * size
        return web.Response(text="ok")

    async def get_blob(request: web.Request) -> web.Response:
        return web.Response(body=blob["body"], content_type=JSON)

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def serve() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_put("/_bench/blob", set_blob)
        app.router.add_get("/_bench/blob", get_blob)
        app.router.add_get("/healthz", ok)
        app.router.add_post("/{tail:.*}", create)
        # The same runner settings as the embedded API server (no access log).
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"baseline server listening on http://127.0.0.1:{port}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()

    # Plain asyncio.run, like `vulcan sim apiserver`, so the two servers run on the same loop.
    asyncio.run(serve())
    return 0


# ---------------------------------------------------------------------------------- probe


def run_probe(url: str, interval: float, max_seconds: float) -> int:
    """GET /healthz every `interval` s over one keep-alive connection until a line arrives on
    stdin (or `max_seconds` pass); print the latencies (ms) as JSON.

    A separate process with blocking sockets, so its timings measure the server, not a busy
    client event loop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the parent, which stops us
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    stop = threading.Event()

    def wait_for_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()

    def probe() -> float:
        start = time.perf_counter()
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise BenchError(f"/healthz answered {response.status}")
        return (time.perf_counter() - start) * 1000

    probe()  # connects
    print("ready", flush=True)
    samples: list[float] = []
    deadline = time.perf_counter() + max_seconds
    next_at = time.perf_counter()
    while not stop.is_set() and time.perf_counter() < deadline:
        samples.append(probe())
        next_at += interval
        delay = next_at - time.perf_counter()
        if delay > 0:
            stop.wait(delay)
        else:
            next_at = time.perf_counter()  # after a stall: resume the cadence, no burst
    conn.close()
    print(json.dumps({"latencies_ms": samples}), flush=True)
    return 0


@dataclass(slots=True)
class ProbeStats:
    count: int
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, samples: list[float]) -> ProbeStats:
        if not samples:
            return cls(0, 0.0, 0.0, 0.0)
        ordered = sorted(samples)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return cls(len(ordered), statistics.median(ordered), p99, ordered[-1])

    def __str__(self) -> str:
        return (
            f"p50 {self.p50:.2f} ms, p99 {self.p99:.2f} ms, max {self.max:.2f} ms "
            f"({self.count} probes)"
        )


@contextlib.asynccontextmanager
async def probing(url: str, max_seconds: float = 900.0) -> AsyncIterator[list[float]]:
    """Runs the probe process for the duration of the block; the yielded list is filled with
    the latencies when the block ends."""
    proc = await asyncio.create_subprocess_exec(
        *self_argv("--probe", url, "--probe-max-seconds", str(max_seconds)),
        cwd=REPO,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    samples: list[float] = []
    try:
        ready = await asyncio.wait_for(proc.stdout.readline(), 30)
        if ready.strip() != b"ready":
            raise BenchError(f"the probe did not start: {ready!r}")
        yield samples
        try:
            proc.stdin.write(b"stop\n")
            await proc.stdin.drain()
        except (RuntimeError, ConnectionError):
            pass  # the probe has exited already; its output says why
        out = await asyncio.wait_for(proc.stdout.read(), 120)
        try:
            samples.extend(json.loads(out)["latencies_ms"])
        except ValueError:
            raise BenchError("the probe failed (its error is printed above)") from None
        await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
