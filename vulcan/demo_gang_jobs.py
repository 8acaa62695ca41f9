"""The workload of `vulcan demo gang` (split from `vulcan.demo`, which heads the demos): the two
training jobs (their PodGroups and GPU workers), one poll of their pods' states (`Snapshot`) and
the `Run` that submits them to a cluster and follows them. Separate from the demo's two acts
(`vulcan.demo_gang`), which run this workload on a cluster each and tell what happened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

# ---------------------------------------------------------------------------- the gang demo

JOBS = ("tf-a", "tf-b")
WORKERS = 4  # per job, and PodGroup minMember: a worker alone cannot train
RUN_TIME = 2.0  # seconds each worker runs once its whole gang runs
NAMESPACE = "default"
JOB_LABEL = "vulcan.sh/demo-job"

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
