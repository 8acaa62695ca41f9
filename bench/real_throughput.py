"""Scheduling throughput of the real kube-scheduler alone, with vulcan's extender, and with a
no-op extender, on the real tier's control plane (etcd, kube-apiserver, kube-scheduler v1.36).

    VULCAN_KUBE_ASSETS=/path/to/kube-assets \\
        .venv/bin/python -m bench.real_throughput --nodes 1000 --pods 10000

The binaries are found as `vulcan sim up --control-plane real` finds them (`KUBEBUILDER_ASSETS`
or `VULCAN_KUBE_ASSETS`, see vulcan/real_cluster/assets.py); without them it says so and exits
(status 0: nothing measured).

Three phases, interleaved (alone, vulcan, floor, alone, vulcan, floor with `--rounds 2`, the
default) so that a machine shared with other work slows all of them alike:
- alone: kube-scheduler with no extender;
- vulcan: the extender entries of vulcan's second-scheduler install (filter and preempt; bind)
  and its profile's scoring (the conf's node order rendered, plugins.framework.kube_scoring),
  calling `vulcan extender` run as the install runs it (its ServiceAccount, RBAC, Deployment
  arguments); `--with-prioritize`: the entries as they were before that rendering (filter,
  prioritize and preempt; bind) and kube-scheduler's default scoring;
- floor: the same entries and scoring calling `bench.floor_extender` (every node passes, no
  preference, bind creates the Binding): what any extender costs on this machine, so vulcan's
  own cost separates from the protocol's.
The install is measured as shipped (the default); `--bind-marker`: with the opt-in component
manifests/components/bind-marker (the bind entry takes only pods with vulcan.sh/managed-bind, so
kube-scheduler binds the benchmark's plain pods itself in the vulcan and floor phases alike, and
vulcan's extender runs with `--bind-marker`).
Each phase has a fresh control plane with N Node objects (32 cpu, 128Gi), its extender, and a
kube-scheduler whose client QPS is raised to 5,000. The P plain pods (1 cpu, 2Gi, no scheduler
named) are all created before kube-scheduler starts, so creation cannot be the limit (the create
rate is printed); the rate is P over the time from the first Binding to the last, as a client
watching pods sees them. CPU seconds per 1,000 pods of every process (etcd, kube-apiserver,
kube-scheduler, the extender, this load generator) are counted from the first create to the last
Binding, so the extender's handling of every pod's creation is included.

`--workload gangs` (bench/real_gangs.py): vulcan with the same pod count as gangs (Volcano Jobs
or PodGroups) against vulcan with plain pods, in the same run; its own last line.

Last line: `pods_per_s=<A> with_extender_pods_per_s=<B> floor_pods_per_s=<C>
extender_to_floor=<B/C> extender_cpu_ms_per_pod=<X> floor_cpu_ms_per_pod=<Y>` (rates and CPU the
mean over rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import real_gangs
from bench.real_cluster import (
    MODES,
    PhaseCluster,
    await_or_fail,
    create_nodes,
    install_extenders,
    install_scoring,
    parallel,
    with_prioritize,
)
from bench.real_metrics import phase_cpu, report_extender_metrics, scheduler_algorithm_quantiles
from bench.sim_throughput import NAMESPACE, pod_body
from core.kube.client import PODS, ApiError, KubeClient
from core.kube.flags import ClientOptions
from core.kube.informer import Informer
from vulcan.real_cluster.assets import AssetsError, KubeAssets, find_assets

LABELS = {"alone": "kube-scheduler alone", "vulcan": "with vulcan", "floor": "with no-op"}


@dataclass
class PhaseResult:
    mode: str
    pods_per_s: float
    create_per_s: float
    cpu_s: dict[str, float] = field(default_factory=dict)  # role -> CPU seconds in the phase
    algorithm_ms: tuple[float, float] | None = None  # kube-scheduler's p50, p99

    def cpu_ms_per_pod(self, role: str, pods: int) -> float:
        return self.cpu_s.get(role, 0.0) * 1000 / pods


def last_line(alone: float, vulcan: float, floor: float, vulcan_ms: float, floor_ms: float) -> str:
    """The benchmark's last line (its contract: these keys, this order)."""
    return (
        f"pods_per_s={alone:.1f} with_extender_pods_per_s={vulcan:.1f} "
        f"floor_pods_per_s={floor:.1f} extender_to_floor={vulcan / floor:.3f} "
        f"extender_cpu_ms_per_pod={vulcan_ms:.3f} floor_cpu_ms_per_pod={floor_ms:.3f}"
    )


def missing_requirement() -> str | None:
    """Why this benchmark cannot run here, or None."""
    try:
        find_assets()
    except AssetsError as exc:
        return f"bench.real_throughput needs the real tier's Kubernetes binaries: {exc}"
    if shutil.which("kubectl") is None:
        return "bench.real_throughput needs kubectl (the install is rendered and applied with it)"
    return None


class _Bound:
    __slots__ = ("bound", "key")

    def __init__(self, obj: dict[str, Any]) -> None:
        self.key = obj["metadata"]["name"]
        self.bound = bool((obj.get("spec") or {}).get("nodeName"))


async def measure(
    cluster: PhaseCluster, nodes: int, pods: int, concurrency: int, timeout: float
) -> PhaseResult:
    label = LABELS[cluster.mode]
    client = await KubeClient.connect(
        ClientOptions(kubeconfig=str(cluster.plane.admin_kubeconfig), qps=0, burst=0)
    )
    try:
        await create_nodes(client, nodes)
        bound: set[str] = set()
        all_bound = asyncio.Event()
        first_bound = 0.0

        def seen(record: _Bound, *_: Any) -> None:
            nonlocal first_bound
            if record.bound and record.key not in bound:
                if not bound:
                    first_bound = time.monotonic()
                bound.add(record.key)
                if len(bound) >= pods:
                    all_bound.set()

        informer: Informer[_Bound] = Informer(client, PODS, _Bound, namespace=NAMESPACE)
        informer.add_handlers(seen, lambda _old, new: seen(new), None)
        watch = asyncio.create_task(informer.run())
        await informer.wait_synced()
        bodies = [pod_body(i) for i in range(pods)]
        path = PODS.path(NAMESPACE)

        async def create(index: int) -> None:
            with contextlib.suppress(ApiError):  # AlreadyExists after a retried create
                await client.request("POST", path, body=bodies[index])

        cluster.start_profiler()
        cpu_before = phase_cpu(cluster)
        created = await parallel(pods, concurrency, create)
        print(f"[{label}] {pods} pods created in {created:.1f}s ({pods / created:.0f}/s)")
        cpu_created = phase_cpu(cluster)
        started = time.monotonic()
        cluster.start_scheduler()
        await await_or_fail(
            all_bound, cluster, lambda: f"[{label}] {len(bound)}/{pods} bound", timeout
        )
        done = time.monotonic()
        cpu_after = phase_cpu(cluster)
        cluster.stop_profiler()
        algorithm = scheduler_algorithm_quantiles(cluster)
        if cluster.mode == "vulcan":
            report_extender_metrics(label, cluster)
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    finally:
        await client.close()
    rate = (pods - 1) / max(done - first_bound, 1e-9)
    print(
        f"[{label}] first Binding {first_bound - started:.1f}s after kube-scheduler started, "
        f"last {done - first_bound:.1f}s later: {rate:.1f} pods/s"
    )
    used = {role: cpu_after[role] - cpu_before.get(role, 0.0) for role in cpu_after}
    parts = ", ".join(f"{role} {seconds * 1000 / pods:.2f}" for role, seconds in used.items())
    print(f"[{label}] CPU seconds per 1000 pods: {parts}", flush=True)
    # Where it went: while the pods were created (before kube-scheduler started: their watch
    # events, the pass they wake) and while they were scheduled.
    for stage, (start, end) in (
        ("creating", (cpu_before, cpu_created)),
        ("scheduling", (cpu_created, cpu_after)),
    ):
        split = ", ".join(
            f"{role} {(end[role] - start.get(role, 0.0)) * 1000 / pods:.2f}" for role in end
        )
        print(f"[{label}]   of which {stage}: {split}")
    if algorithm is not None:
        print(
            f"[{label}] kube-scheduler's scheduling algorithm (its filter and score, extender "
            f"calls included): p50 {algorithm[0]:.2f} ms, p99 {algorithm[1]:.2f} ms"
        )
    return PhaseResult(cluster.mode, rate, pods / created, used, algorithm)


def run_phase(
    assets: KubeAssets, mode: str, args: argparse.Namespace, setup: Any, round_: int
) -> Any:
    extenders, scoring = setup
    cluster = PhaseCluster(
        assets, mode, extenders, tuple(args.extender_flag), scoring, components(args)
    )
    if args.profile and mode != "alone":
        cluster.profile_to = Path(args.profile) / f"{mode}-{round_}.txt"
    began = time.monotonic()
    try:
        cluster.start()
        print(f"[{LABELS[mode]}] control plane up in {time.monotonic() - began:.1f}s", flush=True)
        return asyncio.run(measure(cluster, args.nodes, args.pods, args.concurrency, args.timeout))
    finally:
        cluster.stop()


def summarize(results: list[PhaseResult], pods: int) -> str:
    def mean(mode: str, value: Any) -> float:
        return statistics.fmean(value(r) for r in results if r.mode == mode)

    rates = {mode: mean(mode, lambda r: r.pods_per_s) for mode in MODES}
    for mode in MODES:
        runs = ", ".join(f"{r.pods_per_s:.1f}" for r in results if r.mode == mode)
        creates = ", ".join(f"{r.create_per_s:.0f}" for r in results if r.mode == mode)
        print(f"{LABELS[mode]}: pods/s {runs} (created at {creates} pods/s)")
    roles = sorted({role for r in results for role in r.cpu_s})
    for mode in MODES:
        cells = ", ".join(
            f"{role} {mean(mode, lambda r, role=role: r.cpu_ms_per_pod(role, pods)):.2f}"
            for role in roles
            if any(role in r.cpu_s for r in results if r.mode == mode)
        )
        print(f"{LABELS[mode]}: CPU ms per pod: {cells}")
    algorithm: dict[str, tuple[float, float]] = {}
    for mode in MODES:
        seen = [r.algorithm_ms for r in results if r.mode == mode and r.algorithm_ms]
        if seen:
            algorithm[mode] = (
                statistics.fmean(a[0] for a in seen),
                statistics.fmean(a[1] for a in seen),
            )
            print(
                f"{LABELS[mode]}: kube-scheduler's scheduling algorithm p50 "
                f"{algorithm[mode][0]:.2f} ms, p99 {algorithm[mode][1]:.2f} ms"
            )
    for mode in ("vulcan", "floor"):
        if mode in algorithm and "alone" in algorithm:
            print(
                f"{LABELS[mode]}: extender filter + prioritize as kube-scheduler waited them "
                f"(its algorithm's time over the alone phase's): p50 "
                f"{algorithm[mode][0] - algorithm['alone'][0]:.2f} ms, p99 "
                f"{algorithm[mode][1] - algorithm['alone'][1]:.2f} ms"
            )
    print(
        f"with_extender/alone={rates['vulcan'] / rates['alone']:.3f} "
        f"floor/alone={rates['floor'] / rates['alone']:.3f}"
    )
    return last_line(
        rates["alone"],
        rates["vulcan"],
        rates["floor"],
        mean("vulcan", lambda r: r.cpu_ms_per_pod("extender", pods)),
        mean("floor", lambda r: r.cpu_ms_per_pod("extender", pods)),
    )


def components(args: argparse.Namespace) -> tuple[str, ...]:
    """The install's components (manifests/components) the phases run with."""
    return ("bind-marker",) if args.bind_marker else ()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=2, help="times each phase runs (2)")
    parser.add_argument("--concurrency", type=int, default=32, help="parallel pod creates")
    parser.add_argument(
        "--with-prioritize",
        action="store_true",
        help="the install's extender entries with the prioritize verb and kube-scheduler's "
        "default scoring, as before the conf's node order was rendered into the profile",
    )
    parser.add_argument(
        "--bind-marker",
        action="store_true",
        help="the install with its opt-in component manifests/components/bind-marker: the bind "
        "entry takes only pods with vulcan.sh/managed-bind (the benchmark's plain pods are bound "
        "by kube-scheduler itself) and the extender runs with --bind-marker",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds a phase may take to bind all"
    )
    parser.add_argument(
        "--phases",
        default=",".join(MODES),
        help="which phases to run, in order (default alone,vulcan,floor; the last line needs all)",
    )
    parser.add_argument(
        "--extender-flag",
        action="append",
        default=[],
        metavar="FLAG=VALUE",
        help="added to vulcan's extender arguments (repeatable), to compare settings",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="record the extender of each extender phase with py-spy (pip install py-spy) "
        "into DIR/<phase>-<round>.txt (collapsed stacks) while the pods are scheduled",
    )
    real_gangs.add_arguments(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress as it goes
    if args.workload == "gangs":
        real_gangs.layout(args)  # bad gang flags said before anything starts
    why = missing_requirement()
    if why is not None:
        print(why, flush=True)
        return 0
    phases = [p for p in args.phases.split(",") if p]
    unknown = [p for p in phases if p not in MODES]
    if unknown:
        raise SystemExit(f"--phases: unknown {', '.join(unknown)} (known: {', '.join(MODES)})")
    assets = find_assets()
    setup = (install_extenders(components(args)), install_scoring(components(args)))
    install = "+".join(("second-scheduler", *components(args)))
    binds = "marked pods only" if args.bind_marker else "every pod"
    print(f"install: {install} (the bind entry takes {binds})", flush=True)
    if args.with_prioritize:
        setup = (with_prioritize(setup[0]), {})
    if args.workload == "gangs":
        real_gangs.run(args, assets, setup)
        return 0
    results = [
        run_phase(assets, mode, args, setup, round_)
        for round_ in range(args.rounds)
        for mode in phases
    ]
    if set(phases) == set(MODES):
        print(summarize(results, args.pods), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
