"""`vulcan sim up` as a child process of a benchmark: start it, wait for `cluster ready`, keep
its output drained, stop it with Ctrl-C (SIGINT) as a user would."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path

_DRAINS: set[asyncio.Task[None]] = set()  # keeps the children's output drained


async def start_sim_up(
    nodes: int, state: Path, *extra: str, start_timeout: float = 300.0
) -> asyncio.subprocess.Process:
    """A cluster of `nodes` hollow nodes (cpu=32, memory=128Gi, pods=110) whose pods run until
    deleted, its kubeconfig at `state/kubeconfig`; `extra` are more `vulcan sim up` flags."""
    argv = [
        sys.executable,
        "-m",
        "vulcan",
        "sim",
        "up",
        "--nodes",
        str(nodes),
        "--node-profile",
        "cpu=32,memory=128Gi,pods=110",
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
