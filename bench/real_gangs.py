"""`bench/real_throughput.py --workload gangs`: how fast vulcan schedules gangs on the real
kube-scheduler, against plain pods in the same run.

    VULCAN_KUBE_ASSETS=/path/to/kube-assets .venv/bin/python -m bench.real_throughput \\
        --workload gangs --gang-shape jobs --nodes 1000 --pods 10000

Two phases (`--phases` is the plain workload's), interleaved over `--rounds` (plain, gangs,
plain, gangs with the default 2), each on a fresh control plane with vulcan installed as the
real tier installs it: the extender, the controllers (Volcano Jobs' pods and PodGroups, the
default Queue) and the admission webhooks, and kube-scheduler with the install's extender
entries and scoring on two alike profiles, `default-scheduler` and the install's `volcano`:
- plain: P plain pods (1 cpu, 2Gi, no scheduler named), as the plain workload's vulcan phase;
- gangs: the same P pods as gangs of `--gang-size` members, all named to `volcano`:
  `--gang-shape jobs` (default) P/100 Volcano Jobs of one task (minAvailable = replicas = 100):
  vulcan's job controller makes each Job's PodGroup and, once it is Inqueue, its pods behind the
  queue-allocation gate, which the extender lifts when it admits the gang;
  `--gang-shape podgroups`: P/10 PodGroups (minMember 10) and 10 pods each annotated
  `scheduling.k8s.io/group-name`, created by this load generator.

Order: kube-scheduler starts first and the objects are then created gang by gang (`--concurrency`
creates at a time), as users submit work to a running cluster: a gang's time from its first
member created to its last bound then holds its admission (the enqueue, the gate lifted, the
bind barrier), not a wait for kube-scheduler to start. The plain phase's pods are created the
same way, so the two rates compare like with like; the create rate is printed (the Jobs shape's
is the job controller's). `--create-first`: every object (and, for Jobs, every pod the job
controller makes) exists before kube-scheduler starts, as the plain workload does, so creation
cannot be the limit; a gang's time then includes that wait.

Rates are pods over the time from the first Binding to the last, as a client watching pods sees
them; a member's creation time is when the watch first sees it. CPU per pod of every process is
counted from the first create to the last Binding, as in the plain workload.

Last line: `gang_pods_per_s=<X> plain_pods_per_s=<Y> p99_gang_whole_s=<Z>
gang_cpu_ms_per_pod=<A> plain_cpu_ms_per_pod=<B> gang_to_plain=<X/Y>` (rates and CPU the mean
over rounds; the p99 over the gangs of every round, nearest rank).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.real_cluster import PhaseCluster, await_or_fail, create_nodes, parallel
from bench.real_gang_objects import Layout, creations
from bench.real_metrics import (
    apiserver_requests,
    phase_cpu,
    report_apiserver_requests,
    report_extender_metrics,
    scheduler_algorithm_quantiles,
)
from bench.sim_throughput import NAMESPACE
from core.api import keys
from core.kube.client import PODS, ApiError, KubeClient
from core.kube.flags import ClientOptions
from core.kube.informer import Informer
from vulcan.real_cluster.assets import KubeAssets

SHAPES = ("jobs", "podgroups")
DEFAULT_GANG_SIZE = {"jobs": 100, "podgroups": 10}
PHASES = ("plain", "gangs")


@dataclass
class GangPhase:
    phase: str
    pods_per_s: float
    create_per_s: float
    cpu_s: dict[str, float] = field(default_factory=dict)  # role -> CPU seconds in the phase
    whole_s: list[float] = field(default_factory=list)  # each gang: first created -> last bound

    def cpu_ms_per_pod(self, role: str, pods: int) -> float:
        return self.cpu_s.get(role, 0.0) * 1000 / pods

    def all_cpu_ms_per_pod(self, pods: int) -> float:
        """Every process's CPU per pod together: on a machine they keep busy (this one's two
        cores), the phase's rate is about the cores' time over it."""
        return sum(self.cpu_s.values()) * 1000 / pods


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workload",
        choices=("plain", "gangs"),
        default="plain",
        help="plain: the three phases with plain pods (default); gangs: vulcan with the same "
        "pod count as gangs against vulcan with plain pods (bench/real_gangs.py)",
    )
    parser.add_argument(
        "--gang-shape",
        choices=SHAPES,
        default="jobs",
        help="--workload gangs: Volcano Jobs made into pods by vulcan's job controller "
        "(default), or PodGroups and annotated pods made by the benchmark",
    )
    parser.add_argument(
        "--gang-size",
        type=int,
        help="--workload gangs: members per gang, a divisor of --pods (default 100 for jobs, "
        "10 for podgroups)",
    )
    parser.add_argument(
        "--create-first",
        action="store_true",
        help="--workload gangs: every pod exists before kube-scheduler starts (default: "
        "kube-scheduler first, then the gangs submitted one after another)",
    )


def layout(args: argparse.Namespace) -> Layout:
    """The gangs `args` ask for; SystemExit naming the flag when they cannot be made."""
    size = DEFAULT_GANG_SIZE[args.gang_shape] if args.gang_size is None else args.gang_size
    if size < 1:
        raise SystemExit(f"--gang-size: {size} is not a positive number of members")
    if args.pods < 1 or args.pods % size:
        raise SystemExit(
            f"--pods: {args.pods} is not a positive multiple of the gang size {size} "
            "(--gang-size): every gang is whole"
        )
    if args.bind_marker:
        raise SystemExit(
            "--bind-marker: not with --workload gangs (the benchmark's pods do not carry the "
            "bind entry's marker)"
        )
    return Layout(args.gang_shape, args.pods // size, size)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank q-quantile (0 < q <= 1) of `values`: a value that was measured."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)), 1) - 1]


def last_line(gang: float, plain: float, p99: float, gang_ms: float, plain_ms: float) -> str:
    """The gang workload's last line (its contract: these keys, this order)."""
    return (
        f"gang_pods_per_s={gang:.1f} plain_pods_per_s={plain:.1f} p99_gang_whole_s={p99:.2f} "
        f"gang_cpu_ms_per_pod={gang_ms:.3f} plain_cpu_ms_per_pod={plain_ms:.3f} "
        f"gang_to_plain={gang / plain:.3f}"
    )


class _Member:
    __slots__ = ("bound", "group", "key")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key = meta["name"]
        self.group = (meta.get("annotations") or {}).get(keys.GROUP_NAME, "")
        self.bound = bool((obj.get("spec") or {}).get("nodeName"))


class Progress:
    """What the pod watch has seen: when each pod (and each gang's first member) appeared,
    which are bound, and each gang's time from its first member seen to its last bound."""

    def __init__(self, pods: int, size: int) -> None:
        self.pods, self.size = pods, size
        self.seen: set[str] = set()
        self.bound: set[str] = set()
        self.first_bound = self.last_seen = 0.0
        self.group_seen: dict[str, float] = {}
        self.group_bound: dict[str, int] = {}
        self.whole: dict[str, float] = {}
        self.all_seen = asyncio.Event()
        self.all_bound = asyncio.Event()

    def on(self, record: _Member) -> None:
        now = time.monotonic()
        if record.key not in self.seen:
            self.seen.add(record.key)
            self.last_seen = now
            if record.group:
                self.group_seen.setdefault(record.group, now)
            if len(self.seen) >= self.pods:
                self.all_seen.set()
        if not record.bound or record.key in self.bound:
            return
        if not self.bound:
            self.first_bound = now
        self.bound.add(record.key)
        if record.group:
            count = self.group_bound[record.group] = self.group_bound.get(record.group, 0) + 1
            if count == self.size:
                self.whole[record.group] = now - self.group_seen[record.group]
        if len(self.bound) >= self.pods:
            self.all_bound.set()


async def measure(
    cluster: PhaseCluster, label: str, phase: str, shape: Layout, args: argparse.Namespace
) -> GangPhase:
    pods = args.pods
    client = await KubeClient.connect(
        ClientOptions(kubeconfig=str(cluster.plane.admin_kubeconfig), qps=0, burst=0)
    )
    try:
        await create_nodes(client, args.nodes)
        progress = Progress(pods, shape.size if phase == "gangs" else 1)
        informer: Informer[_Member] = Informer(client, PODS, _Member, namespace=NAMESPACE)
        informer.add_handlers(progress.on, lambda _old, new: progress.on(new), None)
        watch = asyncio.create_task(informer.run())
        await informer.wait_synced()
        made = creations(phase, shape, pods)

        async def create(index: int) -> None:
            with contextlib.suppress(ApiError):  # AlreadyExists after a retried create
                await client.request("POST", made[index][0], body=made[index][1])

        def seen() -> str:
            return f"[{label}] {len(progress.seen)}/{pods} pods made"

        def bound() -> str:
            return f"[{label}] {len(progress.bound)}/{pods} bound"

        cluster.start_profiler()
        cpu_before = phase_cpu(cluster)
        requests_before = apiserver_requests(cluster)
        if not args.create_first:
            cluster.start_scheduler()
        started = time.monotonic()
        await parallel(len(made), args.concurrency, create)
        await await_or_fail(progress.all_seen, cluster, seen, args.timeout)
        create_s = max(progress.last_seen - started, 1e-9)
        print(f"{seen()} in {create_s:.1f}s ({pods / create_s:.0f}/s)")
        if args.create_first:
            cluster.start_scheduler()
        await await_or_fail(progress.all_bound, cluster, bound, args.timeout)
        done = time.monotonic()
        cpu_after = phase_cpu(cluster)
        failure = cluster.failed()  # its CPU would be missing: the phase is not measured whole
        if failure:
            raise RuntimeError(f"{bound()}, but a part exited: {failure}")
        cluster.stop_profiler()
        algorithm = scheduler_algorithm_quantiles(cluster)
        report_extender_metrics(label, cluster)
        report_apiserver_requests(label, requests_before, apiserver_requests(cluster), pods)
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    finally:
        await client.close()
    rate = (pods - 1) / max(done - progress.first_bound, 1e-9)
    used = {role: cpu_after[role] - cpu_before.get(role, 0.0) for role in cpu_after}
    result = GangPhase(phase, rate, pods / create_s, used, list(progress.whole.values()))
    print(
        f"[{label}] first Binding {progress.first_bound - started:.1f}s after the first create, "
        f"last {done - progress.first_bound:.1f}s later: {rate:.1f} pods/s"
    )
    if not args.create_first and rate >= 0.9 * result.create_per_s:
        print(f"[{label}] binding kept up with creation: the rate may be creation's")
    parts = ", ".join(f"{role} {seconds * 1000 / pods:.2f}" for role, seconds in used.items())
    print(f"[{label}] CPU seconds per 1000 pods: {parts}", flush=True)
    if result.whole_s:
        print(f"[{label}] {_wholes(result.whole_s)}")
    if algorithm is not None:
        print(
            f"[{label}] kube-scheduler's scheduling algorithm (extender calls included): "
            f"p50 {algorithm[0]:.2f} ms, p99 {algorithm[1]:.2f} ms"
        )
    return result


def _wholes(whole: list[float]) -> str:
    return (
        f"gang whole (first member made -> last bound) over {len(whole)} gangs: "
        f"p50 {percentile(whole, 0.5):.2f}s, p99 {percentile(whole, 0.99):.2f}s, "
        f"max {max(whole):.2f}s"
    )


def summarize(results: list[GangPhase], pods: int, shape: Layout) -> str:
    labels = {"plain": "vulcan, plain pods", "gangs": f"vulcan, {shape.describe()}"}

    def mean(phase: str, value: Any) -> float:
        return statistics.fmean(value(r) for r in results if r.phase == phase)

    roles = sorted({role for r in results for role in r.cpu_s})
    for phase in PHASES:
        runs = ", ".join(f"{r.pods_per_s:.1f}" for r in results if r.phase == phase)
        creates = ", ".join(f"{r.create_per_s:.0f}" for r in results if r.phase == phase)
        cells = ", ".join(
            f"{role} {mean(phase, lambda r, role=role: r.cpu_ms_per_pod(role, pods)):.2f}"
            for role in roles
        )
        print(f"{labels[phase]}: pods/s {runs} (made at {creates} pods/s); CPU ms per pod: {cells}")
    whole = [w for r in results for w in r.whole_s]
    print(f"{labels['gangs']}: {_wholes(whole)}")
    gang, plain = mean("gangs", lambda r: r.pods_per_s), mean("plain", lambda r: r.pods_per_s)
    all_gang = mean("gangs", lambda r: r.all_cpu_ms_per_pod(pods))
    all_plain = mean("plain", lambda r: r.all_cpu_ms_per_pod(pods))
    print(
        f"all processes' CPU ms per pod: plain {all_plain:.2f}, gangs {all_gang:.2f} "
        f"(plain/gangs={all_plain / all_gang:.3f}: where they keep the cores busy, gang/plain "
        "follows it)"
    )
    print(f"gang/plain={gang / plain:.3f}")
    return last_line(
        gang,
        plain,
        percentile(whole, 0.99),
        mean("gangs", lambda r: r.cpu_ms_per_pod("extender", pods)),
        mean("plain", lambda r: r.cpu_ms_per_pod("extender", pods)),
    )


def run(args: argparse.Namespace, assets: KubeAssets, setup: Any) -> None:
    """The gang workload's rounds and its summary (`setup`: the extender entries and scoring)."""
    shape = layout(args)
    extenders, scoring = setup
    order = "after every pod exists" if args.create_first else "before the first create"
    print(f"gangs: {shape.describe()}; kube-scheduler starts {order}")
    results: list[GangPhase] = []
    for round_ in range(args.rounds):
        for phase in PHASES:
            label = f"vulcan {phase}"
            cluster = PhaseCluster(
                assets, "vulcan", extenders, tuple(args.extender_flag), scoring, controllers=True
            )
            if args.profile:
                cluster.profile_to = Path(args.profile) / f"gangs-{phase}-{round_}.txt"
            began = time.monotonic()
            try:
                cluster.start()
                print(f"[{label}] control plane up in {time.monotonic() - began:.1f}s")
                results.append(asyncio.run(measure(cluster, label, phase, shape, args)))
            finally:
                cluster.stop()
    print(summarize(results, args.pods, shape), flush=True)
