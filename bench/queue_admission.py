"""Queue admission latency with many queues and a deep backlog: how long after the event that
makes a gang admissible vulcan admits it (PodGroup Pending -> Inqueue).

    .venv/bin/python -m bench.queue_admission --queues 100 --pending 10000

One `vulcan sim up --with-extender` cluster (nodes of 32 cpu, 128Gi, 110 pods; pods run until
deleted). Every one of `--queues` queues has a capability of `--queue-cpu` cpu and runs gangs of
one 1-cpu pod up to it; behind them wait `--pending` more such PodGroups (spread evenly over the
queues), each with its pod: the backlog vulcan's scheduling loop walks on every pass, in queue
order and job order, refusing each with its queue's reason. The cluster itself keeps room.

Then, `--samples` times: a new queue with room is created, then a PodGroup in it, then its pod
(the triggering event: the gang now has all its members); a PodGroup watch records when vulcan
wrote phase Inqueue. The latency is from the pod's create returning to the watch seeing Inqueue,
so it includes vulcan's informers, one scheduling pass over the whole backlog, and the status
write — what a user would wait.

Baseline (same run): a trigger with no backlog at all, measured first, before the backlog is
created; the ratio says what the backlog costs.

Last line: `admission_p99_ms=<X>` (target <= 200 ms at 100 queues and 10,000 pending PodGroups).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from typing import Any

import orjson

from bench.sim_cluster import describe_totals, running_cluster
from core.kube.client import PODGROUPS, PODS, QUEUES, KubeClient
from core.kube.informer import Informer

NAMESPACE = "default"
GROUP_NAME = "scheduling.k8s.io/group-name"


class _Group:
    __slots__ = ("key", "phase", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key = meta["name"]
        self.rv = meta.get("resourceVersion", "")
        self.phase = (obj.get("status") or {}).get("phase") or "Pending"


class InqueueWatch:
    """When each PodGroup was first seen Inqueue (or beyond)."""

    def __init__(self) -> None:
        self.admitted_at: dict[str, float] = {}
        self.changed = asyncio.Event()

    def on_add(self, record: _Group) -> None:
        if record.phase != "Pending" and record.key not in self.admitted_at:
            self.admitted_at[record.key] = time.monotonic()
            self.changed.set()

    def on_update(self, _old: _Group, new: _Group) -> None:
        self.on_add(new)

    def on_delete(self, _record: _Group) -> None:
        pass

    async def wait(self, name: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while name not in self.admitted_at:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{name} was not admitted within {timeout:.0f}s")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)
        return self.admitted_at[name]


def queue_body(name: str, cpu: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "capability": {"cpu": str(cpu)}},
        }
    )


def group_body(name: str, queue: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"minMember": 1, "queue": queue, "minResources": {"cpu": "1"}},
        }
    )


def pod_body(name: str, group: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-0",
                "namespace": NAMESPACE,
                "labels": {"vulcan.sh/bench": "queues"},
                "annotations": {GROUP_NAME: group},
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example.com/job:1",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    }
                ],
            },
        }
    )


def gang_calls(prefix: str, count: int, queues: list[str]) -> list[tuple[str, bytes]]:
    """`count` one-pod gangs named `<prefix>-NNNNN`, spread round-robin over `queues`: the
    PodGroup then its pod, as creates."""
    calls: list[tuple[str, bytes]] = []
    for index in range(count):
        name = f"{prefix}-{index:05d}"
        calls.append((PODGROUPS.path(NAMESPACE), group_body(name, queues[index % len(queues)])))
        calls.append((PODS.path(NAMESPACE), pod_body(name, name)))
    return calls


async def create_all(client: KubeClient, calls: list[tuple[str, bytes]], concurrency: int) -> None:
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < len(calls):
            path, body = calls[next_index]
            next_index += 1
            await client.request("POST", path, body=body)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def trigger(client: KubeClient, watch: InqueueWatch, name: str, timeout: float) -> float:
    """A queue with room, a gang in it; seconds from the gang's last create to Inqueue."""
    await client.request("POST", QUEUES.path(), body=queue_body(name, 4))
    await client.request("POST", PODGROUPS.path(NAMESPACE), body=group_body(name, name))
    await client.request("POST", PODS.path(NAMESPACE), body=pod_body(name, name))
    created = time.monotonic()
    admitted = await watch.wait(name, timeout)
    return max(0.0, admitted - created)


async def main(args: argparse.Namespace) -> None:
    async with running_cluster(
        args.nodes, args.state_dir, args.start_timeout, "--with-extender"
    ) as cluster:
        client = cluster.client
        watch = InqueueWatch()
        informer: Informer[_Group] = Informer(client, PODGROUPS, _Group, namespace=NAMESPACE)
        informer.add_handlers(watch.on_add, watch.on_update, watch.on_delete)
        watcher = asyncio.create_task(informer.run())
        await informer.wait_synced()

        baseline = [
            await trigger(client, watch, f"base-{i:03d}", args.timeout)
            for i in range(args.baseline_samples)
        ]
        print(
            f"without a backlog: p50 {statistics.median(baseline) * 1000:.1f} ms "
            f"max {max(baseline) * 1000:.1f} ms",
            flush=True,
        )

        queues = [f"q-{i:03d}" for i in range(args.queues)]
        await create_all(
            client,
            [(QUEUES.path(), queue_body(q, args.queue_cpu)) for q in queues],
            args.concurrency,
        )
        running = args.queue_cpu * args.queues
        begin = time.monotonic()
        await create_all(client, gang_calls("run", running, queues), args.concurrency)
        while len([k for k in watch.admitted_at if k.startswith("run-")]) < running:
            watch.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch.changed.wait(), 5)
            if time.monotonic() - begin > args.timeout * 10:
                raise RuntimeError("the running gangs were not all admitted")
        print(f"{running} running gangs admitted in {time.monotonic() - begin:.1f}s")
        begin = time.monotonic()
        await create_all(client, gang_calls("wait", args.pending, queues), args.concurrency)
        print(
            f"{args.pending} pending PodGroups (+ pods) created in {time.monotonic() - begin:.1f}s",
            flush=True,
        )
        await asyncio.sleep(args.settle)  # let the backlog's first passes and writes pass
        before = await cluster.extender_totals()
        samples = []
        for i in range(args.samples):
            samples.append(await trigger(client, watch, f"t-{i:03d}", args.timeout))
        spent = describe_totals(before, await cluster.extender_totals())
        print(f"extender during the triggers: {spent}")
        admitted_wait = [k for k in watch.admitted_at if k.startswith("wait-")]
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if args.show_samples:
        print("triggers (ms, in order): " + " ".join(f"{s * 1000:.0f}" for s in samples))
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]
    base = statistics.median(baseline)
    print(
        f"with {args.queues} queues and {args.pending} pending PodGroups: "
        f"p50 {p50 * 1000:.1f} ms p99 {p99 * 1000:.1f} ms max {samples[-1] * 1000:.1f} ms "
        f"over {len(samples)} triggers; backlog PodGroups wrongly admitted: {len(admitted_wait)}"
    )
    print(
        f"BENCH queue.admission_p50 value={p50 * 1000:.3f} unit=ms baseline={base * 1000:.3f} "
        f"ratio={p50 / base:.3f}"
    )
    print(f"admission_p99_ms={p99 * 1000:.3f}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--queue-cpu", type=int, default=8, help="capability of each queue")
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--baseline-samples", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--start-timeout", type=float, default=300.0)
    parser.add_argument("--state-dir", default=None)
    parser.add_argument(
        "--show-samples", action="store_true", help="print every trigger's latency, in order"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
