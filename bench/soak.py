"""`python -m bench.soak`: a soak that hunts for broken gangs on the embedded cluster.

It starts `vulcan sim up --with-extender --with-controllers` (4 hollow nodes x 32 cpu, a short
pod eviction timeout so a failed node's pods are evicted within the soak) or, with `--real`, a
real control plane with vulcan installed (`bench.soak_real`), submits the workload
of `bench.soak_workload` for `--duration` from `--seed` (with `--topology on`, the default: a
HyperNode tree over the nodes and topology-constrained gangs, the extender's conf naming
network-topology-aware), watches the API server and checks the invariants of
`bench.soak_checker` continuously (and, from the extender's /debug/invariants, each queue
accounting invariant a scheduling pass broke: `inqueue-over-capability`,
`allocated-over-capability`, `victim-promised-twice`), then accounts for every submitted object
and prints what happened and every violation. Exits 1 on any violation. The last line:

    soak_seconds=<S> gangs_completed=<N> evictions=<E> violations=<V> worst_partial_s=<W>

The cluster's logs, the action schedule and what was done when stay in the state directory
(printed at the start), to replay a seed's story next to the components' logs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import random
import sys
import tempfile
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from bench.sim_cluster import SimCluster, running_cluster
from bench.soak_actions import Actor
from bench.soak_checker import MEMO_DIVERGENCE, Checker, Limits, Violation
from bench.soak_real import real_cluster
from bench.soak_report import (
    GANG_KINDS,
    account,
    extender_summary,
    members_summary,
    print_report,
)
from bench.soak_topology import TOPOLOGY_CONF
from bench.soak_watch import Tally, Watches
from bench.soak_workload import NAMESPACE, Shape, schedule
from core.durations import parse_duration
from core.kube.client import PODS, ApiError

NODES = 4
NODE_CPU = 32
NODE_PROFILE = "cpu=32,memory=128Gi,pods=110"  # bench.sim_cluster's, for the real nodes too
CLEAN_EVERY = 15.0  # seconds between removals of finished bare gangs and plain pods
TICK = 0.25  # seconds between re-evaluations of the invariants that span several kinds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--duration", type=parse_duration, default=60.0, help="soak time (60s)")
    parser.add_argument("--seed", type=int, help="workload seed (default: a random one, printed)")
    parser.add_argument(
        "--real",
        action="store_true",
        help="soak a real control plane (etcd, kube-apiserver, kube-controller-manager, "
        "kube-scheduler from KUBEBUILDER_ASSETS / VULCAN_KUBE_ASSETS) with vulcan installed",
    )
    parser.add_argument(
        "--shape",
        choices=("heavy", "light"),
        default="heavy",
        help="heavy: far more work than the cluster holds; light: an under-subscribed cluster "
        "with bursts (heavy)",
    )
    parser.add_argument(
        "--partial-window",
        type=parse_duration,
        default=5.0,
        help="longest a gang may stay partly bound after a bind (5s)",
    )
    parser.add_argument(
        "--loss-window",
        type=parse_duration,
        default=60.0,
        help="longest a Volcano Job's gang may stay partly bound after losing members (60s)",
    )
    parser.add_argument(
        "--capacity-grace",
        type=parse_duration,
        default=1.0,
        help="how long a queue may be seen above its capability (watch skew; 1s)",
    )
    parser.add_argument(
        "--stall-after",
        type=parse_duration,
        default=60.0,
        help="longest work that fits (free room, queue room) may wait unbound (60s)",
    )
    parser.add_argument(
        "--job-final-after",
        type=parse_duration,
        default=30.0,
        help="longest a job whose pods finished may take to reach a final phase (30s)",
    )
    parser.add_argument(
        "--eviction-paid-within",
        type=parse_duration,
        default=30.0,
        help="longest a gang that evicted others may stay unbound once its victims are gone "
        "(needless-eviction; 30s)",
    )
    parser.add_argument(
        "--pod-eviction-timeout",
        type=int,
        default=5,
        help="seconds pods tolerate a NotReady node before eviction (sim up's flag; 5)",
    )
    parser.add_argument(
        "--node-monitor-grace-period",
        default="20s",
        help="how long a node may miss heartbeats before it is unreachable (20s: more than "
        "the hollow kubelets' 10s lease renewals)",
    )
    parser.add_argument("--no-node-failure", action="store_true", help="keep every node up")
    parser.add_argument(
        "--state-dir", help="cluster logs and the soak's files (default: a new temp dir)"
    )
    parser.add_argument(
        "--check-memo",
        action="store_true",
        help="run the extender with --scheduler-memo=check: each pass is decided with the memo "
        "and without it, and every difference is a violation (memo-divergence)",
    )
    parser.add_argument(
        "--topology",
        choices=("on", "off"),
        default="on",
        help="a HyperNode tree over the nodes and topology-constrained gangs and subgroups in "
        "the workload, the extender's conf naming network-topology-aware (on)",
    )
    parser.add_argument("--start-timeout", type=float, default=120.0)
    return parser.parse_args(argv)


async def soak(args: argparse.Namespace, out=sys.stdout) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    state = Path(args.state_dir or tempfile.mkdtemp(prefix="vulcan-soak-"))
    state.mkdir(parents=True, exist_ok=True)
    # A Deployment gets pods only where the embedded cluster runs a Deployment controller.
    deployments = args.real or importlib.util.find_spec("sim.controllers") is not None
    shape = Shape(
        NODES,
        NODE_CPU,
        node_failure=not args.no_node_failure,
        deployments=deployments,
        load=args.shape,
        topology=args.topology == "on",
    )
    actions = schedule(seed, args.duration, shape)
    (state / "soak-schedule.txt").write_text(
        "".join(f"{a.at:7.2f} {a.kind} {a.name}\n" for a in actions)
    )
    where = "real control plane" if args.real else "embedded cluster"
    print(
        f"soak seed={seed} duration={args.duration:.0f}s shape={args.shape} on the {where} "
        f"state={state}",
        file=out,
        flush=True,
    )
    limits = Limits(
        partial_window=args.partial_window,
        loss_window=args.loss_window,
        capacity_grace=args.capacity_grace,
        stall_after=args.stall_after,
        job_final_after=args.job_final_after,
        eviction_paid_within=args.eviction_paid_within,
    )
    async with _cluster(args, state) as sim:
        checker = Checker(limits)
        tally = Tally()
        watches = Watches(sim.client, checker, tally)
        await watches.start()
        actor = Actor(sim.client, seed)
        origin = checker.origin = time.monotonic()
        ticker = asyncio.create_task(_tick(checker, out, sim, args.check_memo))
        cleaner = asyncio.create_task(_clean(actor, checker))
        done_log = (state / "soak-actions.log").open("w")
        try:
            for action in actions:
                if action.at >= args.duration:
                    break
                delay = origin + action.at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await actor.run(action)
                done_log.write(f"{time.monotonic() - origin:7.2f} {action.kind} {action.name}\n")
                done_log.flush()
            await asyncio.sleep(max(0.0, origin + args.duration - time.monotonic()))
        finally:
            for task in (ticker, cleaner):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            done_log.close()
        now = time.monotonic()
        checker.tick(now)
        checker.finish(now)
        states = await actor.deployment_states()
        outcomes, open_items = account(actor, checker, tally, now, states)
        await watches.stop()
        notes = [
            "Deployments submitted (the cluster runs a Deployment controller)"
            if deployments
            else "Deployments are not submitted: the embedded cluster has no Deployment "
            "controller (a plain pod is submitted in place of each)",
            f"limits: partial window {limits.partial_window:g}s (after a bind), "
            f"{limits.loss_window:g}s (a job's gang after losing members); queue capability "
            f"grace {limits.capacity_grace:g}s; node room at once; stall after "
            f"{limits.stall_after:g}s; job final after {limits.job_final_after:g}s; "
            f"an eviction paid within {limits.eviction_paid_within:g}s",
        ]
        violations = print_report(
            out,
            seed=seed,
            soaked=now - origin,
            actor=actor,
            checker=checker,
            tally=tally,
            outcomes=outcomes,
            open_items=open_items,
            notes=notes,
        )
    return 1 if violations else 0


def _cluster(args: argparse.Namespace, state: Path) -> AbstractAsyncContextManager[SimCluster]:
    memo = ["--scheduler-memo", "check"] if args.check_memo else []
    conf = None
    if args.topology == "on":
        # A networkTopology is honoured only where the conf names network-topology-aware.
        conf = state / "extender-conf.yaml"
        conf.write_text(TOPOLOGY_CONF)
    if args.real:
        return real_cluster(
            NODES,
            NODE_PROFILE,
            state,
            args.start_timeout,
            namespace=NAMESPACE,
            extender_flags=tuple(memo),
            extender_conf=conf,
            pod_eviction_timeout=args.pod_eviction_timeout,
            node_monitor_grace_period=args.node_monitor_grace_period,
        )
    extra = [
        *memo,
        "--with-extender",
        "--with-controllers",
        "--pod-eviction-timeout",
        str(args.pod_eviction_timeout),
        "--node-monitor-grace-period",
        args.node_monitor_grace_period,
        *(["--extender-config", str(conf)] if conf is not None else []),
    ]
    return running_cluster(NODES, str(state), args.start_timeout, *extra)


async def _tick(checker: Checker, out, sim: SimCluster, check_memo: bool = False) -> None:
    """Re-evaluates the cross-kind invariants; says each new violation as soon as it is seen,
    a gang's with what the extender thinks of it at that moment (its debug view). Each queue
    accounting invariant a scheduling pass broke is a violation of its kind; with `check_memo`,
    so is each difference the extender's memo check found."""
    told = 0
    memo_seen = breaches_seen = 0
    while True:
        await asyncio.sleep(TICK)
        now = time.monotonic()
        checker.tick(now)
        breaches_seen = await _breaches(checker, sim, breaches_seen, now)
        if check_memo:
            memo_seen = await _memo_divergences(checker, sim, memo_seen, now)
        while told < len(checker.violations):
            violation = checker.violations[told]
            print(violation.describe(checker.origin), file=out, flush=True)
            if violation.kind in GANG_KINDS and "/" in violation.subject:
                gang = violation.subject.split(" ")[0]  # (a subgroup's: "<gang> <subgroup>")
                view = await sim.extender_debug(f"/debug/gangs/{gang}")
                queues = await sim.extender_debug("/debug/queues")
                print(f"  extender: {extender_summary(view, queues)}", file=out, flush=True)
                for line in members_summary(await _members(sim, gang), view):
                    print(f"    {line}", file=out, flush=True)
            told += 1


async def _memo_divergences(checker: Checker, sim: SimCluster, seen: int, now: float) -> int:
    """Each divergence the extender's `--scheduler-memo=check` found since `seen` (its
    /debug/memo), recorded as a `memo-divergence` violation; the count seen now."""
    fresh, seen = _since(await sim.extender_debug("/debug/memo"), "divergences", seen)
    for found in fresh:
        detail = f"with the memo {found.get('withMemo')}, without it {found.get('without')}"
        checker.record(Violation(MEMO_DIVERGENCE, str(found.get("group")), now, now, detail, now))
    return seen


async def _breaches(checker: Checker, sim: SimCluster, seen: int, now: float) -> int:
    """Each accounting invariant a scheduling pass broke since `seen` (the extender's
    /debug/invariants: `inqueue-over-capability`, `allocated-over-capability`,
    `victim-promised-twice`), recorded as a violation of its kind; the count seen now."""
    fresh, seen = _since(await sim.extender_debug("/debug/invariants"), "breaches", seen)
    for found in fresh:
        detail = f"booking of {found.get('job')}: {found.get('detail')}"
        kind, subject = str(found.get("kind")), str(found.get("subject"))
        checker.record(Violation(kind, subject, now, now, detail, now))
    return seen


def _since(view: dict[str, Any] | None, total: str, seen: int) -> tuple[list[dict[str, Any]], int]:
    """The entries a debug view's `recent` list gained since its count `total` was `seen`
    (it keeps the last ones only), and that count now."""
    if not view:
        return [], seen
    count = int(view.get(total) or 0)
    recent = list(view.get("recent") or [])
    fresh = recent[max(0, len(recent) - (count - seen)) :] if count > seen else []
    return fresh, max(seen, count)


async def _members(sim: SimCluster, group: str) -> list[dict[str, Any]]:
    """The pods of PodGroup `namespace/name`, as the API server has them now."""
    namespace, name = group.split("/", 1)
    try:
        pods = (await sim.client.list(PODS, namespace))["items"]
    except ApiError:
        return []
    return [
        p
        for p in pods
        if (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name") == name
    ]


async def _clean(actor: Actor, checker: Checker) -> None:
    """Every CLEAN_EVERY seconds, removes the bare gangs and plain pods that finished."""
    while True:
        await asyncio.sleep(CLEAN_EVERY)
        finished_pods = {
            key: pod.phase
            for key, pod in checker.pods.items()
            if pod.phase in ("Succeeded", "Failed") and not pod.group
        }
        for gang in checker.completed:
            for pod in checker.members(gang):
                finished_pods[pod.key] = pod.phase
        await actor.clean_up(set(checker.completed), finished_pods)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return asyncio.run(soak(args))


if __name__ == "__main__":
    sys.exit(main())
