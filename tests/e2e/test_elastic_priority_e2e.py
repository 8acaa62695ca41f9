"""Issue 31, items 3 and 4, end to end: `vulcan sim up --with-extender --with-controllers`,
Volcano Jobs as a user writes them (kubectl), PriorityClasses and Queues.

- A high-priority Job whose queue is full of lower-priority work is enqueued on the promise of
  preemption, runs whole, and the lower-priority Job is evicted whole and runs again later.
- Elastic Jobs (more replicas than minAvailable): the members beyond the minimum stay within
  the queue's capability, same-queue preemption takes elastic members first, and two queues
  weighted 1:3 end at their deserved split.

Each test has its own cluster (a test's evictions must not be another's starting point). A
`Sampler` lists the pods every ~0.1 s and remembers the longest time any Job was partly bound
(0 < bound < minAvailable)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import SimCluster, start_cluster
from tests.helpers import REPO

PARTIAL_WINDOW = 5.0  # seconds a Job may be partly bound while its gang's binds go out


def _cluster(tmp_path: Path, nodes: int, cpu: int) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path,
        "--nodes",
        str(nodes),
        "--node-profile",
        f"cpu={cpu},memory=64Gi,pods=110",
        "--with-extender",
        "--with-controllers",
        "--gang-backoff",
        "1s",
    )


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def queue(name: str, weight: int = 1, capability: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": True}
    if capability:
        spec["capability"] = capability
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def vcjob(
    name: str,
    *,
    replicas: int,
    min_available: int,
    cpu: int,
    queue_name: str = "default",
    priority: str | None = None,
    duration: str = "forever",
) -> dict[str, Any]:
    """A Volcano Job of one task, as a user writes it."""
    spec: dict[str, Any] = {
        "minAvailable": min_available,
        "schedulerName": "volcano",
        "queue": queue_name,
        "tasks": [
            {
                "name": "worker",
                "replicas": replicas,
                # The task's minimum is the job's: its members beyond are elastic. (Left out,
                # it defaults to replicas, and minAvailable < Σ task minimums is issue 31's
                # item 2, the bind barrier's quorum.)
                "minAvailable": min_available,
                "template": {
                    "metadata": {"annotations": {"vulcan.sh/sim-duration": duration}},
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {
                                    "requests": {"cpu": str(cpu), "memory": "1Gi"},
                                    "limits": {"cpu": str(cpu), "memory": "1Gi"},
                                },
                            }
                        ],
                    },
                },
            }
        ],
    }
    if priority is not None:
        spec["priorityClassName"] = priority
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": spec,
    }


class Sampler:
    """Bound pods per Job (live: on a node, not terminating), sampled; the longest partial."""

    def __init__(self, cluster: SimCluster, minimums: dict[str, int]) -> None:
        self.cluster = cluster
        self.minimums = minimums
        self.partial_since: dict[str, float] = {}
        self.worst_partial: dict[str, float] = {}
        self.bound: dict[str, int] = {}
        self.lowest: dict[str, int] = {}  # fewest bound seen per job (reset by the test)

    def sample(self) -> dict[str, int]:
        now = time.monotonic()
        bound = dict.fromkeys(self.minimums, 0)
        for pod in self.cluster.pods():
            job = pod["metadata"].get("labels", {}).get("volcano.sh/job-name")
            if job not in bound:
                continue
            live = pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp")
            if live and pod.get("status", {}).get("phase") in ("Pending", "Running", None):
                bound[job] += 1
        for job, count in bound.items():
            if 0 < count < self.minimums[job]:
                since = self.partial_since.setdefault(job, now)
                self.worst_partial[job] = max(self.worst_partial.get(job, 0.0), now - since)
            else:
                self.partial_since.pop(job, None)
        for job, count in bound.items():
            self.lowest[job] = min(self.lowest.get(job, count), count)
        self.bound = bound
        return bound

    def until(self, what: str, predicate: Callable[[dict[str, int]], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.sample()):
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: {self.bound}")

    def hold(self, what: str, predicate: Callable[[dict[str, int]], bool], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            bound = self.sample()
            assert predicate(bound), f"{what} stopped holding: {bound}"
            time.sleep(0.1)

    def never_partial(self) -> None:
        worst = {job: round(s, 1) for job, s in self.worst_partial.items() if s > PARTIAL_WINDOW}
        assert not worst, f"jobs partly bound longer than {PARTIAL_WINDOW}s: {worst}"


def podgroup_of(cluster: SimCluster, job: str) -> dict[str, Any]:
    groups = cluster.get("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups")
    for group in groups["items"]:
        owners = group["metadata"].get("ownerReferences") or []
        if any(o.get("kind") == "Job" and o.get("name") == job for o in owners):
            return group  # type: ignore[no-any-return]
    raise AssertionError(f"no PodGroup for job {job}")


def queue_allocated_cpu(cluster: SimCluster, name: str) -> int:
    record = cluster.get(f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}")
    text = str(record.get("status", {}).get("allocated", {}).get("cpu", "0"))
    return int(text[:-1]) // 1000 if text.endswith("m") else int(text)


# ----------------------------------------------------------------------------- item 3


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[SimCluster]:
    yield from _cluster(tmp_path, 2, 8)


def test_a_high_priority_job_preempts_a_full_queue_whole_and_the_low_one_runs_again(
    two_nodes: SimCluster,
) -> None:
    cluster = two_nodes
    cluster.apply([priority_class("batch-low", 10), priority_class("batch-high", 1000)])
    sampler = Sampler(cluster, {"low": 4, "high": 4})
    cluster.apply(vcjob("low", replicas=4, min_available=4, cpu=4, priority="batch-low"))
    sampler.until("the low-priority job to fill the cluster", lambda b: b["low"] == 4, 60)
    cluster.apply(
        vcjob("high", replicas=4, min_available=4, cpu=4, priority="batch-high", duration="15s")
    )
    sampler.until(
        "the high-priority job to run whole, the low one evicted whole",
        lambda b: b["high"] == 4 and b["low"] == 0,
        60,
    )
    # The high job's PodGroup says it was enqueued on the promise of preempting the low one,
    # whole; the victims' events say who took their room.
    events = cluster.get("/apis/events.k8s.io/v1/namespaces/default/events")["items"]
    enqueued = [e.get("note") or "" for e in events if e.get("reason") == "Enqueued"]
    assert any(
        "will preempt default/low-" in note and "whole gang, 4 pods, priority 10" in note
        for note in enqueued
    ), enqueued
    preempted = [e.get("note") or "" for e in events if e.get("reason") == "Preempted"]
    assert any("by gang default/high-" in note for note in preempted), preempted
    # Once the high-priority job is done, the low-priority one runs again, whole.
    sampler.until("the low-priority job to run again", lambda b: b["low"] == 4, 90)
    sampler.never_partial()


def explain(cluster: SimCluster, kind: str, name: str) -> str:
    """`vulcan explain` as a user runs it (with the extender's view)."""
    assert cluster.extender is not None
    args = [sys.executable, "-m", "vulcan", "explain", kind, name]
    args += ["--kubeconfig", str(cluster.kubeconfig), "--extender", cluster.extender]
    result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_job_of_equal_priority_waits_and_never_evicts_its_peer(two_nodes: SimCluster) -> None:
    cluster = two_nodes
    cluster.apply(priority_class("batch-high", 1000))
    sampler = Sampler(cluster, {"first": 4, "second": 4})
    cluster.apply(vcjob("first", replicas=4, min_available=4, cpu=4, priority="batch-high"))
    sampler.until("the first job to fill the cluster", lambda b: b["first"] == 4, 60)
    cluster.apply(vcjob("second", replicas=4, min_available=4, cpu=4, priority="batch-high"))
    sampler.hold("the first job untouched", lambda b: b["first"] == 4 and b["second"] == 0, 5)
    # Not enqueued on any promise: its pods are not made, and explain says what it waits for.
    assert podgroup_of(cluster, "second")["status"].get("phase") == "Pending"
    assert not cluster.pods(selector="volcano.sh/job-name=second")
    text = explain(cluster, "vcjob", "second")
    assert "will preempt" not in text
    assert "cpu" in text, text


# ----------------------------------------------------------------------------- item 4


def test_elastic_members_keep_within_the_queue_capability(two_nodes: SimCluster) -> None:
    cluster = two_nodes
    cluster.apply(queue("capped", capability={"cpu": "6"}))
    sampler = Sampler(cluster, {"elastic": 2})
    cluster.apply(vcjob("elastic", replicas=8, min_available=2, cpu=2, queue_name="capped"))
    sampler.until(
        "the job's minimum and what the capability allows", lambda b: b["elastic"] >= 3, 60
    )
    sampler.hold("the capability (6 cpu: 3 members of 2)", lambda b: b["elastic"] == 3, 4)
    assert queue_allocated_cpu(cluster, "capped") <= 6
    pending = [
        p
        for p in cluster.pods(selector="volcano.sh/job-name=elastic")
        if not p["spec"].get("nodeName")
    ]
    assert len(pending) == 5
    sampler.never_partial()


def test_a_high_priority_job_preempts_elastic_members_of_its_own_queue(
    two_nodes: SimCluster,
) -> None:
    cluster = two_nodes
    cluster.apply([priority_class("batch-low", 10), priority_class("batch-high", 1000)])
    sampler = Sampler(cluster, {"low": 2, "high": 2})
    cluster.apply(vcjob("low", replicas=8, min_available=2, cpu=2, priority="batch-low"))
    sampler.until("the elastic low-priority job to fill 16 cpu", lambda b: b["low"] == 8, 60)
    cluster.apply(vcjob("high", replicas=2, min_available=2, cpu=2, priority="batch-high"))
    # Two elastic members give way, one by one; the low job keeps running above its minimum.
    sampler.until(
        "the high-priority job to run, the low one to keep 6",
        lambda b: b["high"] == 2 and b["low"] == 6,
        60,
    )
    sampler.hold("the split", lambda b: b["high"] == 2 and b["low"] == 6, 4)
    sampler.never_partial()


@pytest.fixture
def eight_slots(tmp_path: Path) -> Iterator[SimCluster]:
    yield from _cluster(tmp_path, 2, 4)


@pytest.mark.parametrize("order", ["qa-first", "qb-first", "together"])
def test_two_elastic_jobs_in_queues_weighted_1_to_3_end_at_2_and_6(
    eight_slots: SimCluster, order: str
) -> None:
    cluster = eight_slots
    cluster.apply([queue("qa", 1), queue("qb", 3)])
    sampler = Sampler(cluster, {"ja": 1, "jb": 1})
    ja = vcjob("ja", replicas=8, min_available=1, cpu=1, queue_name="qa")
    jb = vcjob("jb", replicas=8, min_available=1, cpu=1, queue_name="qb")
    name = ""  # the job that borrows the cluster first
    if order == "together":
        cluster.apply([ja, jb])
    else:
        first, second = (ja, jb) if order == "qa-first" else (jb, ja)
        name = first["metadata"]["name"]
        cluster.apply(first)
        sampler.until(f"{name} to borrow all 8 cpu", lambda b: b[name] == 8, 60)
        sampler.lowest = {}
        cluster.apply(second)
    sampler.until("2/6", lambda b: b["ja"] == 2 and b["jb"] == 6, 90)
    sampler.hold("2/6", lambda b: b["ja"] == 2 and b["jb"] == 6, 5)
    if name:
        # Reclaim took the borrower's members one at a time: it never stopped running.
        assert sampler.lowest[name] >= 2, sampler.lowest
    for job in ("ja", "jb"):
        group = podgroup_of(cluster, job)
        assert group["status"].get("phase") == "Running", group["status"]
