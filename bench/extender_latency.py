"""Extender latency: filter + prioritize as kube-scheduler calls them, next to a floor server.

    .venv/bin/python -m bench.extender_latency [--quick]

The extender runs in a child process, as it is deployed, so this client does not take its CPU.
That process fills an in-process embedded API server directly (no HTTP) with 10,000 EKS-style GPU
nodes (p4d.24xlarge; allocatable memory differs by some KiB from node to node, as kubelets report
it) and 20,000 Volcano job pods bound to them (every 50th node has all 8 GPUs taken, so ~2% of
the candidates fail filter), syncs a ClusterCache from it over HTTP exactly as `vulcan extender`
does (all pods), wires `ExtenderServer` with Volcano's default scheduler
configuration and serves it. The floor is a second child: a bare aiohttp server whose /v1/filter
and /v1/prioritize decode the body with orjson and answer a same-shape echo (every name passes /
scores 0). Both children run on the event loop `vulcan` uses (`vulcan.sim_commands.run_async`:
uvloop when installed) with the same AppRunner settings (no access log).

The client sends what kube-scheduler sends in node-cache mode: the pod as its informer holds it
(no kind/apiVersion, ~3 KB) and N candidate names, a different random sample of the 10,000 per
request, pre-encoded; one keep-alive connection per server and one request at a time (kube-
scheduler calls filter, then prioritize, serially for a pod). Each round times filter and
prioritize back to back, from sending until the whole response body is read; rounds alternate
between the extender and the floor (which goes first alternates too) so both sample the same
stretch of a noisy machine. The client's cyclic GC is off while a phase is timed.

Two request streams are measured at every candidate count, one after the other:
- "same pod": one pod again and again, as for the consecutive pods of a job (same requests).
  Before it, one untimed call with all 10,000 names: the steady state of a long job, where the
  extender has already judged this request shape on every node.
- "new shape": every call a pod whose cpu request no earlier call had (4001m, 4002m, ...), like
  the first pod of each job: nothing remembered per request shape can answer it.
The cluster does not change during a run (no binds), which favours anything cached per node.

Also reported, per phase: the extender's own view (the mean and histogram-estimated p50/p99 of
`vulcan_extender_request_duration_seconds` over the phase, which starts after aiohttp has parsed
the request line and ends before the response is written) and the CPU each server process burnt
per filter+prioritize pair (from /proc; 10 ms ticks, so only meaningful over a whole phase).

Besides the table it prints one line per metric,
`BENCH extender.[new_shape_]<metric> value=<ms> unit=ms baseline=<floor ms> ratio=<value/baseline>`,
and as its last line, for the "same pod" stream,
`filter_prioritize_p99_ms_5k=<X> floor_p99_ms_5k=<Y> ratio=<X/Y>`.
Targets (the issue's): p50 <= 1 ms and p99 <= 5 ms at 500 candidates, p99 <= 12 ms at 5k and a
p99 ratio to the floor <= 3 at 5k, all for filter+prioritize; checked for both streams.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import math
import random
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from bench.apiserver_scale import (
    JOB_SIZE,
    NAMESPACES,
    BenchError,
    ServerProcess,
    node_body,
    pod_body,
)

JSON = "application/json"
HEADERS = {"Content-Type": JSON}
COUNTS = (500, 1_000, 5_000, 10_000)
QUICK_COUNTS = (500, 5_000)
HEADLINE = 5_000  # the candidate count of the last line
# Measured rounds per candidate count (after WARMUP untimed ones). A round costs ~2-60 ms per
# server, so these keep the whole run to a couple of minutes while giving p99 a few samples.
ROUNDS = {500: 1_000, 1_000: 1_000, 5_000: 400, 10_000: 200}
QUICK_ROUNDS = {500: 200, 5_000: 60}
WARMUP = 10
NODES = 10_000
PODS = 20_000
FULL_NODE_EVERY = 50  # every 50th node has all its GPUs taken by bound pods
GPUS_PER_NODE = 8
SEED = 20240301
REGION = "us-west-2"
STARTUP_TIMEOUT = 600.0
CLIENT_MAX_SIZE = 256 * 1024 * 1024  # the extender's own limit (extender/server.py)
METRIC = "vulcan_extender_request_duration_seconds"


# ------------------------------------------------------------------------------- objects


def node_names(count: int) -> list[str]:
    """`count` distinct EKS node names (`ip-10-12-34-56.us-west-2.compute.internal`), the same
    list on every call: the extender child and this client build it independently."""
    rng = random.Random(SEED)
    names: dict[str, None] = {}
    for _ in range(4 * count):  # bounded; collisions among 16M addresses are rare
        if len(names) == count:
            break
        octets = f"{rng.randrange(256)}-{rng.randrange(256)}-{rng.randrange(1, 255)}"
        names[f"ip-10-{octets}.{REGION}.compute.internal"] = None
    if len(names) != count:
        raise BenchError(f"could not draw {count} distinct node names")
    return list(names)


def node_object(index: int, name: str) -> dict[str, Any]:
    """A p4d.24xlarge EKS node as its kubelet registers it (~1.6 KB): 8 GPUs, 96 cores."""
    node: dict[str, Any] = orjson.loads(node_body(index)[1])
    zone = f"{REGION}{'abc'[index % 3]}"
    address = name.split(".", 1)[0][3:].replace("-", ".")
    meta = node["metadata"]
    meta["name"] = name
    meta["labels"].update(
        {
            "kubernetes.io/hostname": name,
            "node.kubernetes.io/instance-type": "p4d.24xlarge",
            "beta.kubernetes.io/instance-type": "p4d.24xlarge",
            "topology.kubernetes.io/region": REGION,
            "topology.kubernetes.io/zone": zone,
            "eks.amazonaws.com/nodegroup": f"gpu-{zone}",
            "eks.amazonaws.com/capacityType": "ON_DEMAND",
            "nvidia.com/gpu.present": "true",
        }
    )
    node["spec"] = {"providerID": f"aws:///{zone}/i-{index:017x}"}
    # The kubelet reports MemTotal, which differs by some KiB between machines of one type, so
    # (like in a real cluster) no two nodes have quite the same allocatable memory.
    memory_kib = 1_187_635_000 + index * 7_919 % 65_536
    capacity = {
        "cpu": "96",
        "memory": f"{memory_kib}Ki",
        "pods": "110",
        "ephemeral-storage": "500Gi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "nvidia.com/gpu": str(GPUS_PER_NODE),
    }
    status = node["status"]
    status["capacity"] = capacity
    status["allocatable"] = {**capacity, "cpu": "95690m", "memory": f"{memory_kib - 12_163_072}Ki"}
    status["addresses"] = [
        {"type": "InternalIP", "address": address},
        {"type": "Hostname", "address": name},
        {"type": "InternalDNS", "address": name},
    ]
    return node


def placements(names: Sequence[str], pods: int) -> list[str]:
    """The node of each bound pod: every FULL_NODE_EVERY-th node gets GPUS_PER_NODE pods (one
    GPU each, so it is full), the rest are spread round-robin over the other nodes."""
    full = [name for name in names[::FULL_NODE_EVERY] for _ in range(GPUS_PER_NODE)]
    rest = [name for index, name in enumerate(names) if index % FULL_NODE_EVERY]
    spread = [rest[i % len(rest)] for i in range(max(0, pods - len(full)))] if rest else []
    return (full + spread)[:pods]


def scheduling_pod(cpu: str = "4") -> dict[str, Any]:
    """The pod in ExtenderArgs as kube-scheduler sends it: from its informer cache, so no
    kind/apiVersion and no managedFields, with the API server's defaults, Pending after an
    earlier unschedulable attempt. A Volcano worker asking for 4 cores (or `cpu`), 8Gi and 1 GPU."""
    pod: dict[str, Any] = orjson.loads(pod_body(JOB_SIZE * 9_000 + 7)[1])
    del pod["apiVersion"], pod["kind"]
    pod["metadata"].update(
        {
            "uid": "6f1c2b9e-3d4a-4c8e-9b7a-1e2f3a4b5c6d",
            "resourceVersion": "48213377",
            "creationTimestamp": "2024-03-01T12:00:00Z",
        }
    )
    spec = pod["spec"]
    container = spec["containers"][0]
    for amounts in container["resources"].values():  # requests and limits (Guaranteed QoS)
        amounts["cpu"] = cpu
    container.update(
        {
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }
    )
    token_volume = "kube-api-access-x7k2p"
    container["volumeMounts"].append(
        {
            "name": token_volume,
            "readOnly": True,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        }
    )
    spec["volumes"].append(
        {
            "name": token_volume,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {
                                        "apiVersion": "v1",
                                        "fieldPath": "metadata.namespace",
                                    },
                                }
                            ]
                        }
                    },
                ],
                "defaultMode": 420,
            },
        }
    )
    spec.update(
        {
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
        }
    )
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": "2024-03-01T12:00:01Z",
                "reason": "Unschedulable",
                "message": "0/10000 nodes are available: 10000 Insufficient nvidia.com/gpu.",
            }
        ],
        "qosClass": "Guaranteed",
    }
    return pod


def extender_args(pod: dict[str, Any], names: list[str]) -> bytes:
    # Go's encoder emits every field of ExtenderArgs, in struct order, unused ones as null.
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


# ------------------------------------------------------------------------ child processes


def self_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.extender_latency", *args]


async def until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def fill(store: Any, names: Sequence[str], pods: int) -> None:
    """Create the nodes and bound pods straight in the store (no HTTP, no client)."""
    registry = store.registry
    ns_type, node_type, pod_type = (
        registry.get("", "v1", plural) for plural in ("namespaces", "nodes", "pods")
    )
    assert ns_type and node_type and pod_type
    for namespace in NAMESPACES:
        if store.find(ns_type, "", namespace) is None:
            store.create(ns_type, "", {"metadata": {"name": namespace}})
    for index, name in enumerate(names):
        store.create(node_type, "", node_object(index, name))
    for index, node in enumerate(placements(names, pods)):
        pod = orjson.loads(pod_body(index)[1])
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "qosClass": "Guaranteed"}
        store.create(pod_type, pod["metadata"]["namespace"], pod)


async def serve_extender(nodes: int, pods: int) -> None:
    """Child: embedded API server + ClusterCache + ExtenderServer, wired as `vulcan extender`."""
    from kubernetes_asyncio.client import Configuration

    from core.cache import ClusterCache
    from core.kube.client import ClientOptions, KubeClient
    from extender.binder import Binder
    from extender.ledger import GangLedger
    from extender.metrics import ExtenderMetrics
    from extender.server import ExtenderServer, serve
    from plugins.config import default_config
    from plugins.framework import Framework
    from sim.apiserver.server import EmbeddedApiServer

    apiserver = EmbeddedApiServer(watch_history=1_000)
    fill(apiserver.store, node_names(nodes), pods)
    async with apiserver:
        client = KubeClient(Configuration(host=apiserver.url), ClientOptions(qps=0))
        cache = ClusterCache()
        try:
            metrics = ExtenderMetrics()
            binder = Binder(client, on_result=lambda result: metrics.binds.labels(result).inc())
            server = ExtenderServer(
                cache, Framework(default_config()), binder, ledger=GangLedger(), metrics=metrics
            )
            cache.start(client)
            await cache.wait_synced(STARTUP_TIMEOUT)
            runner, port = await serve(server, "127.0.0.1", 0)
            try:
                print(f"vulcan extender listening on http://127.0.0.1:{port}", flush=True)
                await until_signalled()
            finally:
                await runner.cleanup()
        finally:
            await cache.stop()
            await client.close()


async def serve_floor() -> None:
    """Child: what aiohttp + orjson cost for these payloads with no extender logic at all."""

    async def filter_(request: web.Request) -> web.Response:
        args = orjson.loads(await request.read())
        answer = {
            "NodeNames": args["NodeNames"],
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        return web.Response(body=orjson.dumps(answer), content_type=JSON)

    async def prioritize(request: web.Request) -> web.Response:
        args = orjson.loads(await request.read())
        answer = [{"Host": name, "Score": 0} for name in args["NodeNames"]]
        return web.Response(body=orjson.dumps(answer), content_type=JSON)

    app = web.Application(client_max_size=CLIENT_MAX_SIZE)
    app.router.add_post("/v1/filter", filter_)
    app.router.add_post("/v1/prioritize", prioritize)
    # The extender's runner settings (extender/server.py serve()).
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        handler_cancellation=True,
        shutdown_timeout=5.0,
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, reuse_address=True, backlog=1024)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    # As the extender does once its cache has synced (ClusterCache): keep the cyclic GC off the
    # long-lived startup objects, so neither server pays full collections over them.
    gc.collect()
    gc.freeze()
    try:
        print(f"floor server listening on http://127.0.0.1:{port}", flush=True)
        await until_signalled()
    finally:
        await runner.cleanup()


# ----------------------------------------------------------------------------- statistics


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted samples (p99 of 200 samples is the 198th)."""
    if not ordered:
        return float("nan")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(slots=True)
class Stats:
    p50: float
    p99: float
    max: float
    count: int

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> Stats:
        ordered = sorted(samples_ms)
        return cls(
            percentile(ordered, 0.50),
            percentile(ordered, 0.99),
            ordered[-1] if ordered else float("nan"),
            len(ordered),
        )

    def __str__(self) -> str:
        return f"{self.p50:6.2f} {self.p99:7.2f} {self.max:7.2f}"


@dataclass(slots=True)
class Histogram:
    """One verb's `vulcan_extender_request_duration_seconds` as scraped from /metrics."""

    buckets: list[tuple[float, float]]  # (upper bound s, cumulative count), ascending
    total: float
    count: float

    @classmethod
    def parse(cls, text: str, verb: str) -> Histogram:
        label = f'verb="{verb}"'
        buckets: list[tuple[float, float]] = []
        total = count = 0.0
        for line in text.splitlines():
            if not line.startswith(METRIC) or label not in line:
                continue
            name, value = line.rsplit(" ", 1)
            if name.startswith(METRIC + "_bucket{"):
                bound = name.split('le="', 1)[1].split('"', 1)[0]
                buckets.append((float(bound), float(value)))  # float("+Inf") is inf
            elif name.startswith(METRIC + "_sum{"):
                total = float(value)
            elif name.startswith(METRIC + "_count{"):
                count = float(value)
        buckets.sort()
        return cls(buckets, total, count)

    def __sub__(self, before: Histogram) -> Histogram:
        earlier = dict(before.buckets)
        return Histogram(
            [(bound, n - earlier.get(bound, 0.0)) for bound, n in self.buckets],
            self.total - before.total,
            self.count - before.count,
        )

    def mean_ms(self) -> float:
        return 1000 * self.total / self.count if self.count else float("nan")

    def quantile_ms(self, q: float) -> float:
        """Prometheus' histogram_quantile: linear within the bucket holding rank q*count."""
        if not self.count or not self.buckets:
            return float("nan")
        rank = q * self.count
        lower, below = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(bound):
                    return 1000 * lower  # beyond the last finite bucket
                inside = cumulative - below
                fraction = (rank - below) / inside if inside else 1.0
                return 1000 * (lower + (bound - lower) * fraction)
            lower, below = bound, cumulative
        return 1000 * lower


# -------------------------------------------------------------------------------- client

# The two request streams measured at every candidate count.
SAME_POD = "same pod"  # a job's consecutive pods: one request shape, again and again
NEW_SHAPE = "new shape"  # every call a pod with requests not seen before (a job's first pod)
STREAMS = (SAME_POD, NEW_SHAPE)


@dataclass(slots=True)
class Samples:
    filter: list[float]
    prioritize: list[float]
    both: list[float]

    @classmethod
    def empty(cls) -> Samples:
        return cls([], [], [])

    def add(self, filter_s: float, prioritize_s: float) -> None:
        self.filter.append(filter_s * 1000)
        self.prioritize.append(prioritize_s * 1000)
        self.both.append((filter_s + prioritize_s) * 1000)


@dataclass(slots=True)
class Phase:
    """Everything measured for one stream at one candidate count."""

    stream: str
    count: int
    rounds: int
    extender: Samples
    floor: Samples
    passed: int  # filter's verdict on the first request (the rest are similar samples)
    failed: int
    reasons: dict[str, int]
    request_kib: float
    server_filter: Histogram
    server_prioritize: Histogram
    extender_cpu_ms: float  # per filter+prioritize pair
    floor_cpu_ms: float
    client_cpu_ms: float  # per round (one pair to each server)


async def post(session: aiohttp.ClientSession, url: str, body: bytes) -> bytes:
    async with session.post(url, data=body, headers=HEADERS) as response:
        answer = await response.read()
        if response.status != 200:
            raise BenchError(f"POST {url}: HTTP {response.status}: {answer[:300]!r}")
    return answer


async def pair(
    session: aiohttp.ClientSession, base: str, body: bytes
) -> tuple[float, float, bytes, bytes]:
    """filter, then prioritize, as kube-scheduler calls them for one pod: (seconds, seconds,
    filter answer, prioritize answer)."""
    start = time.perf_counter()
    filtered = await post(session, base + "/v1/filter", body)
    middle = time.perf_counter()
    scored = await post(session, base + "/v1/prioritize", body)
    end = time.perf_counter()
    return middle - start, end - middle, filtered, scored


def check_extender(
    names: list[str], filtered: bytes, scored: bytes
) -> tuple[int, int, dict[str, int]]:
    """The extender's answers are well-formed and cover every candidate: (passed, failed,
    reason -> count)."""
    result = orjson.loads(filtered)
    if result.get("Error"):
        raise BenchError(f"filter answered an error: {result['Error']}")
    passed = result.get("NodeNames") or []
    failed = {
        **(result.get("FailedNodes") or {}),
        **(result.get("FailedAndUnresolvableNodes") or {}),
    }
    if not set(passed) <= set(names) or len(passed) + len(failed) != len(names):
        raise BenchError(
            f"filter of {len(names)} candidates returned {len(passed)} passing and "
            f"{len(failed)} failed nodes"
        )
    scores = orjson.loads(scored)
    if not isinstance(scores, list) or len(scores) != len(names):
        raise BenchError(f"prioritize of {len(names)} candidates returned {len(scores)} scores")
    if not all(type(s["Score"]) is int and 0 <= s["Score"] <= 10 for s in scores):
        raise BenchError("prioritize returned a score outside 0..10 or not an integer")
    reasons: dict[str, int] = {}
    for reason in failed.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    return len(passed), len(failed), reasons


async def scrape(session: aiohttp.ClientSession, base: str) -> str:
    async with session.get(base + "/metrics") as response:
        return await response.text()


def cache_count(metrics_text: str, kind: str) -> int:
    prefix = f'vulcan_cache_objects{{kind="{kind}"}} '
    for line in metrics_text.splitlines():
        if line.startswith(prefix):
            return int(float(line[len(prefix) :]))
    return -1


class Pods:
    """The pod of each request: the same one (SAME_POD), or one whose cpu request no earlier
    request had (NEW_SHAPE: 4001m, 4002m, ... over the whole run), so nothing the extender
    remembers per request shape can answer it."""

    def __init__(self) -> None:
        self.same = scheduling_pod()
        self._next_milli = 4_001

    def next(self, stream: str) -> dict[str, Any]:
        if stream == SAME_POD:
            return self.same
        self._next_milli += 1
        pod = scheduling_pod(f"{self._next_milli - 1}m")
        # Another pod (the first of another job): its own UID and resourceVersion, as the API
        # server gives it. One UID and version with different requests never happens for real,
        # and would let anything the extender keeps per pod version answer for the wrong pod.
        pod["metadata"]["uid"] = f"6f1c2b9e-3d4a-4c8e-9b7a-{self._next_milli:012d}"
        pod["metadata"]["resourceVersion"] = str(48_213_377 + self._next_milli)
        return pod


async def run_phase(
    session: aiohttp.ClientSession,
    extender: ServerProcess,
    floor: ServerProcess,
    names: list[str],
    pods: Pods,
    stream: str,
    count: int,
    rounds: int,
    rng: random.Random,
) -> Phase:
    samples = [rng.sample(names, count) for _ in range(WARMUP + rounds)]
    bodies = [extender_args(pods.next(stream), sample) for sample in samples]
    request_kib = sum(map(len, bodies)) / len(bodies) / 1024

    if stream == SAME_POD:
        # The steady state of a long job: the extender has seen this pod's shape on every node.
        await pair(session, extender.url, extender_args(pods.same, names))
    passed = failed = 0
    reasons: dict[str, int] = {}
    for index in range(WARMUP):  # untimed: warms both servers and checks the extender
        _, _, filtered, scored = await pair(session, extender.url, bodies[index])
        if index == 0:
            passed, failed, reasons = check_extender(samples[index], filtered, scored)
        await pair(session, floor.url, bodies[index])

    ext, base = Samples.empty(), Samples.empty()
    before = await scrape(session, extender.url)
    ext_cpu, floor_cpu = extender.cpu_seconds(), floor.cpu_seconds()
    client_cpu = time.process_time()
    gc.collect()
    gc.disable()  # the client's own GC pauses would land in either server's samples
    try:
        for index in range(WARMUP, WARMUP + rounds):
            body = bodies[index]
            order = ((extender, ext), (floor, base))
            for server, into in order if index % 2 == 0 else order[::-1]:
                filter_s, prioritize_s, _, _ = await pair(session, server.url, body)
                into.add(filter_s, prioritize_s)
    finally:
        gc.enable()
    client_cpu = time.process_time() - client_cpu
    ext_cpu, floor_cpu = extender.cpu_seconds() - ext_cpu, floor.cpu_seconds() - floor_cpu
    after = await scrape(session, extender.url)
    return Phase(
        stream=stream,
        count=count,
        rounds=rounds,
        extender=ext,
        floor=base,
        passed=passed,
        failed=failed,
        reasons=reasons,
        request_kib=request_kib,
        server_filter=Histogram.parse(after, "filter") - Histogram.parse(before, "filter"),
        server_prioritize=(
            Histogram.parse(after, "prioritize") - Histogram.parse(before, "prioritize")
        ),
        extender_cpu_ms=1000 * ext_cpu / rounds,
        floor_cpu_ms=1000 * floor_cpu / rounds,
        client_cpu_ms=1000 * client_cpu / rounds,
    )


# ----------------------------------------------------------------------------- reporting


def say(text: str = "") -> None:
    print(text, flush=True)


def label(count: int) -> str:
    return f"{count // 1000}k" if count >= 1000 and count % 1000 == 0 else str(count)


def ratio(value: float, baseline: float) -> float:
    return value / baseline if baseline else float("nan")


def report_count(phases: Sequence[Phase]) -> None:
    """The table of one candidate count: a block of rows per stream."""
    first = phases[0]
    reasons = ", ".join(f"{n}x {r!r}" for r, n in sorted(first.reasons.items())) or "none"
    say(
        f"\n{first.count} candidates ({first.rounds} rounds per stream, request "
        f"{first.request_kib:.0f} KiB): filter passed {first.passed}, failed {first.failed} "
        f"({reasons})"
    )
    say(
        f"  {'':30} {'extender (ms)':>22}   {'floor (ms)':>22}   {'ratio':>11}"
        f"   {'extender server-side (ms)':>26}"
    )
    say(
        f"  {'stream':10}{'call':20} {'p50':>6} {'p99':>7} {'max':>7}   {'p50':>6} {'p99':>7} "
        f"{'max':>7}   {'p50':>5} {'p99':>5}   {'mean':>6} {'~p50':>6} {'~p99':>6}"
    )
    for phase in phases:
        rows = (
            ("filter+prioritize", phase.extender.both, phase.floor.both, None),
            ("filter", phase.extender.filter, phase.floor.filter, phase.server_filter),
            (
                "prioritize",
                phase.extender.prioritize,
                phase.floor.prioritize,
                phase.server_prioritize,
            ),
        )
        for index, (name, ext_samples, floor_samples, histogram) in enumerate(rows):
            ext, base = Stats.of(ext_samples), Stats.of(floor_samples)
            stream = phase.stream if index == 0 else ""
            line = (
                f"  {stream:10}{name:20} {ext}   {base}   {ratio(ext.p50, base.p50):5.2f} "
                f"{ratio(ext.p99, base.p99):5.2f}"
            )
            if histogram is not None:
                line += (
                    f"   {histogram.mean_ms():6.2f} {histogram.quantile_ms(0.5):6.2f} "
                    f"{histogram.quantile_ms(0.99):6.2f}"
                )
            say(line)
    for phase in phases:
        say(
            f"  {phase.stream}: CPU per filter+prioritize: extender {phase.extender_cpu_ms:.2f} "
            f"ms, floor {phase.floor_cpu_ms:.2f} ms; client {phase.client_cpu_ms:.2f} ms per "
            f"round (both servers)"
        )


def bench_lines(phases: Sequence[Phase]) -> list[str]:
    lines = []
    for phase in phases:
        prefix = "" if phase.stream == SAME_POD else "new_shape_"
        metrics: tuple[tuple[str, list[float], list[float], tuple[str, ...]], ...] = (
            ("filter_prioritize", phase.extender.both, phase.floor.both, ("p50", "p99")),
        )
        if phase.stream == SAME_POD:
            metrics += (
                ("filter", phase.extender.filter, phase.floor.filter, ("p99",)),
                ("prioritize", phase.extender.prioritize, phase.floor.prioritize, ("p99",)),
            )
        for metric, ext_samples, floor_samples, quantiles in metrics:
            ext, base = Stats.of(ext_samples), Stats.of(floor_samples)
            for quantile in quantiles:
                value, baseline = getattr(ext, quantile), getattr(base, quantile)
                lines.append(
                    f"BENCH extender.{prefix}{metric}_{quantile}_{label(phase.count)} "
                    f"value={value:.3f} unit=ms baseline={baseline:.3f} "
                    f"ratio={ratio(value, baseline):.3f}"
                )
    return lines


def target_lines(phases: dict[tuple[str, int], Phase]) -> list[str]:
    checks: list[tuple[str, float, float]] = []
    for stream in STREAMS:
        for (phase_stream, count), phase in phases.items():
            if phase_stream == stream and count <= 500:
                stats = Stats.of(phase.extender.both)
                checks.append((f"{stream}: p50 at {count} candidates", stats.p50, 1.0))
                checks.append((f"{stream}: p99 at {count} candidates", stats.p99, 5.0))
        headline = phases.get((stream, HEADLINE))
        if headline is not None:
            ext, base = Stats.of(headline.extender.both), Stats.of(headline.floor.both)
            checks.append((f"{stream}: p99 at {label(HEADLINE)}", ext.p99, 12.0))
            checks.append(
                (
                    f"{stream}: p99 ratio to the floor at {label(HEADLINE)}",
                    ratio(ext.p99, base.p99),
                    3.0,
                )
            )
    return [
        f"  {name:46} {value:8.2f} <= {limit:<5g} {'met' if value <= limit else 'MISSED'}"
        for name, value, limit in checks
    ]


# ------------------------------------------------------------------------------------ main


async def bench(args: argparse.Namespace) -> None:
    # SIGINT/SIGTERM cancel the run, so the exit stack stops both children.
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main_task.cancel)
    started = time.perf_counter()
    names = node_names(args.nodes)
    pods = Pods()
    rng = random.Random(SEED + 1)
    phases: dict[tuple[str, int], Phase] = {}
    say(
        f"extender child: {args.nodes} nodes (e.g. {names[0]}), {args.pods} bound pods; "
        f"scheduling pod {len(orjson.dumps(pods.same))} B; candidates "
        f"{', '.join(map(str, args.counts))}; streams: {SAME_POD!r} (a job's consecutive pods, "
        f"one request shape) and {NEW_SHAPE!r} (a request shape never seen before, every call)"
    )
    async with contextlib.AsyncExitStack() as stack:
        extender = ServerProcess(
            "vulcan extender",
            self_argv("--serve-extender", "--nodes", str(args.nodes), "--pods", str(args.pods)),
        )
        floor = ServerProcess("floor server", self_argv("--serve-floor"))
        stack.push_async_callback(extender.stop)
        stack.push_async_callback(floor.stop)
        await floor.start()
        await extender.start(STARTUP_TIMEOUT)
        session = await stack.enter_async_context(
            aiohttp.ClientSession(
                # One keep-alive connection per server, one request at a time.
                connector=aiohttp.TCPConnector(limit=2, limit_per_host=1),
                timeout=aiohttp.ClientTimeout(total=60),
            )
        )
        metrics = await scrape(session, extender.url)
        cached = cache_count(metrics, "nodes"), cache_count(metrics, "pods")
        ready_rss = extender.rss_mib()
        say(
            f"extender {extender.url} (pid {extender.pid}) ready after "
            f"{time.perf_counter() - started:.1f} s with {cached[0]} nodes and {cached[1]} pods "
            f"cached, RSS {ready_rss:.0f} MiB; floor {floor.url} (pid {floor.pid})"
        )
        if cached != (args.nodes, args.pods):
            raise BenchError(f"the extender's cache holds {cached}, not {args.nodes, args.pods}")
        for count in args.counts:
            rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS).get(count, 200)
            for stream in STREAMS:
                phases[stream, count] = await run_phase(
                    session, extender, floor, names, pods, stream, count, rounds, rng
                )
            report_count([phases[stream, count] for stream in STREAMS])
        say(
            f"\nextender RSS {extender.rss_mib():.0f} MiB at the end ({ready_rss:.0f} MiB when "
            f"ready, peak {extender.hwm_mib():.0f} MiB)"
        )

    say(f"total time {time.perf_counter() - started:.0f} s")
    say("\ntargets (filter+prioritize, client-measured):")
    for line in target_lines(phases):
        say(line)
    say()
    for line in bench_lines([phases[stream, count] for count in args.counts for stream in STREAMS]):
        say(line)
    headline = phases[SAME_POD, HEADLINE]
    ext, base = Stats.of(headline.extender.both), Stats.of(headline.floor.both)
    say(
        f"filter_prioritize_p99_ms_{label(HEADLINE)}={ext.p99:.3f} "
        f"floor_p99_ms_{label(HEADLINE)}={base.p99:.3f} ratio={ratio(ext.p99, base.p99):.3f}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.extender_latency", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 500 and 5k, few rounds")
    parser.add_argument("--nodes", type=int, default=NODES, help="nodes in the cluster")
    parser.add_argument("--pods", type=int, default=PODS, help="pods bound to them")
    parser.add_argument(
        "--counts",
        help=f"comma-separated candidate counts (must include {HEADLINE}); default "
        f"{','.join(map(str, COUNTS))}",
    )
    parser.add_argument(
        "--rounds", type=int, help="measured rounds per stream at every candidate count"
    )
    # Internal: the child processes are this module run with these flags.
    parser.add_argument("--serve-extender", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.counts:
        try:
            args.counts = sorted({int(c) for c in args.counts.split(",")})
        except ValueError:
            parser.error("--counts takes comma-separated integers")
    else:
        args.counts = list(QUICK_COUNTS if args.quick else COUNTS)
    if HEADLINE not in args.counts:
        parser.error(f"--counts must include {HEADLINE} (the last line reports it)")
    if min(args.counts) < 1 or max(args.counts) > args.nodes:
        parser.error("candidate counts must be between 1 and --nodes")
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    from vulcan.sim_commands import run_async  # uvloop when installed, as `vulcan` runs

    args = parse_args(argv)
    if args.serve_extender:
        with contextlib.suppress(KeyboardInterrupt):
            run_async(serve_extender(args.nodes, args.pods))
        return 0
    if args.serve_floor:
        with contextlib.suppress(KeyboardInterrupt):
            run_async(serve_floor())
        return 0
    try:
        run_async(bench(args))
    except asyncio.CancelledError:
        print("interrupted; the servers were stopped", file=sys.stderr)
        return 130
    except (BenchError, aiohttp.ClientError, TimeoutError) as exc:
        print(f"benchmark failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
