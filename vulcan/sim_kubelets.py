"""`vulcan sim kubelets`: hollow nodes for any API server, real or embedded (kubemark's use).

The nodes register (or adopt existing Nodes of the same names), heartbeat through their Leases
in kube-node-lease, and run the pods bound to them exactly as `vulcan sim up`'s do (durations,
exit codes, gangs, termination; see `sim.kubelet`). On SIGINT/SIGTERM the kubelets stop and,
as when a real kubelet (or a kubemark hollow-node pod) goes away, their Nodes stay: the node
lifecycle controller marks them NotReady once their leases lapse, and starting the command
again with the same names adopts them. `--delete-nodes` deletes them on the way out instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from core.kube.flags import add_client_flags
from vulcan.sim_flags import duration_or_forever

READY_PREFIX = "hollow nodes ready:"


def add_kubelets_flags(parser: argparse.ArgumentParser) -> None:
    # Every node renews its Lease each 10 s: a thousand nodes need 100 requests/s on their own,
    # so the client is unlimited unless told otherwise.
    add_client_flags(parser, qps=0, burst=0)
    parser.add_argument(
        "--nodes", type=int, help="how many hollow nodes (with one --node-profile without count=)"
    )
    parser.add_argument(
        "--node-profile",
        action="append",
        metavar="SPEC",
        help="node capacity as for `vulcan sim up`, e.g. cpu=32,memory=128Gi,nvidia.com/gpu=8; "
        "add count=N (and label.KEY=VALUE items) to give several profiles; numa=CELLSxCPUS "
        "(e.g. 2x16) and tm-policy=none|best-effort|restricted|single-numa-node give it NUMA "
        "cells and a Numatopology (repeatable)",
    )
    parser.add_argument(
        "--name-prefix",
        default="hollow-node-",
        help="node names are PREFIX0, PREFIX1, ... (default hollow-node-)",
    )
    parser.add_argument(
        "--pod-duration",
        type=duration_or_forever,
        default=10.0,
        help="how long a pod runs without a vulcan.sh/sim-duration annotation "
        "(Go duration; 'forever' = until deleted; default 10s)",
    )
    parser.add_argument(
        "--delete-nodes",
        action="store_true",
        help="delete the Nodes when stopping (default: leave them, as a stopped kubelet does)",
    )
    parser.add_argument("--log-format", choices=("text", "json"), default="text")


async def _serve(args: argparse.Namespace) -> int:
    from core.kube.client import NODES, ApiError, KubeClient
    from core.kube.flags import options_from_args
    from sim.kubelet import HollowKubelets, expand_profiles, parse_node_profile

    profiles = expand_profiles([parse_node_profile(p) for p in args.node_profile or ()], args.nodes)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with await KubeClient.connect(options_from_args(args, "kubelets")) as client:
        kubelets = HollowKubelets(
            client, profiles, name_prefix=args.name_prefix, default_duration=args.pod_duration
        )
        starting = asyncio.create_task(kubelets.start())
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([starting, stopper], return_when=asyncio.FIRST_COMPLETED)
            if starting.done():
                starting.result()  # raises what kept the nodes from registering
                names = kubelets.node_names
                print(f"{READY_PREFIX} {len(names)} ({names[0]} .. {names[-1]})", flush=True)
                await stopper
        finally:
            for task in (starting, stopper):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await kubelets.stop()
        if args.delete_nodes:
            for name in kubelets.node_names:
                try:
                    await client.delete(NODES, name)
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            print(f"stopped; deleted {len(kubelets.node_names)} nodes", flush=True)
        else:
            print(f"stopped; {len(kubelets.node_names)} nodes left registered", flush=True)
    return 0


def run_kubelets(args: argparse.Namespace) -> int:
    from core.kube.client import ApiError
    from vulcan.logs import setup_logging
    from vulcan.sim_commands import run_async

    setup_logging(args.log_format)
    try:
        return int(run_async(_serve(args)))
    except (ValueError, ApiError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
