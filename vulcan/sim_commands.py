"""`vulcan sim ...`: run parts of the embedded cluster as processes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

from vulcan.logs import setup_logging


async def _serve_apiserver(args: argparse.Namespace) -> None:
    from sim.apiserver.server import EmbeddedApiServer

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = EmbeddedApiServer(
        port=args.port,
        crd_dir=Path(args.crds) if args.crds else None,
        watch_history=args.watch_history,
        kubeconfig_out=args.kubeconfig_out,
    )
    async with server:
        print(f"embedded API server listening on {server.url}", flush=True)
        if args.kubeconfig_out:
            print(f"kubeconfig written to {args.kubeconfig_out}", flush=True)
        await stop.wait()


def run_apiserver(args: argparse.Namespace) -> int:
    setup_logging(args.log_format)
    with contextlib.suppress(KeyboardInterrupt):
        run_async(_serve_apiserver(args))
    return 0


def run_async(coro: Any) -> Any:
    """Run on uvloop when it is installed (it is a dependency on Linux), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
