"""Gang admission under load: how long after its last member is created a big gang is bound,
all or nothing, on a big embedded cluster.

    .venv/bin/python -m bench.gang_admission --nodes 5000 --gang 1000

One `vulcan sim up --nodes N --with-extender --pod-duration forever` cluster (nodes of 32 cpu,
128Gi, 110 pods). Each repeat creates a PodGroup (`scheduling.volcano.sh/v1beta1`, minMember =
gang size), then the gang's members (1 cpu, 2Gi, annotated `scheduling.k8s.io/group-name`) as fast
as the API server takes them from `--concurrency` parallel creators, and records the monotonic
time when the last create returned. vulcan's extender admits the gang once every member exists
and the whole gang fits (a ledger reservation), the kube-scheduler stand-in asks the extender's
filter for each member (steered to its reserved node), and the extender holds each member's bind
until minMember members hold binds, then creates all Bindings together. A pod informer (a watch,
as any client would see the cluster) records when every member has `spec.nodeName`. Between
repeats the gang's pods and PodGroup are deleted and the benchmark waits until they are gone.

What to read:
- `gang_bound_s` (the last line) is the p50 over repeats of the time from the last member's
  creation to the last member bound; the target at 5000 nodes and 1000 members is <= 5 s.
- `baseline` in the BENCH line is the time the same run took to create the members: the ratio
  says how the wait after the last create compares to the creation itself (the absolute numbers
  move with the machine and with whatever else runs on it).
- `longest partial window`: the longest time a gang was seen by the watch with some but not all
  members bound. Bindings are created together but land (and are watched) one by one, so a short
  window is expected; a long one would break the all-or-nothing property.

With `--topology` (issue 50: the planner within network domains), the cluster's nodes are
split into `--hypernodes` tier-1 HyperNodes of consecutive nodes (5,000 nodes in 50 of 100) and
the extender's conf names network-topology-aware; each repeat places the gang without a
networkTopology, then the same gang with `networkTopology: {mode: hard, highestTierAllowed: 1}`
(all its members within one HyperNode), alternating so both sample the same stretch of a noisy
machine. `topology_ratio` (the line before the last) is the hard gang's p50 over the plain
gang's (target <= 2); `gang_bound_s` stays the plain gang's.

Last line: `gang_bound_s=<X>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.sim_cluster import describe_totals, running_cluster
from bench.soak_topology import TOPOLOGY_CONF, hypernode_manifest
from core.kube.client import HYPERNODES, PODGROUPS, PODS, ApiError, KubeClient
from core.kube.informer import Informer

NAMESPACE = "default"
GANG_LABEL = "vulcan.sh/bench-gang"
GROUP_NAME = "scheduling.k8s.io/group-name"
QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
GANG_ADMITTED = "vulcan.sh/gang-admitted"


class _Member:
    __slots__ = ("admitted", "bound", "gang", "key", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key = meta["name"]
        self.rv = meta.get("resourceVersion", "")
        self.gang = (meta.get("labels") or {}).get(GANG_LABEL, "")
        self.bound = bool((obj.get("spec") or {}).get("nodeName"))
        self.admitted = GANG_ADMITTED in (meta.get("annotations") or {})


class GangWatch:
    """Counts the bound members of the current gang from pod watch events; remembers when the
    gang was first seen partially bound and when it was fully bound."""

    def __init__(self) -> None:
        self.gang = ""
        self.size = 0
        self.bound: set[str] = set()
        self.admitted: set[str] = set()
        self.present: set[str] = set()
        self.first_admitted_at: float | None = None
        self.last_admitted_at: float | None = None
        self.first_bound_at: float | None = None
        self.all_bound_at: float | None = None
        self.all_bound = asyncio.Event()
        self.gone = asyncio.Event()

    def start(self, gang: str, size: int) -> None:
        self.gang = gang
        self.size = size
        self.bound = set()
        self.admitted = set()
        self.first_admitted_at = None
        self.last_admitted_at = None
        self.first_bound_at = None
        self.all_bound_at = None
        self.all_bound = asyncio.Event()

    def on_add(self, record: _Member) -> None:
        self.present.add(record.key)
        self.gone.clear()
        if record.gang != self.gang:
            return
        now = time.monotonic()
        if record.admitted and record.key not in self.admitted:
            # vulcan stamps the members kube-scheduler cannot try on its own when it admits
            # the gang: the gated ones (ungated too) and the ones it had parked as refused.
            self.admitted.add(record.key)
            if self.first_admitted_at is None:
                self.first_admitted_at = now
            self.last_admitted_at = now
        if not record.bound or record.key in self.bound:
            return
        self.bound.add(record.key)
        if self.first_bound_at is None:
            self.first_bound_at = now
        if len(self.bound) >= self.size and self.all_bound_at is None:
            self.all_bound_at = now
            self.all_bound.set()

    def on_update(self, _old: _Member, new: _Member) -> None:
        self.on_add(new)

    def on_delete(self, record: _Member) -> None:
        self.present.discard(record.key)
        self.bound.discard(record.key)
        if not self.present:
            self.gone.set()

    @property
    def partial_window(self) -> float:
        """How long the gang has been (or was) seen with some but not all members bound."""
        if self.first_bound_at is None:
            return 0.0
        end = self.all_bound_at if self.all_bound_at is not None else time.monotonic()
        return end - self.first_bound_at


HARD_TIER_1 = {"mode": "hard", "highestTierAllowed": 1}


def podgroup_body(name: str, min_member: int, topology: dict[str, Any] | None = None) -> bytes:
    spec: dict[str, Any] = {"minMember": min_member}
    if topology is not None:
        spec["networkTopology"] = topology
    return orjson.dumps(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }
    )


def hypernode_bodies(nodes: int, count: int) -> list[dict[str, Any]]:
    """`count` tier-1 HyperNodes over consecutive hollow nodes (sim up names them
    hollow-node-0 ...), each naming its members exactly."""
    per = -(-nodes // count)
    return [
        hypernode_manifest(
            f"domain-{i}",
            1,
            [f"hollow-node-{n}" for n in range(i * per, min(nodes, (i + 1) * per))],
        )
        for i in range(count)
        if i * per < nodes
    ]


def member_body(gang: str, index: int, gated: bool = False) -> bytes:
    # Gated: the member carries Volcano's queue-allocation gate, as pods do where Volcano's
    # admission webhook adds it; kube-scheduler then never tries it before vulcan admits the
    # gang (no failed attempts, so no per-pod backoff to wait out afterwards).
    gates = [{"name": QUEUE_ALLOCATION_GATE}] if gated else []
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{gang}-worker-{index:05d}",
                "namespace": NAMESPACE,
                "labels": {GANG_LABEL: gang},
                "annotations": {GROUP_NAME: gang},
            },
            "spec": {
                "restartPolicy": "Never",
                "schedulingGates": gates,
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


async def group_state(client: KubeClient, gang: str) -> str:
    """The PodGroup's phase and conditions, for a report when a gang does not bind."""
    try:
        group = await client.get(PODGROUPS, gang, NAMESPACE)
    except ApiError as exc:
        return str(exc)
    status = group.get("status") or {}
    conditions = "; ".join(
        f"{c.get('type')}: {c.get('message', '')}" for c in status.get("conditions") or ()
    )
    return f"phase={status.get('phase')} running={status.get('running')} {conditions}"


async def run_gang(
    client: KubeClient,
    watch: GangWatch,
    gang: str,
    size: int,
    concurrency: int,
    timeout: float,
    gated: bool = False,
    topology: dict[str, Any] | None = None,
) -> tuple[float, float, float]:
    """Creates one gang and waits until it is bound; returns (seconds to create the members,
    seconds from the last create to the last member bound, longest partial window)."""
    watch.start(gang, size)
    body = podgroup_body(gang, size, topology)
    await client.request("POST", PODGROUPS.path(NAMESPACE), body=body)
    bodies = [member_body(gang, i, gated) for i in range(size)]
    path = PODS.path(NAMESPACE)
    next_index = 0
    failed: list[str] = []

    async def creator() -> None:
        nonlocal next_index
        while next_index < size:
            body = bodies[next_index]
            next_index += 1
            try:
                await client.request("POST", path, body=body)
            except ApiError as exc:
                failed.append(str(exc))

    start = time.monotonic()
    await asyncio.gather(*(creator() for _ in range(concurrency)))
    last_created = time.monotonic()
    if failed:
        raise RuntimeError(f"{len(failed)} member creates failed, first: {failed[0]}")
    created = last_created - start
    last_report = last_created
    while not watch.all_bound.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watch.all_bound.wait(), 5)
        now = time.monotonic()
        if watch.all_bound.is_set():
            break
        if now - last_created > timeout:
            raise RuntimeError(
                f"{gang}: only {len(watch.bound)}/{size} bound {now - last_created:.0f}s after "
                f"the last create; PodGroup {await group_state(client, gang)}"
            )
        if now - last_report >= 10:
            last_report = now
            print(
                f"[{gang}] {len(watch.bound)}/{size} bound {now - last_created:.0f}s after the "
                f"last create; PodGroup {await group_state(client, gang)}",
                flush=True,
            )
    assert watch.all_bound_at is not None
    if watch.first_admitted_at is not None and watch.last_admitted_at is not None:
        # Where the time goes: admission (the first stamp) then the release of the members
        # kube-scheduler had parked (stamped / ungated), then its cycles and the held binds.
        print(
            f"[{gang}] admission stamped on the first member "
            f"{watch.first_admitted_at - last_created:.2f}s and on the last of "
            f"{len(watch.admitted)} stamped {watch.last_admitted_at - last_created:.2f}s "
            "after the last create",
            flush=True,
        )
    return created, watch.all_bound_at - last_created, watch.partial_window


async def delete_gang(client: KubeClient, watch: GangWatch, gang: str, timeout: float) -> float:
    """Deletes a gang's pods and PodGroup; returns the seconds until the watch saw them gone."""
    start = time.monotonic()
    await client.request(
        "DELETE", PODS.path(NAMESPACE), query={"labelSelector": f"{GANG_LABEL}={gang}"}
    )
    with contextlib.suppress(ApiError):
        await client.delete(PODGROUPS, gang, NAMESPACE)
    try:
        await asyncio.wait_for(watch.gone.wait(), timeout)
    except TimeoutError:
        raise RuntimeError(
            f"{gang}: {len(watch.present)} pods still present {timeout:.0f}s after delete"
        ) from None
    while True:  # the PodGroup too (it has no finalizers, but be sure before the next gang)
        try:
            await client.get(PODGROUPS, gang, NAMESPACE)
        except ApiError as exc:
            if exc.not_found:
                break
            raise
        await asyncio.sleep(0.2)
    return time.monotonic() - start


async def main(args: argparse.Namespace) -> None:
    runs: list[tuple[float, float, float]] = []
    hard: list[float] = []  # --topology: the hard tier-1 gang's bound-after-last-create
    with tempfile.TemporaryDirectory(prefix="vulcan-bench-conf-") as conf_dir:
        extra = ["--with-extender"]
        if args.topology:
            conf = Path(conf_dir) / "extender-conf.yaml"
            conf.write_text(TOPOLOGY_CONF)
            extra += ["--extender-config", str(conf)]
        async with running_cluster(
            args.nodes, args.state_dir, args.start_timeout, *extra
        ) as cluster:
            client = cluster.client
            if args.topology:
                for hypernode in hypernode_bodies(args.nodes, args.hypernodes):
                    await client.create(HYPERNODES, hypernode)
            watch = GangWatch()
            informer: Informer[_Member] = Informer(
                client, PODS, _Member, namespace=NAMESPACE, label_selector=GANG_LABEL
            )
            informer.add_handlers(watch.on_add, watch.on_update, watch.on_delete)
            watcher = asyncio.create_task(informer.run())
            await informer.wait_synced()
            shapes = [None, HARD_TIER_1] if args.topology else [None]
            for repeat in range(args.repeats):
                for topology in shapes:
                    gang = f"gang-{repeat}" + ("-hard" if topology else "")
                    before = await cluster.extender_totals()
                    created, bound_after, partial = await run_gang(
                        client,
                        watch,
                        gang,
                        args.gang,
                        args.concurrency,
                        args.timeout,
                        args.gated,
                        topology,
                    )
                    if topology is None:
                        runs.append((created, bound_after, partial))
                    else:
                        hard.append(bound_after)
                    print(
                        f"[{gang}] {args.gang} members created in {created:.2f}s "
                        f"({args.gang / created:.0f}/s); first member bound "
                        f"{bound_after - partial:.2f}s and all bound {bound_after:.2f}s after "
                        f"the last create; partially bound for {partial:.2f}s",
                        flush=True,
                    )
                    spent = describe_totals(before, await cluster.extender_totals())
                    print(f"[{gang}] extender, create to bound: {spent}", flush=True)
                    if topology is not None:
                        print(f"[{gang}] on nodes of {await domains_of(client, gang)}")
                    gone = await delete_gang(client, watch, gang, args.timeout)
                    print(f"[{gang}] deleted and gone in {gone:.1f}s", flush=True)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    bound = [b for _, b, _ in runs]
    p50 = statistics.median(bound)
    baseline = statistics.median(c for c, _, _ in runs)  # in-run: creating the members
    longest_partial = max(p for _, _, p in runs)
    print(
        "runs (create s / bound after last create s / partial window s): "
        + ", ".join(f"{c:.2f}/{b:.2f}/{p:.2f}" for c, b, p in runs)
    )
    print(
        f"longest partial window observed: {longest_partial:.2f}s "
        f"(some but not all of a gang's members bound, as seen by the watch)"
    )
    print(
        f"BENCH gang.bound_after_last_create value={p50:.3f} unit=s baseline={baseline:.3f} "
        f"ratio={p50 / baseline:.3f}"
    )
    if hard:
        hard_p50 = statistics.median(hard)
        print(
            f"BENCH gang.hard_topology_bound value={hard_p50:.3f} unit=s baseline={p50:.3f} "
            f"ratio={hard_p50 / p50:.3f}"
        )
        print(f"hard_gang_bound_s={hard_p50:.3f} topology_ratio={hard_p50 / p50:.3f}")
    print(f"gang_bound_s={p50:.3f}")


async def domains_of(client: KubeClient, gang: str) -> str:
    """The HyperNodes a gang's members landed in (one, for a hard tier-1 gang)."""
    pods = await client.list(PODS, NAMESPACE, labelSelector=f"{GANG_LABEL}={gang}")
    nodes = {pod["spec"].get("nodeName") for pod in pods["items"]}
    hypernodes = (await client.list(HYPERNODES))["items"]
    names = sorted(
        h["metadata"]["name"]
        for h in hypernodes
        if nodes & {m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]}
    )
    return f"{len(nodes)} node(s) in HyperNode(s) {', '.join(names)}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gang", type=int, default=1000, help="members per gang (= minMember)")
    parser.add_argument("--repeats", type=int, default=3, help="gangs, one after the other")
    parser.add_argument("--concurrency", type=int, default=8, help="parallel member creates")
    parser.add_argument(
        "--gated",
        action="store_true",
        help="members carry Volcano's queue-allocation gate (as its webhook adds it)",
    )
    parser.add_argument(
        "--topology",
        action="store_true",
        help="also place each gang hard within one tier-1 HyperNode (issue 50's figure)",
    )
    parser.add_argument(
        "--hypernodes", type=int, default=50, help="tier-1 HyperNodes over the nodes (--topology)"
    )
    parser.add_argument(
        "--start-timeout", type=float, default=600.0, help="sim up's --start-timeout (seconds)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds a gang may take to bind (after its last create) or to be gone after delete",
    )
    parser.add_argument(
        "--state-dir", help="sim up's state directory, kept afterwards (logs/); default: a temp dir"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    asyncio.run(main(parse_args()))
