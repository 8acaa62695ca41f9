"""`vulcan demo`: what vulcan is for, shown on the embedded cluster.

`vulcan demo gang` (also plain `vulcan demo`) replays the case Volcano was built for: two
TFJob-like training jobs of 4 workers, 1 GPU each, on 4 nodes with 1 GPU each. First on a cluster
with the kube-scheduler stand-in alone: it places pods one at a time, each job gets 2 GPUs, and
since a job only makes progress while all its workers run, both hang. Then on a fresh cluster
with vulcan's extender: one job is admitted whole and finishes, then the other. Exit status 0
only when the vulcan run completed both jobs.

`vulcan demo extender` is the older walkthrough: the extender's HTTP verbs called by hand, the
way kube-scheduler calls them.

The clusters are `vulcan sim up`'s `Cluster`, run in this process (API server, extender and
scheduler stand-in still as child processes), so the demo stops them itself, also on Ctrl-C.
Every wait polls the API server with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from vulcan.demo_cluster import (
    NODE_PROFILE,
    NODES,
    _cluster_args,
    _interruptible,
    _stop_fully,
)

# ---------------------------------------------------------------------------- the gang demo

JOBS = ("tf-a", "tf-b")
WORKERS = 4  # per job, and PodGroup minMember: a worker alone cannot train
RUN_TIME = 2.0  # seconds each worker runs once its whole gang runs
NAMESPACE = "default"
JOB_LABEL = "vulcan.sh/demo-job"
POLL = 0.1
# Bounded waits. The stand-in fills the 4 GPUs within a second or two; "no progress" can only
# be shown by waiting several run times; the vulcan run needs two run times plus the extender's
# admission passes and held binds (seconds), so a minute is far more than enough.
PLACE_TIMEOUT = 30.0
STALL_WINDOW = 3 * RUN_TIME
VULCAN_TIMEOUT = 60.0
# Bindings of a gang land one by one: a gang seen partially placed for less than this is just
# its binds landing, not a half-placed gang.
BIND_SLACK = 0.5

STATES = ("succeeded", "running", "bound", "pending", "failed")


def _podgroup(job: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": job, "namespace": NAMESPACE},
        "spec": {"minMember": WORKERS},
    }


def _worker(job: str, index: int) -> dict[str, Any]:
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-worker-{index}",
            "namespace": NAMESPACE,
            "labels": {JOB_LABEL: job},
            "annotations": {
                "scheduling.k8s.io/group-name": job,
                "vulcan.sh/sim-duration": f"{RUN_TIME:g}s",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "tensorflow",
                    "image": "tensorflow/tensorflow:2.15.0-gpu",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
        },
    }


def _state(pod: dict[str, Any]) -> str:
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase == "Pending":
        return "bound" if (pod.get("spec") or {}).get("nodeName") else "pending"
    return phase.lower() if phase.lower() in STATES else "pending"


def _scheduled_message(pod: dict[str, Any]) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return ""


@dataclass
class Snapshot:
    """One poll of the demo's pods (and PodGroups): per job, how many pods are in each state."""

    counts: dict[str, dict[str, int]]
    pods: dict[str, list[dict[str, Any]]]
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)

    def n(self, job: str, *states: str) -> int:
        return sum(self.counts[job].get(s, 0) for s in states)

    def placed(self, job: str) -> int:
        """Workers that hold a node (bound, running or finished)."""
        return self.n(job, "bound", "running", "succeeded", "failed")

    def line(self) -> str:
        parts = []
        for job in JOBS:
            shown = " ".join(f"{self.counts[job][s]} {s}" for s in STATES if self.counts[job][s])
            parts.append(f"{job}: {shown or 'no pods'}")
        return " | ".join(parts)

    def unschedulable(self, job: str) -> dict[str, Any] | None:
        status = (self.groups.get(job) or {}).get("status") or {}
        for condition in status.get("conditions") or ():
            if condition.get("type") == "Unschedulable" and condition.get("status") == "True":
                return dict(condition)
        return None


class Run:
    """Submits the two jobs to a cluster and follows them, printing a line per change."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.start = time.monotonic()
        self.last_line = ""
        self.bound_at: dict[str, float] = {}  # when all of a job's workers were on nodes
        self.done_at: dict[str, float] = {}  # when all of them had succeeded
        self.partial_since: dict[str, float] = {}  # a job with 0 < placed < WORKERS, since
        self.longest_partial: dict[str, float] = dict.fromkeys(JOBS, 0.0)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def say(self, text: str) -> None:
        print(f"  {self.elapsed():5.1f}s  {text}", flush=True)

    async def submit(self) -> None:
        from core.kube.client import PODGROUPS, PODS

        for job in JOBS:
            await self.client.create(PODGROUPS, _podgroup(job), NAMESPACE)
        # Interleaved, as two job controllers creating their workers at the same time would:
        # that is what makes a pod-at-a-time scheduler split the GPUs between the jobs.
        for index in range(WORKERS):
            for job in JOBS:
                await self.client.create(PODS, _worker(job, index), NAMESPACE)
        self.start = time.monotonic()

    async def poll(self, *, groups: bool = False) -> Snapshot:
        from core.kube.client import PODGROUPS, PODS

        listed = await self.client.list(PODS, NAMESPACE, labelSelector=JOB_LABEL)
        pods: dict[str, list[dict[str, Any]]] = {job: [] for job in JOBS}
        for pod in listed.get("items") or ():
            job = pod["metadata"].get("labels", {}).get(JOB_LABEL)
            if job in pods:
                pods[job].append(pod)
        counts = {job: dict.fromkeys(STATES, 0) for job in JOBS}
        for job, members in pods.items():
            for pod in members:
                counts[job][_state(pod)] += 1
        snap = Snapshot(counts, pods)
        if groups:
            items = (await self.client.list(PODGROUPS, NAMESPACE)).get("items") or ()
            snap.groups = {g["metadata"]["name"]: g for g in items}
        now = self.elapsed()
        for job in JOBS:
            placed = snap.placed(job)
            if 0 < placed < WORKERS:
                since = self.partial_since.setdefault(job, now)
                self.longest_partial[job] = max(self.longest_partial[job], now - since)
            else:
                self.partial_since.pop(job, None)
            if placed >= WORKERS:
                self.bound_at.setdefault(job, now)
            if snap.n(job, "succeeded") >= WORKERS:
                self.done_at.setdefault(job, now)
        line = snap.line()
        if line != self.last_line:
            self.last_line = line
            self.say(line)
        return snap


@contextlib.asynccontextmanager
async def _cluster(state_dir: Path, with_extender: bool) -> Any:
    from vulcan.sim_up import Cluster

    state_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(_cluster_args(state_dir, with_extender))
    began = time.monotonic()
    # `sim up`'s start-up lines (URLs, kubeconfig, export hints) are for a cluster one keeps
    # using; the demo's reader needs one line, so they go to a file beside the logs.
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            await cluster.start()
        print(
            f"  cluster up in {time.monotonic() - began:.1f}s: {NODES} hollow nodes "
            f"({NODE_PROFILE}), kube-scheduler stand-in"
            + (" calling vulcan's extender" if with_extender else ""),
            flush=True,
        )
        yield cluster
    finally:
        (state_dir / "sim-up.txt").write_text(captured.getvalue())
        await _stop_fully(cluster)


@dataclass
class PlainResult:
    deadlocked: bool = False
    waited: float = 0.0
    why_pending: str = ""
    story: str = ""


async def _plain(state_dir: Path) -> PlainResult:
    print("\n1. kube-scheduler alone (the stand-in, no vulcan)", flush=True)
    result = PlainResult()
    async with _cluster(state_dir, with_extender=False) as cluster:
        run = Run(cluster.client)
        await run.submit()
        print(
            f"  submitted PodGroups {' and '.join(JOBS)} (minMember {WORKERS}) and their "
            f"{WORKERS * len(JOBS)} workers, interleaved",
            flush=True,
        )
        deadline = time.monotonic() + PLACE_TIMEOUT
        snap = await run.poll()
        # Wait for the scheduler to hand out every GPU (or to get nowhere, bounded).
        while sum(snap.placed(j) for j in JOBS) < NODES:
            if time.monotonic() > deadline:
                result.story = f"the scheduler did not place {NODES} workers in {PLACE_TIMEOUT:g}s"
                print(f"  {result.story}", flush=True)
                return result
            await asyncio.sleep(POLL)
            snap = await run.poll()
        # Each worker would finish RUN_TIME after its gang runs whole; showing that nothing
        # happens takes several times that.
        quiet_until = time.monotonic() + STALL_WINDOW
        while time.monotonic() < quiet_until:
            await asyncio.sleep(POLL)
            snap = await run.poll()
        result.waited = STALL_WINDOW
        half = all(snap.n(j, "running") == WORKERS // 2 for j in JOBS) and all(
            snap.n(j, "pending") == WORKERS - WORKERS // 2 for j in JOBS
        )
        result.deadlocked = half and not any(snap.n(j, "succeeded") for j in JOBS)
        pending = [p for j in JOBS for p in snap.pods[j] if _state(p) == "pending"]
        result.why_pending = next((m for p in pending if (m := _scheduled_message(p))), "")
        if result.deadlocked:
            result.story = (
                f"deadlock: all {NODES} GPUs taken, each job has {WORKERS // 2} of its {WORKERS} "
                f"workers running and none finished in {STALL_WINDOW:g}s"
            )
        else:
            result.story = f"no deadlock this time: {snap.line()}"
        print(f"  {result.story}", flush=True)
        if result.why_pending:
            print(f"  the pending workers' PodScheduled: {result.why_pending}", flush=True)
    return result


@dataclass
class VulcanResult:
    completed: bool = False
    first: str = ""
    second: str = ""
    bound_at: dict[str, float] = field(default_factory=dict)
    done_at: dict[str, float] = field(default_factory=dict)
    held: dict[str, dict[str, Any]] = field(default_factory=dict)  # job -> PodGroup condition
    held_filter: dict[str, str] = field(default_factory=dict)  # job -> pod's PodScheduled text
    longest_partial: dict[str, float] = field(default_factory=dict)
    story: str = ""


def _reason(condition: dict[str, Any]) -> str:
    if not condition:
        return ""
    return f"{condition.get('reason')}: {condition.get('message')}"


async def _vulcan(state_dir: Path) -> VulcanResult:
    print("\n2. kube-scheduler + vulcan's extender (a fresh cluster, same jobs)", flush=True)
    result = VulcanResult()
    async with _cluster(state_dir, with_extender=True) as cluster:
        run = Run(cluster.client)
        await run.submit()
        print(f"  submitted the same PodGroups and {WORKERS * len(JOBS)} workers", flush=True)
        deadline = time.monotonic() + VULCAN_TIMEOUT
        while True:
            snap = await run.poll(groups=True)
            for job, other in (JOBS, JOBS[::-1]):
                # What vulcan says about the gang it holds back while the other one has the GPUs:
                # the PodGroup's Unschedulable condition and the pods' scheduling failure. (Read
                # only then: before both gangs' pods all exist, the condition is about members
                # still missing, which is not the story.)
                if other not in run.bound_at or snap.placed(job):
                    continue
                condition = snap.unschedulable(job)
                if condition is not None:
                    old = result.held.get(job) or {}
                    if _reason(condition) != _reason(old):
                        text = _reason(condition)
                        run.say(f"{job} held at filter; PodGroup Unschedulable: {text}")
                    result.held[job] = condition
                message = next((m for p in snap.pods[job] if (m := _scheduled_message(p))), "")
                if message:
                    result.held_filter[job] = message
            if all(snap.n(j, "succeeded") == WORKERS for j in JOBS):
                result.completed = True
                break
            if snap.n(JOBS[0], "failed") or snap.n(JOBS[1], "failed"):
                result.story = f"a worker failed: {snap.line()}"
                break
            if time.monotonic() > deadline:
                result.story = f"not done after {VULCAN_TIMEOUT:g}s: {snap.line()}"
                break
            await asyncio.sleep(POLL)
        result.bound_at, result.done_at = dict(run.bound_at), dict(run.done_at)
        result.longest_partial = dict(run.longest_partial)
        if result.completed:
            result.first, result.second = sorted(JOBS, key=lambda j: run.done_at[j])
            result.story = f"both jobs completed: all {WORKERS * len(JOBS)} workers Succeeded"
        print(f"  {result.story}", flush=True)
    return result


def _summary(plain: PlainResult, vulcan: VulcanResult) -> list[str]:
    lines = []
    if plain.deadlocked:
        # kube-scheduler's message goes on with the preemption attempt; its first sentence is
        # the point.
        why = plain.why_pending.split(". ")[0].rstrip(".")
        lines.append(
            f"Without vulcan the scheduler placed workers one at a time: each job got "
            f"{WORKERS // 2} of the {NODES} GPUs and would wait forever for the other's, a deadlock"
            + (f" (pending workers: {why})." if why else ".")
        )
    else:
        lines.append(f"Without vulcan: {plain.story}.")
    if not vulcan.completed:
        lines.append(f"With vulcan: {vulcan.story}.")
        return lines
    first, second = vulcan.first, vulcan.second
    lines.append(
        f"With vulcan, {first} was admitted whole: its {WORKERS} workers were bound together "
        f"(at {vulcan.bound_at[first]:.1f}s) and finished at {vulcan.done_at[first]:.1f}s."
    )
    # "At filter" only when the pods' scheduling failure carries the extender's reason.
    where = " at filter" if "gang " in vulcan.held_filter.get(second, "") else ""
    condition = vulcan.held.get(second)
    if condition is not None:
        lines.append(
            f"Meanwhile vulcan held {second}'s pods{where}, none placed; its PodGroup's "
            f"Unschedulable condition said {_reason(condition)}"
        )
    else:
        lines.append(
            f"Meanwhile vulcan held {second}'s pods{where}, none placed"
            + (f" ({vulcan.held_filter[second]})" if second in vulcan.held_filter else "")
            + "; no Unschedulable condition was seen on its PodGroup while it waited."
        )
    after = vulcan.bound_at[second] >= vulcan.done_at[first] - BIND_SLACK
    whole = all(vulcan.longest_partial.get(j, 0.0) < BIND_SLACK for j in JOBS)
    ending = ": one after the other" if after else ", its binds overlapping the first's end"
    lines.append(
        f"When {first}'s GPUs were free, vulcan admitted {second} (bound at "
        f"{vulcan.bound_at[second]:.1f}s, finished at {vulcan.done_at[second]:.1f}s){ending}"
        + (", neither ever half-placed." if whole else ".")
    )
    return lines


async def _gang() -> int:
    began = time.monotonic()
    print(
        f"vulcan demo: two training jobs ({', '.join(JOBS)}), {WORKERS} workers each, 1 GPU per "
        f"worker, {RUN_TIME:g}s of work; {NODES} nodes with 1 GPU each.\n"
        f"A job makes progress only while all {WORKERS} of its workers run "
        f"(PodGroup minMember {WORKERS}).",
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="vulcan-demo-"))
    ok = keep = False
    try:
        plain = await _plain(workdir / "plain")
        vulcan = await _vulcan(workdir / "vulcan")
        print("\nWhat happened:", flush=True)
        for line in _summary(plain, vulcan):
            print(f"  {line}", flush=True)
        ok = vulcan.completed
        keep = not ok
    except Exception as exc:  # a part did not start, the API failed: say so, exit 1
        print(f"\nerror: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        keep = True
    finally:
        # The clusters' logs are worth keeping only when something went wrong (not on Ctrl-C).
        if keep:
            print(f"logs kept in {workdir}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\ndemo finished in {time.monotonic() - began:.1f}s: "
        f"{'vulcan completed both jobs' if ok else 'FAILED'}",
        flush=True,
    )
    return 0 if ok else 1


def run_gang() -> int:
    import logging

    from vulcan.logs import setup_logging
    from vulcan.sim_commands import run_async

    # The in-process kubelets log every pod at INFO; the demo prints its own story.
    setup_logging("text", logging.WARNING)
    return int(run_async(_interruptible(_gang())))


# ------------------------------------------------------------------ the extender walkthrough


async def _walkthrough() -> None:
    from kubernetes_asyncio.client import Configuration

    from core.cache import ClusterCache
    from core.kube.client import NODES as NODE_RESOURCE
    from core.kube.client import PODS, ClientOptions, KubeClient
    from core.manifests import load_all
    from extender.binder import Binder
    from extender.server import ExtenderServer, serve
    from plugins.config import default_config
    from plugins.framework import Framework
    from sim.apiserver.server import EmbeddedApiServer

    workdir = Path(tempfile.mkdtemp(prefix="vulcan-demo-"))
    kubeconfig = workdir / "kubeconfig"
    async with EmbeddedApiServer(kubeconfig_out=kubeconfig) as apiserver:
        print(f"embedded API server: {apiserver.url}  (kubeconfig: {kubeconfig})")
        client = KubeClient(Configuration(host=apiserver.url), ClientOptions(qps=0))
        for index, cpu in enumerate(("4", "8", "2")):
            name = f"node-{index}"
            resources = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
            await client.create(
                NODE_RESOURCE,
                {
                    "metadata": {"name": name},
                    "status": {
                        "capacity": resources,
                        "allocatable": resources,
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                },
            )
        examples = Path(__file__).resolve().parents[1] / "manifests" / "examples"
        for doc in load_all((examples / "gang-job.yaml").read_text()):
            resource = _resource_for(doc)
            await client.create(resource, doc, doc["metadata"].get("namespace"))
        cache = ClusterCache()
        cache.start(client)
        await cache.wait_synced(30)
        server = ExtenderServer(cache, Framework(default_config()), Binder(client))
        runner, port = await serve(server, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{port}/v1"
        print(f"vulcan extender: {url}\n")
        async with aiohttp.ClientSession() as http:
            for name, cpu in (("web-1", "3"), ("web-2", "3"), ("batch-1", "6"), ("huge", "32")):
                pod = await client.create(
                    PODS,
                    {
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": cpu}},
                                }
                            ]
                        },
                    },
                )
                await _until_cached(cache, f"default/{name}")
                args = {"Pod": pod, "Nodes": None, "NodeNames": ["node-0", "node-1", "node-2"]}
                filtered = await _post(http, f"{url}/filter", args)
                print(
                    f"{name} (cpu {cpu}): filter passed {filtered['NodeNames']}, "
                    f"failed {filtered['FailedNodes']}"
                )
                if not filtered["NodeNames"]:
                    print("  -> unschedulable, as kube-scheduler would report it\n")
                    continue
                scores = await _post(
                    http, f"{url}/prioritize", {**args, "NodeNames": filtered["NodeNames"]}
                )
                best = max(scores, key=lambda s: s["Score"])["Host"]
                print(f"  prioritize {[(s['Host'], s['Score']) for s in scores]} -> {best}")
                answer = await _post(
                    http,
                    f"{url}/bind",
                    {
                        "PodName": name,
                        "PodNamespace": "default",
                        "PodUID": pod["metadata"]["uid"],
                        "Node": best,
                    },
                )
                print(f"  bind -> {answer or 'ok'}\n")
                await _until_bound(cache, f"default/{name}")
        if shutil.which("kubectl"):
            for args in (["get", "nodes"], ["get", "pods", "-o", "wide"], ["get", "vcjob,queue"]):
                print(f"$ kubectl {' '.join(args)}")
                process = await asyncio.create_subprocess_exec(
                    "kubectl", "--kubeconfig", str(kubeconfig), *args
                )
                await asyncio.wait_for(process.wait(), 60)
                print()
        await runner.cleanup()
        await cache.stop()
        await client.close()
    shutil.rmtree(workdir, ignore_errors=True)


def _resource_for(doc: dict[str, Any]) -> Any:
    from core.kube.client import QUEUES, VCJOBS

    return {"Queue": QUEUES, "Job": VCJOBS}[doc["kind"]]


async def _post(http: aiohttp.ClientSession, url: str, body: Any) -> Any:
    async with http.post(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    ) as response:
        return orjson.loads(await response.read())


async def _until_cached(cache: Any, key: str, timeout: float = 10.0) -> None:
    await _until(cache, lambda: key in cache.pods, timeout)


async def _until_bound(cache: Any, key: str, timeout: float = 10.0) -> None:
    await _until(cache, lambda: cache.pods.get(key) is not None and cache.pods[key].node, timeout)


async def _until(cache: Any, done: Any, timeout: float) -> None:
    """Wait on the cache's change signal until `done()`, with one overall deadline."""
    async with asyncio.timeout(timeout):
        while not done():
            cache.changed.clear()
            await cache.changed.wait()


def run_extender_walkthrough() -> int:
    from vulcan.sim_commands import run_async

    run_async(_walkthrough())
    return 0


def run_job() -> int:
    from vulcan.demo_job import run_job as job

    return job()


def run_flow() -> int:
    from vulcan.demo_flow import run_flow as flow

    return flow()


DEMOS = {
    "gang": run_gang,
    "job": run_job,
    "flow": run_flow,
    "extender": run_extender_walkthrough,
}


def run(which: str | None = None) -> int:
    return DEMOS[which or "gang"]()
