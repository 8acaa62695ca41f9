"""Scheduling throughput of the embedded cluster: the kube-scheduler stand-in alone, then the same
cluster with vulcan's extender, in one run.

    .venv/bin/python -m bench.sim_throughput --nodes 1000 --pods 10000

Each phase starts a fresh `vulcan sim up --nodes N` (API server, hollow kubelets, node
lifecycle, the stand-in; the second phase with `--with-extender`, so every pod goes through the
extender's filter, prioritize and bind over real HTTP), creates P plain pods (1 cpu, 2Gi; pods
run until deleted so the cluster only fills up) as fast as the API server takes them, and times
from the first create until the last pod is bound, watching pods over the API as any client
would. Both phases run on the same machine minutes apart, so the ratio is what to read: the
absolute numbers move with the machine.

Per phase it also prints the CPU seconds per 1,000 pods of each part of the cluster (the API
server, the hollow kubelets, the scheduler stand-in, the extender, this load generator; from
/proc), and for the extender phases each verb's p50/p99 as the stand-in waited for it.

A third phase (skip it with `--no-floor`) runs the same cluster with `bench.floor_extender`, the
cheapest extender Python can be (all nodes pass, no preference, bind creates the Binding): the
most any extender can reach on this test bed and machine. It separates the extender's own cost
from the test bed's cost of an extender round trip at all:
`floor_pods_per_s=<F> floor_ratio=<F/A> extender_to_floor=<B/F>`.

The extender's CPU per pod (and the floor's, with the third phase) on a line of its own:
`extender_cpu_ms_per_pod=<X> floor_cpu_ms_per_pod=<Y>`.

Last line: `pods_per_s=<A> with_extender_pods_per_s=<B> ratio=<B/A>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.proc_cpu import cpu_by_role, cpu_of, spent
from bench.sim_cluster import start_sim_up, stop_sim_up
from core.kube.client import PODS, ApiError, KubeClient
from core.kube.flags import ClientOptions
from core.kube.informer import Informer
from sim.scheduler.config import sim_config

NAMESPACE = "default"


class _Bound:
    __slots__ = ("bound", "key", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key = meta["name"]
        self.rv = meta.get("resourceVersion", "")
        self.bound = bool((obj.get("spec") or {}).get("nodeName"))


def pod_body(index: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"bench-{index:06d}",
                "namespace": NAMESPACE,
                "labels": {"app": "bench", "job": f"job-{index // 16}"},
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example.com/train:1.0",
                        "command": ["python", "train.py"],
                        "resources": {
                            "requests": {"cpu": "1", "memory": "2Gi"},
                            "limits": {"cpu": "1", "memory": "2Gi"},
                        },
                    }
                ],
            },
        }
    )


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report_cpu(label: str, pods: int, used: dict[str, float]) -> None:
    parts = ", ".join(
        f"{role} {seconds * 1000 / pods:.2f}" for role, seconds in sorted(used.items())
    )
    print(f"[{label}] CPU seconds per 1000 pods: {parts}", flush=True)
    if "extender" in used:
        print(f"extender_cpu_s_per_1000_pods={used['extender'] * 1000 / pods:.3f}", flush=True)


def report_latency(label: str, path: Path) -> None:
    if not path.exists():
        return
    for verb, samples in sorted(orjson.loads(path.read_bytes()).items()):
        if samples:
            p50, p99 = (_quantile(samples, q) * 1e3 for q in (0.5, 0.99))
            print(
                f"[{label}] {verb}: {len(samples)} calls, p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                "(as the scheduler waited)",
                flush=True,
            )


LABELS = {"alone": "stand-in alone", "extender": "with extender", "floor": "floor extender"}


async def start_floor_extender(state: Path) -> tuple[asyncio.subprocess.Process, str]:
    """`bench.floor_extender` (reading the kubeconfig the cluster will write into `state`) and
    a scheduler configuration pointing at it, written where `vulcan sim up` can take it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.floor_extender",
        "--kubeconfig",
        str(state / "kubeconfig"),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
    if "listening on" not in line:
        raise RuntimeError(f"floor extender did not start: {line!r}")
    config = state / "floor-scheduler-config.yaml"
    config.write_text(yaml.safe_dump(sim_config(line.split()[-1].removesuffix("/v1"))))
    return process, str(config)


async def run_phase(
    nodes: int, pods: int, mode: str, concurrency: int
) -> tuple[float, dict[str, float]]:
    """(pods/s, CPU seconds of each part) of one phase."""
    label = LABELS[mode]
    with tempfile.TemporaryDirectory(prefix="vulcan-bench-") as tmp:
        state = Path(tmp)
        started = time.monotonic()
        floor: asyncio.subprocess.Process | None = None
        extra: list[str] = []
        if mode == "extender":
            extra = ["--with-extender"]
        elif mode == "floor":
            floor, config = await start_floor_extender(state)
            extra = ["--scheduler-config", config]
        try:
            process = await start_sim_up(nodes, state, *extra)
        except BaseException:
            if floor is not None:  # not left running when the cluster never came up
                floor.terminate()
            raise
        print(
            f"[{label}] cluster of {nodes} nodes up in {time.monotonic() - started:.1f}s",
            flush=True,
        )
        client = await KubeClient.connect(
            ClientOptions(kubeconfig=str(state / "kubeconfig"), qps=0, burst=0)
        )
        try:
            informer: Informer[_Bound] = Informer(client, PODS, _Bound, namespace=NAMESPACE)
            bound: set[str] = set()
            all_bound = asyncio.Event()

            def seen(record: _Bound, *_: Any) -> None:
                if record.bound:
                    bound.add(record.key)
                    if len(bound) >= pods:
                        all_bound.set()

            informer.add_handlers(seen, lambda _old, new: seen(new), None)
            watch = asyncio.create_task(informer.run())
            await informer.wait_synced()
            bodies = [pod_body(i) for i in range(pods)]
            path = PODS.path(NAMESPACE)
            cpu_before = {**cpu_by_role(process.pid), "load generator": time.process_time()}
            if floor is not None:
                cpu_before[label] = cpu_of(floor.pid)
            start = time.monotonic()
            next_index = 0

            async def creator() -> None:
                nonlocal next_index
                while next_index < pods:
                    body = bodies[next_index]
                    next_index += 1
                    with contextlib.suppress(ApiError):
                        await client.request("POST", path, body=body)

            await asyncio.gather(*(creator() for _ in range(concurrency)))
            created = time.monotonic() - start
            last_report = time.monotonic()
            while not all_bound.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(all_bound.wait(), 10)
                if time.monotonic() - last_report >= 10:
                    last_report = time.monotonic()
                    print(
                        f"[{label}] {len(bound)}/{pods} bound after {last_report - start:.0f}s",
                        flush=True,
                    )
            elapsed = time.monotonic() - start
            cpu_after = {**cpu_by_role(process.pid), "load generator": time.process_time()}
            if floor is not None:
                cpu_after[label] = cpu_of(floor.pid)
            rate = pods / elapsed
            print(
                f"[{label}] {pods} pods created in {created:.1f}s, all bound after "
                f"{elapsed:.1f}s: {rate:.1f} pods/s",
                flush=True,
            )
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
            used = spent(cpu_before, cpu_after)
            report_cpu(label, pods, used)
        finally:
            await client.close()
            await stop_sim_up(process)
            if floor is not None:
                floor.terminate()
                await floor.wait()
        report_latency(label, state / "extender-latency.json")
        return rate, used


def cpu_ms_per_pod(seconds: float, pods: int) -> str:
    return f"{seconds * 1000 / pods:.3f}"


async def main(args: argparse.Namespace) -> None:
    alone, _ = await run_phase(args.nodes, args.pods, "alone", args.concurrency)
    with_extender, used = await run_phase(args.nodes, args.pods, "extender", args.concurrency)
    cpu_line = f"extender_cpu_ms_per_pod={cpu_ms_per_pod(used.get('extender', 0.0), args.pods)}"
    if args.floor:
        floor, floor_used = await run_phase(args.nodes, args.pods, "floor", args.concurrency)
        floor_cpu = floor_used.get(LABELS["floor"], 0.0)
        cpu_line += f" floor_cpu_ms_per_pod={cpu_ms_per_pod(floor_cpu, args.pods)}"
        print(
            f"BENCH sim.floor_pods_per_s value={floor:.1f} unit=pods/s baseline={alone:.1f} "
            f"ratio={floor / alone:.3f}"
        )
        print(
            f"floor_pods_per_s={floor:.1f} floor_ratio={floor / alone:.3f} "
            f"extender_to_floor={with_extender / floor:.3f}"
        )
    print(cpu_line)
    print(
        f"BENCH sim.pods_per_s value={with_extender:.1f} unit=pods/s baseline={alone:.1f} "
        f"ratio={with_extender / alone:.3f}"
    )
    print(
        f"pods_per_s={alone:.1f} with_extender_pods_per_s={with_extender:.1f} "
        f"ratio={with_extender / alone:.3f}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=8, help="parallel pod creates")
    parser.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="skip the third phase (bench.floor_extender, the most any extender can reach)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    asyncio.run(main(parse_args()))
