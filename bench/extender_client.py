"""The client of the extender-latency benchmark: the two request streams, filter+prioritize
pairs as kube-scheduler sends them, the check of the extender's answers, /metrics scrapes, and
one measured phase (`run_phase`: one stream at one candidate count against both servers)."""

from __future__ import annotations

import gc
import random
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from bench.apiserver_common import BenchError, ServerProcess
from bench.extender_objects import extender_args, scheduling_pod
from bench.extender_settings import HEADERS, WARMUP
from bench.extender_stats import Histogram

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
    """The extender's answers are well-formed, filter's covering every candidate and
    prioritize's naming candidates only, each once (it omits those at the lowest score):
    (passed, failed, reason -> count)."""
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
    hosts = [s.get("Host") for s in scores] if isinstance(scores, list) else None
    if hosts is None or len(set(hosts)) != len(hosts) or not set(hosts) <= set(names):
        raise BenchError(
            f"prioritize of {len(names)} candidates named other nodes: {scored[:200]!r}"
        )
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
