"""`vulcan sim up --control-plane real`: a real local cluster in one command (see
vulcan.real_cluster.cluster), its kubeconfig printed, stopped and removed on Ctrl-C/SIGTERM
(a cluster that failed keeps its state directory, for its logs).

Start-up runs in a worker thread; the signals are handled on the event loop, which sets the
cluster's `cancel` event: start-up stops at its next wait, and everything started is stopped by
pid and the temporary directories removed before the command exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import sys
import threading
from pathlib import Path

from vulcan.real_cluster.assets import AssetsError, find_assets
from vulcan.real_cluster.cluster import LocalCluster, Settings
from vulcan.real_cluster.manifests import KubectlError, missing_requirement
from vulcan.real_cluster.processes import Cancelled, StartError

READY_LINE = "cluster ready"  # as the embedded cluster's


def _duration(seconds: float | None) -> str:
    return "forever" if seconds is None else f"{seconds:g}s"


def settings_of(args: argparse.Namespace) -> Settings:
    return Settings(
        mode=args.install_mode,
        node_profiles=tuple(args.node_profile or ()),
        nodes=args.nodes,
        pod_duration=_duration(args.pod_duration),
        extender_flags=(
            f"--gang-backoff={_duration(args.gang_backoff)}",
            f"--member-reach-timeout={_duration(args.member_reach_timeout)}",
            f"--scheduler-memo={args.scheduler_memo}",
        ),
        extender_conf=Path(args.extender_config) if args.extender_config else None,
        apiserver_flags=(
            f"--default-not-ready-toleration-seconds={args.pod_eviction_timeout}",
            f"--default-unreachable-toleration-seconds={args.pod_eviction_timeout}",
        ),
        controller_manager_flags=(
            f"--node-monitor-grace-period={_duration(args.node_monitor_grace_period)}",
        ),
        log_format=args.log_format,
        timeout=args.start_timeout,
    )


def _say(line: str) -> None:
    print(line, flush=True)


def _ready(cluster: LocalCluster, kubeconfig_out: str | None) -> None:
    kubeconfig = cluster.kubeconfig
    if kubeconfig_out:
        out = Path(kubeconfig_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.touch(mode=0o600)
        shutil.copyfile(kubeconfig, out)
        kubeconfig = out
    _say(f"kubeconfig: {kubeconfig}")
    _say(f"  export KUBECONFIG={kubeconfig}")
    _say("  kubectl get nodes")
    _say(f"{READY_LINE} (Ctrl-C to stop)")


async def _up(args: argparse.Namespace) -> int:
    cancel = threading.Event()
    stop = asyncio.Event()

    def interrupted() -> None:
        cancel.set()
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, interrupted)
    try:
        settings = settings_of(args)
        settings.check()
        # Unpacking .xz binaries takes seconds the first time: off the loop.
        assets = await asyncio.to_thread(find_assets, args.kube_assets)
        why = missing_requirement()
        if why is not None:
            raise ValueError(why)
    except (AssetsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    if cancel.is_set():
        return 0
    root = Path(args.state_dir) if args.state_dir else None
    cluster = LocalCluster(assets, settings, root=root, cancel=cancel, progress=_say)
    failed = False
    try:
        await asyncio.to_thread(cluster.start)
        _ready(cluster, args.kubeconfig_out)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            why = cluster.failed()
            if why is not None:
                failed = True
                print(f"error: {why}", file=sys.stderr, flush=True)
                return 1
        return 0
    except Cancelled:
        return 0
    except (StartError, KubectlError, ValueError, OSError) as exc:
        await asyncio.sleep(0)  # the signal's handler, if one came with the failure, runs first
        if cancel.is_set():
            # Interrupted: a child started as the Ctrl-C came (before it left the terminal's
            # process group) was killed by it too; its failure is the interrupt, not an error.
            return 0
        failed = True
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        # A failed start keeps its logs (its processes are stopped all the same).
        await asyncio.to_thread(cluster.stop, keep_root=failed)
        _say(f"stopped (logs kept in {cluster.plane.logs})" if failed else "stopped")


def run_real(args: argparse.Namespace) -> int:
    from vulcan.sim_commands import run_async

    return int(run_async(_up(args)))
