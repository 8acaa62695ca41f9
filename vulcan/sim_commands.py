"""`vulcan sim ...`: run parts of the embedded cluster as processes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
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
        default_not_ready_toleration_seconds=args.default_not_ready_toleration_seconds,
        default_unreachable_toleration_seconds=args.default_unreachable_toleration_seconds,
        token_auth_file=args.token_auth_file,
        audit_log_path=args.audit_log_path,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        tls_ca_file=args.tls_ca_file,
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


async def _serve_scheduler(args: argparse.Namespace) -> None:
    from core.kube.client import KubeClient
    from core.kube.flags import options_from_args
    from sim.scheduler.config import load_config
    from sim.scheduler.scheduler import Scheduler

    config = load_config(args.config)
    options = options_from_args(args)
    # The configuration's clientConnection sets the client's rate, as for kube-scheduler.
    options.qps, options.burst = config.qps, config.burst
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with await KubeClient.connect(options) as client:
        scheduler = Scheduler(client, config, seed=args.seed)
        await scheduler.start()
        print(
            "scheduler stand-in running (profiles: "
            f"{', '.join(config.scheduler_names)}; extenders: {len(config.extenders)})",
            flush=True,
        )
        try:
            await stop.wait()
        finally:
            await scheduler.stop()
            if args.extender_stats_out:
                import orjson

                Path(args.extender_stats_out).write_bytes(
                    orjson.dumps(scheduler.extender_latencies())
                )


def run_scheduler(args: argparse.Namespace) -> int:
    from sim.scheduler.config import ConfigError

    setup_logging(args.log_format)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            run_async(_serve_scheduler(args))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def run_async(coro: Any) -> Any:
    """Run on uvloop when it is installed (it is a dependency on Linux), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
