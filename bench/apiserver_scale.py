"""Scale benchmark of the embedded API server: create, list and watch-delivery throughput at
10k nodes + 100k pods, event-loop responsiveness under a 1,000 objects/s create rate, and the
server's peak memory.

The server runs as its own process (`vulcan sim apiserver`) so that the load generator does not
share its CPU core; the load generator is raw aiohttp with pre-encoded orjson bodies (a client
library's models would make the client the bottleneck). Every throughput is printed next to a
baseline measured in the same run with the same client, because absolute times on a noisy
machine lie:

- create and list: a trivial aiohttp server in another process (`--baseline-server`) that decodes
  each POST body with orjson and returns it with 201 (creates alternate between the two servers
  in blocks, so both rates sample the same stretch of time), or returns a pre-built blob of the
  list's size;
- responsiveness: a probe process (`--probe`) that GETs /healthz every 20 ms, first against the
  idle server (the baseline), then during the paced creates, the big lists and the watch fan-out;
- watch fan-out: the same N changes delivered to one watcher (the baseline) and to 20; encoding
  each event once for all watchers keeps the 20-watcher round close to the 1-watcher one.

The load generator is CPU-bound near the baseline server's rate (see the "load generator CPU"
figures), so the create ratios flatter the API server slightly.

Run: `.venv/bin/python -m bench.apiserver_scale [--nodes 10000 --pods 100000 --watchers 20]`, or
`--quick` for a smoke run. Besides the human-readable lines it prints one line per metric:
`BENCH apiserver.<metric> value=<number> unit=<unit> [baseline=<number> ratio=<value/baseline>]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

REPO = Path(__file__).resolve().parents[1]
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
NAMESPACES = tuple(f"bench-{i}" for i in range(10))
JOB_SIZE = 100  # pods per Volcano job: 1 master + 99 workers
PACED_RATE = 1000.0  # objects/s, the create rate the issue asks to sustain without stalling
PROBE_INTERVAL = 0.02
IDLE_PROBE_SECONDS = 3.0
STOP_TIMEOUT = 10.0  # SIGTERM, then SIGKILL after this long
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(RuntimeError):
    pass


# ------------------------------------------------------------------------------- objects


def node_body(index: int) -> tuple[str, bytes]:
    """A node as a kubelet registers it (~1.2 KB)."""
    name = f"node-{index:05d}"
    zone = f"zone-{index % 3}"
    resources = {
        "cpu": "32",
        "memory": "128Gi",
        "pods": "110",
        "ephemeral-storage": "500Gi",
        "hugepages-2Mi": "0",
    }
    heartbeat = "2024-01-01T00:00:00Z"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.8xlarge",
                "topology.kubernetes.io/region": "region-1",
                "topology.kubernetes.io/zone": zone,
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": f"10.{index // 256 % 256}.{index % 256}.0/24"},
        "status": {
            "capacity": resources,
            "allocatable": {**resources, "cpu": "31500m", "memory": "127Gi"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": heartbeat,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index // 256 % 256}.{index % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{index:032x}",
                "systemUUID": f"{index:08x}-0000-0000-0000-000000000000",
                "bootID": f"{index:08x}-boot",
                "kernelVersion": "6.1.0-18-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.29.2",
                "kubeProxyVersion": "v1.29.2",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
    return "/api/v1/nodes", orjson.dumps(node)


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{self.name}"


def pod_body(index: int) -> tuple[PodRef, bytes]:
    """The pod a Volcano job controller creates for task replica `index` of its job (~2 KB)."""
    job_index, replica = divmod(index, JOB_SIZE)
    job = f"job-{job_index:05d}"
    namespace = NAMESPACES[job_index % len(NAMESPACES)]
    task = "master" if replica == 0 else "worker"
    task_index = 0 if replica == 0 else replica - 1
    name = f"{job}-{task}-{task_index}"
    job_uid = f"00000000-0000-4000-8000-{job_index:012d}"
    requests = {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "volcano.sh/job-name": job,
                "volcano.sh/job-namespace": namespace,
                "volcano.sh/queue-name": "default",
                "volcano.sh/task-spec": task,
                "volcano.sh/job-version": "0",
                "app": "training",
            },
            "annotations": {
                "scheduling.k8s.io/group-name": f"{job}-{job_uid}",
                "volcano.sh/job-name": job,
                "volcano.sh/job-version": "0",
                "volcano.sh/queue-name": "default",
                "volcano.sh/task-spec": task,
                "volcano.sh/task-index": str(task_index),
                "volcano.sh/template-uid": f"{job}-{task}",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": job,
                    "uid": job_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "OnFailure",
            "hostname": name,
            "subdomain": job,
            "containers": [
                {
                    "name": task,
                    "image": "registry.example.com/ml/trainer:2024.03",
                    "command": ["python", "-m", "trainer", "--role", task],
                    "env": [
                        {"name": "VC_TASK_INDEX", "value": str(task_index)},
                        {"name": "VC_JOB_NAME", "value": job},
                    ],
                    "ports": [{"name": "nccl", "containerPort": 29500, "protocol": "TCP"}],
                    "resources": {"requests": requests, "limits": requests},
                    "volumeMounts": [
                        {"name": "svc", "mountPath": "/etc/volcano"},
                        {"name": "data", "mountPath": "/data", "readOnly": True},
                    ],
                }
            ],
            "volumes": [
                {"name": "svc", "configMap": {"name": f"{job}-svc"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "training-data"}},
            ],
        },
    }
    return PodRef(namespace, name), orjson.dumps(pod)


def namespace_body(name: str) -> tuple[str, bytes]:
    return "/api/v1/namespaces", orjson.dumps({"metadata": {"name": name}})


# ------------------------------------------------------------------------------ processes


def read_rss_kib(pid: int, key: str = "VmRSS") -> int:
    """VmRSS (current) or VmHWM (peak) of `pid` in KiB, 0 when the process is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def read_cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` (from /proc/PID/stat)."""
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()  # the name may contain spaces
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    return 0.0


class ServerProcess:
    """A server subprocess that prints `... listening on http://HOST:PORT` once it serves."""

    def __init__(self, label: str, argv: Sequence[str]) -> None:
        self.label = label
        self.argv = list(argv)
        self.url = ""
        self.proc: asyncio.subprocess.Process | None = None
        # Logs go to a file: an undrained pipe would block the server once it fills up.
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        self._drain: asyncio.Task[None] | None = None
        self.peak_rss_kib = 0
        self._sampler: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self, timeout: float = 60.0) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=self.stderr
        )
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    line = (await self.proc.stdout.readline()).decode()
                    if not line:
                        raise BenchError(f"{self.label} exited before serving:\n{self.logs()}")
                    if "listening on http://" in line:
                        self.url = line.split()[-1]
                        break
        except TimeoutError:
            raise BenchError(f"{self.label} did not start within {timeout} s") from None
        self._drain = asyncio.create_task(self._drain_stdout())
        self._sampler = asyncio.create_task(self._sample_rss())

    async def _drain_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while await self.proc.stdout.read(65536):
            pass

    async def _sample_rss(self) -> None:
        # VmHWM is read at the end as well; sampling VmRSS shows when the peak happened.
        while True:
            self.peak_rss_kib = max(self.peak_rss_kib, read_rss_kib(self.pid))
            await asyncio.sleep(0.2)

    def rss_mib(self) -> float:
        return read_rss_kib(self.pid) / 1024

    def hwm_mib(self) -> float:
        return read_rss_kib(self.pid, "VmHWM") / 1024

    def cpu_seconds(self) -> float:
        return read_cpu_seconds(self.pid)

    def logs(self, limit: int = 4000) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-limit:]

    async def stop(self) -> None:
        for task in (self._sampler, self._drain):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        proc = self.proc
        if proc is not None and proc.returncode is not None:
            print(f"{self.label} had exited with {proc.returncode}; its log:\n{self.logs()}")
        elif proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
            except TimeoutError:
                print(f"{self.label} ignored SIGTERM for {STOP_TIMEOUT} s: killing it")
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        self.stderr.close()


def vulcan_argv() -> list[str]:
    script = Path(sys.executable).with_name("vulcan")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "vulcan"]
    # --port 0: any free port; the URL is parsed from the process's first line.
    return [*command, "sim", "apiserver", "--port", "0"]


def self_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.apiserver_scale", *args]


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


# ------------------------------------------------------------------------------- reporting


class Report:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(self, name: str, value: float, unit: str, baseline: float | None = None) -> None:
        line = f"BENCH apiserver.{name} value={value:.6g} unit={unit}"
        if baseline is not None:
            ratio = value / baseline if baseline else float("nan")
            line += f" baseline={baseline:.6g} ratio={ratio:.4g}"
        self.lines.append(line)


def say(text: str) -> None:
    print(text, flush=True)


# ------------------------------------------------------------------------------------ main


async def interleaved_creates(
    vulcan: ServerProcess,
    baseline: ServerProcess,
    session: aiohttp.ClientSession,
    posts: Sequence[tuple[str, bytes]],
    baseline_posts: Sequence[tuple[str, bytes]],
    *,
    concurrency: int,
    blocks: int,
) -> tuple[Usage, Usage]:
    """POST `posts` to vulcan and `baseline_posts` to the baseline in `blocks` alternating
    slices, so that both rates sample the same stretch of a noisy machine's time (measured one
    after the other, the baseline alone varied from 3,000 to 7,400 obj/s between runs)."""
    usage, base_usage = Usage(), Usage()
    for block in range(blocks):
        for server, requests, into in (
            (baseline, baseline_posts, base_usage),
            (vulcan, posts, usage),
        ):
            part = requests[block * len(requests) // blocks : (block + 1) * len(requests) // blocks]
            with measured(server, into):
                await send_all(
                    session, server.url, "POST", part, concurrency=concurrency, expect=201
                )
    return usage, base_usage


async def bench(args: argparse.Namespace) -> None:
    # SIGINT/SIGTERM cancel the run, so the `finally` blocks stop every subprocess.
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main_task.cancel)
    report = Report()
    started = time.perf_counter()
    say("building request bodies ...")
    nodes = [node_body(i) for i in range(args.nodes)]
    pods = [pod_body(i) for i in range(args.pods)]
    pod_posts = [(f"/api/v1/namespaces/{ref.namespace}/pods", body) for ref, body in pods]
    node_sizes = [len(body) for _, body in nodes]
    pod_sizes = [len(body) for _, body in pods]
    say(
        f"{args.nodes} nodes (mean body {statistics.mean(node_sizes):.0f} B), "
        f"{args.pods} pods (mean body {statistics.mean(pod_sizes):.0f} B) "
        f"in {len(NAMESPACES)} namespaces; concurrency {args.concurrency}"
    )
    # The paced phase creates the last pods, so the store ends with exactly --pods pods.
    paced_count = min(int(PACED_RATE * args.paced_seconds), args.pods // 2)
    burst_posts, paced_posts = pod_posts[: args.pods - paced_count], pod_posts[-paced_count:]
    baseline_pod_posts = pod_posts[: min(len(pod_posts), args.baseline_pods)]

    async with contextlib.AsyncExitStack() as stack:
        vulcan = ServerProcess("vulcan sim apiserver", vulcan_argv())
        baseline = ServerProcess("baseline server", self_argv("--baseline-server"))
        stack.push_async_callback(vulcan.stop)
        stack.push_async_callback(baseline.stop)
        await asyncio.gather(vulcan.start(), baseline.start())
        say(f"vulcan API server {vulcan.url} (pid {vulcan.pid}); baseline {baseline.url}")
        session = await stack.enter_async_context(new_session(args.concurrency))
        rss_start = vulcan.rss_mib()

        # ---- create throughput
        await send_all(
            session,
            vulcan.url,
            "POST",
            [namespace_body(ns) for ns in NAMESPACES],
            concurrency=1,
            expect=201,
        )
        # Untimed warm-up: open the keep-alive connections to both servers and run the
        # baseline's handler a while, so the first timed phase does not pay for either (it
        # made the first baseline rate ~40% low in a trial run).
        probes = [("/healthz", b"")] * (4 * args.concurrency)
        for server in (vulcan, baseline):
            await send_all(
                session, server.url, "GET", probes, concurrency=args.concurrency, expect=200
            )
        await send_all(
            session,
            baseline.url,
            "POST",
            baseline_pod_posts[:2000],
            concurrency=args.concurrency,
            expect=201,
        )
        usage, base_usage = await interleaved_creates(
            vulcan, baseline, session, nodes, nodes, concurrency=args.concurrency, blocks=5
        )
        rate, base_rate = len(nodes) / usage.wall, len(nodes) / base_usage.wall
        say(
            f"create nodes: {len(nodes)} in {usage.wall:.2f} s = {rate:.0f} obj/s ({usage}); "
            f"baseline {base_rate:.0f} obj/s ({base_usage}); ratio {rate / base_rate:.2f}"
        )
        report.metric("create_nodes", rate, "obj/s", base_rate)

        usage, base_usage = await interleaved_creates(
            vulcan,
            baseline,
            session,
            burst_posts,
            baseline_pod_posts,
            concurrency=args.concurrency,
            blocks=10,
        )
        rate = len(burst_posts) / usage.wall
        base_rate = len(baseline_pod_posts) / base_usage.wall
        say(
            f"create pods: {len(burst_posts)} in {usage.wall:.2f} s = {rate:.0f} obj/s "
            f"({usage}); baseline {base_rate:.0f} obj/s over {len(baseline_pod_posts)} "
            f"({base_usage}); ratio {rate / base_rate:.2f}"
        )
        report.metric("create_pods", rate, "obj/s", base_rate)

        # ---- responsiveness: idle, then under a paced 1,000 creates/s
        async with probing(vulcan.url) as idle_samples:
            await asyncio.sleep(args.idle_probe_seconds)
        idle = ProbeStats.of(idle_samples)
        say(f"probe /healthz, idle server: {idle}")
        async with probing(vulcan.url) as paced_samples:
            usage = Usage()
            with measured(vulcan, usage):
                paced = await send_paced(
                    session,
                    vulcan.url,
                    paced_posts,
                    rate=PACED_RATE,
                    concurrency=args.concurrency,
                )
        loaded = ProbeStats.of(paced_samples)
        say(
            f"paced creates: {len(paced_posts)} pods at {paced.achieved_rate:.0f} obj/s "
            f"(target {PACED_RATE:.0f}; worst send lag {paced.max_lag_ms:.1f} ms; {usage})"
        )
        say(f"probe /healthz during paced creates: {loaded}")
        report.metric("paced_create_rate", paced.achieved_rate, "obj/s", PACED_RATE)
        report.metric("probe_p50_paced_create", loaded.p50, "ms", idle.p50)
        report.metric("probe_p99_paced_create", loaded.p99, "ms", idle.p99)
        report.metric("probe_max_paced_create", loaded.max, "ms", idle.max)

        rss_loaded = vulcan.rss_mib()
        per_object = (rss_loaded - rss_start) * 1024 * 1024 / (args.nodes + args.pods)
        say(
            f"server RSS: {rss_start:.0f} MiB at start, {rss_loaded:.0f} MiB with "
            f"{args.nodes} nodes + {args.pods} pods (~{per_object / 1024:.1f} KiB per object)"
        )
        report.metric("rss_loaded", rss_loaded, "MiB")

        # ---- lists (best of --list-runs; the probe shows how long the event loop stalls)
        async with probing(vulcan.url) as list_samples:
            for resource in ("pods", "nodes"):
                best = float("inf")
                size = 0
                for _ in range(args.list_runs):
                    body, seconds = await timed_get(session, f"{vulcan.url}/api/v1/{resource}")
                    best, size = min(best, seconds), len(body)
                    kind = b'"kind":"Pod"' if resource == "pods" else b'"kind":"Node"'
                    items = body.count(kind)
                    del body
                    wanted = args.pods if resource == "pods" else args.nodes
                    if items != wanted:
                        raise BenchError(f"list of {resource}: {items} items, want {wanted}")
                async with session.put(f"{baseline.url}/_bench/blob?size={size}") as r:
                    await r.read()
                base_best = float("inf")
                for _ in range(args.list_runs):
                    body, seconds = await timed_get(session, f"{baseline.url}/_bench/blob")
                    base_best = min(base_best, seconds)
                    del body
                mb = size / 1e6
                say(
                    f"list {resource}: {mb:.1f} MB in {best:.3f} s = {mb / best:.0f} MB/s; "
                    f"baseline (same bytes, pre-built) {base_best:.3f} s = "
                    f"{mb / base_best:.0f} MB/s; ratio {base_best / best:.2f}"
                )
                report.metric(f"list_{resource}", mb / best, "MB/s", mb / base_best)
                report.metric(f"list_{resource}_seconds", best, "s", base_best)
        during_list = ProbeStats.of(list_samples)
        say(f"probe /healthz during the lists: {during_list}")
        report.metric("probe_max_list", during_list.max, "ms", idle.max)
        say(
            f"server RSS after the lists: {vulcan.rss_mib():.0f} MiB (peak so far "
            f"{vulcan.hwm_mib():.0f} MiB)"
        )

        # ---- watch delivery: one watcher (baseline), then the fan-out
        targets = [ref for ref, _ in pods[: args.watch_events]]
        async with probing(vulcan.url) as single_samples:
            single = await watch_round(
                vulcan,
                session,
                targets,
                watchers=1,
                label_value="single",
                concurrency=args.concurrency,
            )
        during_single = ProbeStats.of(single_samples)
        say(
            f"watch, 1 watcher: {single.events} events in {single.seconds:.2f} s = "
            f"{single.per_watcher_rate:.0f} events/s (patches done after "
            f"{single.patch_seconds:.2f} s; {single.usage})"
        )
        async with probing(vulcan.url) as fan_samples:
            fan = await watch_round(
                vulcan,
                session,
                targets,
                watchers=args.watchers,
                label_value="fanout",
                concurrency=args.concurrency,
            )
        during_fan = ProbeStats.of(fan_samples)
        say(
            f"watch, {fan.watchers} watchers: {fan.events} events each in {fan.seconds:.2f} s "
            f"= {fan.per_watcher_rate:.0f} events/s per watcher, {fan.total_rate:.0f} "
            f"events/s in all (patches done after {fan.patch_seconds:.2f} s; {fan.usage})"
        )
        say(
            f"fan-out cost: {fan.seconds / single.seconds:.2f}x the single-watcher time for "
            f"{fan.watchers}x the deliveries"
        )
        # Both rounds keep the server saturated with `concurrency` PATCHes in flight, so the
        # probe waits behind them in either; the single-watcher round is the fair baseline.
        say(f"probe /healthz during the 1-watcher round: {during_single}")
        say(f"probe /healthz during the {fan.watchers}-watcher round: {during_fan}")
        report.metric("watch_per_watcher", fan.per_watcher_rate, "events/s", single.total_rate)
        report.metric("watch_total", fan.total_rate, "events/s", single.total_rate)
        report.metric("probe_p99_watch", during_fan.p99, "ms", during_single.p99)
        report.metric("probe_max_watch", during_fan.max, "ms", during_single.max)

        # ---- memory
        peak = max(vulcan.hwm_mib(), vulcan.peak_rss_kib / 1024)
        say(
            f"server peak RSS {peak:.0f} MiB (VmHWM; highest sampled VmRSS "
            f"{vulcan.peak_rss_kib / 1024:.0f} MiB), now {vulcan.rss_mib():.0f} MiB"
        )
        report.metric("peak_rss", peak, "MiB")

    say(f"total time {time.perf_counter() - started:.0f} s")
    say("")
    for line in report.lines:
        say(line)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.apiserver_scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--watch-events", type=int, default=5_000, help="pods patched per round")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument(
        "--paced-seconds", type=float, default=10.0, help="length of the 1,000/s create phase"
    )
    parser.add_argument(
        "--baseline-pods", type=int, default=20_000, help="pod creates sent to the baseline"
    )
    parser.add_argument("--list-runs", type=int, default=2, help="lists timed (best counts)")
    parser.add_argument("--idle-probe-seconds", type=float, default=IDLE_PROBE_SECONDS)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 200 nodes, 2,000 pods, 5 watchers, 500 events",
    )
    # Internal: the helper processes are this module run with these flags.
    parser.add_argument("--baseline-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--probe-max-seconds", type=float, default=900.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.pods, args.watchers, args.watch_events = 200, 2_000, 5, 500
        args.paced_seconds, args.idle_probe_seconds = 1.0, 1.0
    if args.watch_events > args.pods:
        parser.error("--watch-events cannot exceed --pods")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.baseline_server:
        return run_baseline_server()
    if args.probe:
        return run_probe(args.probe, PROBE_INTERVAL, args.probe_max_seconds)
    runner = asyncio.run
    with contextlib.suppress(ImportError):
        # The load generator runs on uvloop (a vulcan dependency) so the client side stays
        # cheap; the servers keep the plain asyncio loop that `vulcan sim apiserver` uses.
        import uvloop

        runner = uvloop.run
    try:
        runner(bench(args))
    except asyncio.CancelledError:
        print("interrupted; the servers were stopped", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
