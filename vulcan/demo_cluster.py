"""The embedded cluster every `vulcan demo` runs on: `vulcan sim up`'s flags for it (4 hollow
nodes with 1 GPU each), a stop that survives Ctrl-C, and Ctrl-C / SIGTERM turned into a clean
cancellation of the demo."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import signal
import sys
from pathlib import Path
from typing import Any

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
