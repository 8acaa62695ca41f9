"""`vulcan sim up` as a child process of a benchmark: start it, wait for `cluster ready`, keep
its output drained, stop it with Ctrl-C (SIGINT) as a user would."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from core.kube.client import KubeClient
from core.kube.flags import ClientOptions

_DRAINS: set[asyncio.Task[None]] = set()  # keeps the children's output drained


async def start_sim_up(
    nodes: int,
    state: Path,
    *extra: str,
    start_timeout: float = 300.0,
    profile: str = "cpu=32,memory=128Gi,pods=110",
) -> asyncio.subprocess.Process:
    """A cluster of `nodes` hollow nodes (`profile`) whose pods run until deleted, its
    kubeconfig at `state/kubeconfig`; `extra` are more `vulcan sim up` flags."""
    argv = [
        sys.executable,
        "-m",
        "vulcan",
        "sim",
        "up",
        "--nodes",
        str(nodes),
        "--node-profile",
        profile,
        "--pod-duration",
        "forever",
        "--state-dir",
        str(state),
        "--kubeconfig-out",
        str(state / "kubeconfig"),
        "--start-timeout",
        str(start_timeout),
        *extra,
    ]
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    while True:
        line = await asyncio.wait_for(process.stdout.readline(), start_timeout * 4)
        if not line:
            err = await process.stderr.read() if process.stderr else b""
            raise RuntimeError(f"vulcan sim up failed: {err.decode()[-2000:]}")
        if line.startswith(b"cluster ready"):
            break
    _DRAINS.add(asyncio.create_task(_drain(process)))
    return process


async def _drain(process: asyncio.subprocess.Process) -> None:
    assert process.stdout is not None and process.stderr is not None
    await asyncio.gather(process.stdout.read(), process.stderr.read())


async def stop_sim_up(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGINT)
    try:
        await asyncio.wait_for(process.wait(), 60)
    except TimeoutError:
        process.kill()
        await process.wait()


@dataclass(slots=True)
class SimCluster:
    client: KubeClient
    state: Path
    extender: str | None = None  # its base URL when known (else `sim up`'s configuration says)

    def extender_url(self) -> str | None:
        """The extender's base URL, from the scheduler configuration `sim up` wrote."""
        if self.extender is not None:
            return self.extender
        config = yaml.safe_load((self.state / "scheduler-config.yaml").read_text())
        extenders = config.get("extenders") or []
        if not extenders:
            return None
        return str(extenders[0]["urlPrefix"]).rsplit("/v1", 1)[0]

    async def extender_debug(self, path: str) -> Any:
        """One of the extender's debug views (`/debug/gangs/<ns>/<name>`, `/debug/queues`) as
        JSON; None when there is no extender or it does not answer."""
        base = self.extender_url()
        if base is None:
            return None
        try:
            async with aiohttp.ClientSession() as session, session.get(base + path) as response:
                return await response.json(content_type=None)
        except (aiohttp.ClientError, ValueError):
            return None

    async def extender_metrics(self, prefixes: tuple[str, ...]) -> list[str]:
        """The extender's /metrics lines (no comments) whose metric name starts with one of
        `prefixes`: the extender is found through the scheduler configuration `sim up` wrote."""
        base = self.extender_url()
        if base is None:
            return []
        async with aiohttp.ClientSession() as session, session.get(base + "/metrics") as response:
            text = await response.text()
        return [
            line
            for line in text.splitlines()
            if not line.startswith("#") and line.startswith(prefixes)
        ]

    async def extender_totals(self) -> dict[str, float]:
        """Counts and sums of the extender's scheduling-pass and GC-pause histograms, to tell
        what a phase of a benchmark cost the extender (differences of two readings)."""
        totals: dict[str, float] = {}
        lines = await self.extender_metrics(
            (
                "vulcan_schedule_pass_duration_seconds_",
                "vulcan_gc_pause_seconds_",
                "vulcan_extender_request_duration_seconds_",
                "vulcan_gang_admission_duration_seconds_",
            )
        )
        for line in lines:
            name, _, value = line.rpartition(" ")
            if "_bucket" not in name:
                totals[name] = float(value)
        return totals


def describe_totals(before: dict[str, float], after: dict[str, float]) -> str:
    """`passes 120 taking 1.52 s; GC gen2 3 pauses taking 0.41 s; 1000 filter calls, 0.80 ms
    each ...` between two readings (a held bind's time includes its wait for the gang)."""

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    passes = "vulcan_schedule_pass_duration_seconds"
    parts = [f"passes {delta(passes + '_count'):.0f} taking {delta(passes + '_sum'):.2f} s"]
    for generation in ("0", "1", "2"):
        label = f'{{generation="{generation}"}}'
        count = delta(f"vulcan_gc_pause_seconds_count{label}")
        took = delta(f"vulcan_gc_pause_seconds_sum{label}")
        parts.append(f"GC gen{generation} {count:.0f} pauses taking {took:.2f} s")
    requests = "vulcan_extender_request_duration_seconds"
    for verb in ("filter", "prioritize", "bind"):
        label = f'{{verb="{verb}"}}'
        count = delta(f"{requests}_count{label}")
        if count:
            mean = delta(f"{requests}_sum{label}") / count * 1000
            parts.append(f"{count:.0f} {verb} calls, {mean:.2f} ms each")
    gangs = "vulcan_gang_admission_duration_seconds"
    label = '{queue="default"}'
    count = delta(f"{gangs}_count{label}")
    if count:
        mean = delta(f"{gangs}_sum{label}") / count
        parts.append(f"gang admission as the extender saw it {mean:.2f} s")
    return "; ".join(parts)


@contextlib.asynccontextmanager
async def running_cluster(
    nodes: int, state_dir: str | None, start_timeout: float, *extra: str
) -> AsyncIterator[SimCluster]:
    """`vulcan sim up` (in `state_dir`, else a temporary directory) with a client on it for the
    benchmark; says how long the start took; stops everything on the way out."""
    with tempfile.TemporaryDirectory(prefix="vulcan-bench-") as tmp:
        state = Path(state_dir or tmp)
        state.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        process = await start_sim_up(nodes, state, *extra, start_timeout=start_timeout)
        print(f"cluster of {nodes} nodes up in {time.monotonic() - started:.1f}s", flush=True)
        client = await KubeClient.connect(
            ClientOptions(kubeconfig=str(state / "kubeconfig"), qps=0, burst=0)
        )
        try:
            yield SimCluster(client, state)
        finally:
            await client.close()
            await stop_sim_up(process)
