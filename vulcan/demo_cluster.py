"""The embedded cluster every `vulcan demo` runs on: `vulcan sim up`'s flags for it (4 hollow
nodes with 1 GPU each), a stop that survives Ctrl-C, Ctrl-C / SIGTERM turned into a clean
cancellation of the demo, and the frame of a demo with vulcan's controllers (a fresh cluster, a
line per change, the logs kept when it fails)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.kube.client import KubeClient

NODES = 4
NODE_PROFILE = "cpu=8,memory=32Gi,nvidia.com/gpu=1"
START_TIMEOUT = 60.0


def _cluster_args(
    state_dir: Path, with_extender: bool, extra: tuple[str, ...] = ()
) -> argparse.Namespace:
    """`vulcan sim up`'s flags, parsed by its own parser so every default stays its own."""
    from vulcan.sim_flags import add_up_flags

    parser = argparse.ArgumentParser(add_help=False)
    add_up_flags(parser)
    argv = [
        "--nodes",
        str(NODES),
        "--node-profile",
        NODE_PROFILE,
        "--state-dir",
        str(state_dir),
        "--start-timeout",
        str(START_TIMEOUT),
        *extra,
    ]
    return parser.parse_args([*argv, "--with-extender"] if with_extender else argv)


async def _stop_fully(cluster: Any) -> None:
    """Stop the cluster even when Ctrl-C cancels us meanwhile: a stop cut short would leave the
    API server process running (the children have their own session, so the terminal's SIGINT
    does not reach them). The cancellation is passed on once the cluster is down."""

    async def stop() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            await cluster.stop()

    stopping = asyncio.ensure_future(stop())
    cancelled = False
    while True:
        try:
            await asyncio.shield(stopping)
            break
        except asyncio.CancelledError:
            if stopping.done():
                break
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


async def _interruptible(coro: Any) -> int:
    """Ctrl-C / SIGTERM cancel the demo, whose `finally`s stop the clusters."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return int(await coro)
    except asyncio.CancelledError:
        task.uncancel()
        print("\ninterrupted; clusters stopped", file=sys.stderr, flush=True)
        return 130


class Watch:
    """What a demo on a running cluster says: one line per change, stamped with the time since
    the demo began."""

    def __init__(self, client: KubeClient, began: float) -> None:
        self.client = client
        self.began = began

    def say(self, text: str) -> None:
        print(f"  {time.monotonic() - self.began:5.1f}s  {text}", flush=True)

    async def follow(
        self,
        look: Callable[[], Awaitable[tuple[str, bool | None]]],
        timeout: float,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> bool:
        """Print `look()`'s line each time it changes (then run `after`, for anything else
        the demo shows), until it says the demo succeeded (True) or failed (False); False when
        `timeout` seconds pass first."""
        last = ""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line, done = await look()
            if line != last:
                self.say(line)
                last = line
            if after is not None:
                await after()
            if done is not None:
                return done
            await asyncio.sleep(0.1)
        return False


async def controllers_demo(
    name: str,
    intro: str,
    body: Callable[[Watch], Awaitable[bool]],
    success: str,
    extra: tuple[str, ...] = (),
) -> int:
    """Run `body` on a fresh embedded cluster with vulcan's extender and controllers, then
    stop it: exit status 0 when `body` says it succeeded (its state directory is removed),
    1 otherwise (the logs are kept and the demo says where)."""
    from vulcan.sim_up import Cluster

    began = time.monotonic()
    print(intro, flush=True)
    state_dir = Path(tempfile.mkdtemp(prefix=f"vulcan-demo-{name}-"))
    cluster = Cluster(_cluster_args(state_dir, True, ("--with-controllers", *extra)))
    ok = False
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            await cluster.start()
        assert cluster.client is not None
        ok = await body(Watch(cluster.client, began))
    finally:
        await _stop_fully(cluster)
        if ok:
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            print(f"logs kept in {state_dir}", flush=True)
    print(
        f"\ndemo finished in {time.monotonic() - began:.1f}s: {success if ok else 'FAILED'}",
        flush=True,
    )
    return 0 if ok else 1


def run_demo(demo: Callable[[], Awaitable[int]]) -> int:
    """A demo as a command: quiet logs, uvloop, Ctrl-C stopping its clusters."""
    import logging

    from vulcan.logs import setup_logging
    from vulcan.sim_commands import run_async

    setup_logging("text", logging.WARNING)
    return int(run_async(_interruptible(demo())))
