"""Gang scheduling end to end: `vulcan sim up --with-extender`, PodGroups and pods created with
kubectl, the kube-scheduler stand-in calling vulcan's extender. Every test watches that no gang
is ever left partially bound (0 < bound < minMember) for longer than a moment."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import (
    SimCluster,
    metric,
    phase,
    pod_manifest,
    scheduled_condition,
    start_cluster,
    wait_for,
)

PARTIAL_LIMIT = 10.0  # seconds a gang may be seen partially bound (Bindings land one by one)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-gang"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=8,memory=32Gi,nvidia.com/gpu=1",
        "--with-extender",
        "--pod-duration",
        "1s",
        "--gang-backoff",
        "1s",
        "--member-reach-timeout",
        "5s",
    )


def gang(
    cluster: SimCluster,
    job: str,
    workers: int,
    min_member: int,
    *,
    min_task_member: dict[str, int] | None = None,
    annotations: dict[str, str] | None = None,
) -> None:
    spec: dict[str, Any] = {"minMember": min_member}
    if min_task_member:
        spec["minTaskMember"] = min_task_member
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": job, "annotations": annotations or {}},
            "spec": spec,
        }
    )


# A volume whose claim does not exist: kube-scheduler's VolumeBinding keeps the pod off every
# node before it calls an extender, and vulcan, which does not read claims, cannot know.
MISSING_CLAIM = [{"name": "data", "persistentVolumeClaim": {"claimName": "no-such-claim"}}]


def gpu_worker(
    job: str, index: int, duration: str = "0.5s", task: str = "worker", **spec: Any
) -> dict[str, Any]:
    manifest = pod_manifest(
        f"{job}-{task}-{index}",
        cpu="1",
        duration=duration,
        labels={"job": job},
        annotations={"scheduling.k8s.io/group-name": job, "volcano.sh/task-spec": task},
        **spec,
    )
    manifest["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    return manifest


def _scheduled_message(pod: dict[str, Any]) -> str:
    for condition in pod.get("status", {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return str(condition.get("message", ""))
    return ""


class GangWatch:
    """Polls the pods of some gangs until a condition holds, failing if a gang stays partially
    bound too long; remembers when each gang was first fully bound and fully finished."""

    def __init__(self, cluster: SimCluster, gangs: dict[str, int]) -> None:
        self.cluster = cluster
        self.gangs = gangs
        self.partial_since: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.done_at: dict[str, float] = {}

    def observe(self) -> None:
        now = time.monotonic()
        for job, minimum in self.gangs.items():
            pods = self.cluster.pods(selector=f"job={job}")
            bound = sum(1 for p in pods if p["spec"].get("nodeName"))
            if 0 < bound < minimum:
                since = self.partial_since.setdefault(job, now)
                assert now - since < PARTIAL_LIMIT, f"gang {job} partially bound: {bound}"
            else:
                self.partial_since.pop(job, None)
            if bound >= minimum:
                self.bound_at.setdefault(job, now)
            if pods and all(phase(p) == "Succeeded" for p in pods):
                self.done_at.setdefault(job, now)

    def until(self, what: str, predicate: Any, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.observe()
            if predicate():
                return
            time.sleep(0.05)
        pods = {
            p["metadata"]["name"]: (p["spec"].get("nodeName"), phase(p), _scheduled_message(p))
            for job in self.gangs
            for p in self.cluster.pods(selector=f"job={job}")
        }
        raise AssertionError(
            f"timed out waiting for {what}: bound {self.bound_at}, done {self.done_at}, pods {pods}"
        )


def test_two_tfjobs_on_four_gpus_complete_one_after_the_other(cluster: SimCluster) -> None:
    """The case Volcano was built for: without vulcan both jobs hang half-placed
    (tests/e2e/test_sim_up_plain.py); with it one runs whole, then the other."""
    for job in ("tf-a", "tf-b"):
        gang(cluster, job, 4, 4)
    cluster.apply([gpu_worker(job, i) for i in range(4) for job in ("tf-a", "tf-b")])
    watch = GangWatch(cluster, {"tf-a": 4, "tf-b": 4})
    watch.until("both jobs to complete", lambda: len(watch.done_at) == 2, timeout=90)
    first, second = sorted(watch.done_at, key=watch.done_at.__getitem__)
    # The second gang got its GPUs only after the first had finished with them.
    assert watch.bound_at[second] >= watch.done_at[first] - 0.5

    def group_status(job: str) -> dict[str, Any]:
        path = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/{job}"
        return cluster.get(path).get("status") or {}

    # The PodGroups say so too (status is written coalesced, so it may trail the pods).
    watch.until(
        "the PodGroups to report completion",
        lambda: all(
            group_status(job).get("succeeded") == 4 and group_status(job)["phase"] == "Completed"
            for job in ("tf-a", "tf-b")
        ),
    )
    cluster.kubectl("delete", "pods", "-l", "job in (tf-a,tf-b)", "--wait=false")


def test_a_waiting_gangs_members_stay_out_of_kube_schedulers_queue_until_admitted(
    cluster: SimCluster,
) -> None:
    gated_gang_scenario(cluster)


def gated_gang_scenario(cluster: SimCluster) -> None:
    """Created while the GPUs are taken, the second gang's members carry the
    queue-allocation gate (kube-scheduler does not try them: no refusal, no retry); once the
    first gang is gone the gate is lifted with the admission and the gang binds whole. Shared
    by the embedded and the real tier."""
    gate = "scheduling.volcano.sh/queue-allocation-gate"
    gang(cluster, "holds", 4, 4)
    cluster.apply(
        [gpu_worker("holds", i, duration="forever", schedulerName="volcano") for i in range(4)]
    )
    watch = GangWatch(cluster, {"holds": 4, "waits": 2})
    watch.until("the first gang to bind", lambda: "holds" in watch.bound_at)
    gang(cluster, "waits", 2, 2)
    cluster.apply([gpu_worker("waits", i, schedulerName="volcano") for i in range(2)])
    waiting = cluster.pods(selector="job=waits")
    assert [[g["name"] for g in p["spec"].get("schedulingGates") or ()] for p in waiting] == [
        [gate],
        [gate],
    ]
    assert all(scheduled_condition(p).get("reason") != "Unschedulable" for p in waiting)
    cluster.kubectl("delete", "pods", "-l", "job=holds", "--wait=false")
    watch.until("the waiting gang to complete", lambda: "waits" in watch.done_at, timeout=60)
    assert not any(p["spec"].get("schedulingGates") for p in cluster.pods(selector="job=waits"))
    cluster.kubectl("delete", "pods", "-l", "job=waits", "--wait=false")


def test_a_gang_whose_last_member_never_comes_binds_nothing(cluster: SimCluster) -> None:
    gang(cluster, "short", 3, 3)
    cluster.apply([gpu_worker("short", i, duration="forever") for i in range(2)])
    watch = GangWatch(cluster, {"short": 3})

    def explained() -> bool:
        group = cluster.get(
            "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/short"
        )
        conditions = (group.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Unschedulable" for c in conditions)

    watch.until("the PodGroup to say why", explained)
    pods = cluster.pods(selector="job=short")
    assert not any(p["spec"].get("nodeName") for p in pods)
    # The capacity stays free for others: a plain GPU pod runs.
    cluster.apply(gpu_worker("solo", 0) | {"metadata": {"name": "solo", "labels": {"job": "solo"}}})
    watch.until("solo to succeed", lambda: phase(cluster.pod("solo")) == "Succeeded")
    message = next(
        c["message"]
        for c in (
            cluster.get("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/short")[
                "status"
            ]["conditions"]
        )
        if c["type"] == "Unschedulable"
    )
    assert "2/3 members created" in message or "tasks in gang unschedulable" in message
    cluster.kubectl("delete", "pods", "-l", "job in (short,solo)", "--wait=false")


def test_a_podgroup_created_before_its_pods_is_enqueued_and_they_bind_whole(
    cluster: SimCluster,
) -> None:
    """A user's PodGroup with no pods yet, in a queue with room, is enqueued on its
    minResources as Volcano does (an operator creates the pods once it is Inqueue); the pods,
    created afterwards, bind whole."""
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "early"},
            "spec": {"minMember": 2, "minResources": {"cpu": "2", "nvidia.com/gpu": "2"}},
        }
    )
    watch = GangWatch(cluster, {"early": 2})
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/early"

    def phase() -> str:
        return (cluster.get(path).get("status") or {}).get("phase", "Pending")

    watch.until("the PodGroup to be enqueued without its pods", lambda: phase() == "Inqueue")
    cluster.apply([gpu_worker("early", i) for i in range(2)])
    watch.until("the gang to complete", lambda: "early" in watch.done_at, timeout=60)
    assert "early" in watch.bound_at
    cluster.kubectl("delete", "pods", "-l", "job=early", "--wait=false")
    cluster.kubectl("delete", "podgroup", "early", "--wait=false")


def group_condition(cluster: SimCluster, job: str, kind: str) -> dict[str, Any] | None:
    group = cluster.get(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/{job}")
    for condition in (group.get("status") or {}).get("conditions") or ():
        if condition["type"] == kind:
            return condition
    return None


def test_workers_alone_do_not_start_a_gang_that_needs_its_master(cluster: SimCluster) -> None:
    gang(cluster, "mpi", 4, 4, min_task_member={"master": 1, "worker": 3})
    # Four workers make minMember 4, but the gang needs its master (minTaskMember).
    cluster.apply([gpu_worker("mpi", i) for i in range(4)])
    watch = GangWatch(cluster, {"mpi": 4})
    watch.until("the PodGroup to explain", lambda: group_condition(cluster, "mpi", "Unschedulable"))
    assert not any(p["spec"].get("nodeName") for p in cluster.pods(selector="job=mpi"))
    # The master comes (the fourth worker is a spare beyond the gang's minimum).
    cluster.apply(gpu_worker("mpi", 0, task="master"))
    watch.until("the gang to complete", lambda: "mpi" in watch.done_at, timeout=60)
    cluster.kubectl("delete", "pods", "-l", "job=mpi", "--wait=false")


def test_a_gang_with_an_unplaceable_member_times_out_whole_and_completes_later(
    cluster: SimCluster,
) -> None:
    """One member mounts a claim that does not exist: kube-scheduler refuses it before it asks
    the extender, and vulcan cannot know (a member that no node accepts, e.g. a nodeSelector
    no node matches, is not admitted at all: tests/e2e/test_placement_rules_e2e.py; one of a
    scheduler vulcan does not serve neither: tests/e2e/test_jobs_e2e.py). The other members'
    held binds time out together (nothing is bound), the reservation is released and the gang
    backs off; once the member is created again right, the gang is admitted and runs."""
    # The gang timeout must outlast kube-scheduler's longest pod backoff (podMaxBackoffSeconds,
    # 10 s): members retried after failed binds come back up to that far apart.
    gang(cluster, "late", 3, 3, annotations={"vulcan.sh/gang-timeout": "11s"})
    members = [gpu_worker("late", i) for i in range(2)]
    members.append(gpu_worker("late", 2, volumes=MISSING_CLAIM))
    cluster.apply(members)
    watch = GangWatch(cluster, {"late": 3})

    def timed_out() -> bool:
        return any(
            e["reason"] == "FailedScheduling" and "timed out" in e["note"]
            for name in ("late-worker-0", "late-worker-1")
            for e in cluster.events(name)
        )

    watch.until("the held binds to time out", timed_out, timeout=40)
    # vulcan says so on the members too (kubectl describe pod shows it).
    assert any(
        e["reason"] == "GangTimedOut" and e["reportingController"] == "vulcan"
        for e in cluster.events("late-worker-0")
    )
    # The PodGroup told when the hold began, and that it ended.
    said = [
        (e["reason"], e["note"])
        for e in cluster.events("late")
        if e["regarding"]["kind"] == "PodGroup"
    ]
    assert any(
        reason == "GangHolding" and "at most 11s" in note and "/3 members hold binds" in note
        for reason, note in said
    ), said
    assert any(reason == "GangTimedOut" for reason, _ in said), said
    assert not any(p["spec"].get("nodeName") for p in cluster.pods(selector="job=late"))
    cluster.kubectl("delete", "pod", "late-worker-2", "--grace-period=0", "--force")
    cluster.apply(gpu_worker("late", 2))
    watch.until("the gang to complete", lambda: "late" in watch.done_at, timeout=60)
    cluster.kubectl("delete", "pods", "-l", "job=late", "--wait=false")
    # Every answered bind has one result: the held binds that timed out count as such.
    metrics = cluster.metrics()
    assert metric(metrics, "vulcan_extender_binds_total", result="gang_timeout") >= 2
    answered = metric(metrics, "vulcan_extender_requests_total", verb="bind")
    assert answered == metric(metrics, "vulcan_extender_binds_total"), metrics


def unreached_gang_scenario(cluster: SimCluster, timeout: float) -> None:
    """Every member of gang `stuck` mounts a claim that does not exist: kube-scheduler never
    asks vulcan about them. Admitted first, it holds all four GPUs; `next` waits for them. Once
    the extender's --member-reach-timeout (`timeout`) has passed, `stuck` loses its admission
    and its room, says why in a Warning event, and `next` runs whole. Shared by the embedded
    and the real tier."""
    gang(cluster, "stuck", 4, 4)
    # (schedulerName: the real tier's vulcan serves `volcano`, its default scheduler the rest.)
    cluster.apply(
        [gpu_worker("stuck", i, volumes=MISSING_CLAIM, schedulerName="volcano") for i in range(4)]
    )
    try:
        wait_for(
            "the stuck gang to be admitted",
            lambda: any(e["reason"] == "Admitted" for e in cluster.events("stuck")),
            30,
        )
    except AssertionError as failed:
        condition = group_condition(cluster, "stuck", "Unschedulable")
        raise AssertionError(f"{failed}; its condition: {condition}") from None
    gang(cluster, "next", 4, 4)
    cluster.apply([gpu_worker("next", i, schedulerName="volcano") for i in range(4)])
    watch = GangWatch(cluster, {"stuck": 4, "next": 4})
    started = time.monotonic()

    def told() -> list[str]:
        return [
            e["note"]
            for e in cluster.events("stuck")
            if e["reason"] == "MembersNotReached" and e["type"] == "Warning"
        ]

    watch.until("the stuck gang to lose its admission", lambda: bool(told()), timeout=timeout + 30)
    assert time.monotonic() - started < timeout + 30
    assert f"none of its members reached vulcan's filter within {timeout:g}s" in told()[0]
    watch.until("the next gang to complete", lambda: "next" in watch.done_at, timeout=60)
    assert not any(p["spec"].get("nodeName") for p in cluster.pods(selector="job=stuck"))
    cluster.kubectl("delete", "pods", "-l", "job=stuck", "--wait=false")
    cluster.kubectl("delete", "podgroup", "stuck", "next", "--wait=false")


def test_a_gang_whose_members_never_reach_vulcan_gives_its_room_back(
    cluster: SimCluster,
) -> None:
    unreached_gang_scenario(cluster, 5.0)


def test_a_high_priority_gang_preempts_a_running_gang_as_a_whole(cluster: SimCluster) -> None:
    cluster.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "gang-high"},
            "value": 1000,
        }
    )
    gang(cluster, "low", 4, 4)
    cluster.apply([gpu_worker("low", i, duration="forever") for i in range(4)])
    watch = GangWatch(cluster, {"low": 4, "high": 4, "partial": 4})
    watch.until("the low gang to run", lambda: "low" in watch.bound_at)
    # A high-priority gang that is only waiting for a member triggers nothing.
    gang(cluster, "partial", 4, 4)
    cluster.apply([gpu_worker("partial", i, priorityClassName="gang-high") for i in range(3)])
    watch.until(
        "the waiting gang to explain", lambda: group_condition(cluster, "partial", "Unschedulable")
    )
    assert all(phase(p) == "Running" for p in cluster.pods(selector="job=low"))
    # A complete high-priority gang evicts the whole low gang (not one member per node).
    gang(cluster, "high", 4, 4)
    cluster.apply([gpu_worker("high", i, priorityClassName="gang-high") for i in range(4)])
    watch.until("the high gang to complete", lambda: "high" in watch.done_at, timeout=60)
    low = cluster.pods(selector="job=low")
    assert all(p["metadata"].get("deletionTimestamp") or phase(p) != "Running" for p in low) or (
        not low
    )
    events = [e for i in range(4) for e in cluster.events(f"low-worker-{i}")]
    assert sum(e["reason"] == "Preempted" for e in events) >= 4
    assert all("default/high" in e["note"] for e in events if e["reason"] == "Preempted")
    cluster.kubectl("delete", "pods", "-l", "job in (low,high,partial)", "--wait=false")


def test_an_extender_crash_while_binds_are_held_leaves_no_partial_gang(
    cluster: SimCluster,
) -> None:
    """The extender dies (SIGKILL) holding two of a gang's three binds (the third member mounts
    a claim that does not exist): kube-scheduler's requests are cut, nothing is bound; the
    restarted extender rebuilds from the API server and the gang completes once its last
    member can be placed."""
    gang(cluster, "crash", 3, 3, annotations={"vulcan.sh/gang-timeout": "30s"})
    members = [gpu_worker("crash", i) for i in range(2)]
    members.append(gpu_worker("crash", 2, volumes=MISSING_CLAIM))
    cluster.apply(members)
    watch = GangWatch(cluster, {"crash": 3})
    watch.until(
        "two binds held",
        lambda: metric(cluster.metrics(), "vulcan_extender_binds_in_flight") == 2,
    )
    pid = cluster.component_pid("extender")
    os.kill(pid, signal.SIGKILL)

    def restarted() -> bool:
        try:
            return cluster.component_pid("extender") != pid and bool(cluster.metrics())
        except (AssertionError, OSError):
            return False

    watch.until("the extender to be restarted", restarted, timeout=60)
    assert not any(p["spec"].get("nodeName") for p in cluster.pods(selector="job=crash"))
    cluster.kubectl("delete", "pod", "crash-worker-2", "--grace-period=0", "--force")
    cluster.apply(gpu_worker("crash", 2))
    watch.until("the gang to complete", lambda: "crash" in watch.done_at, timeout=90)
    cluster.kubectl("delete", "pods", "-l", "job=crash", "--wait=false")
