"""Queues end to end: `vulcan sim up --with-extender` with the queues of
examples/queues.yaml (research weight 3, prod weight 1 with a capability), jobs
as PodGroups + pods created with kubectl, the kube-scheduler stand-in calling vulcan.

64 cpu in all (4 nodes x 16 cpu); every job here is a gang whose pods run until deleted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import SimCluster, metric, pod_manifest, start_cluster, wait_for
from tests.helpers import EXAMPLES

NODE_CPU = 16


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    for sim in start_cluster(
        tmp_path_factory.mktemp("sim-queues"),
        "--nodes",
        "4",
        "--node-profile",
        f"cpu={NODE_CPU},memory=64Gi,pods=110",
        "--with-extender",
        "--pod-duration",
        "forever",
        "--gang-backoff",
        "1s",
    ):
        fixture = (EXAMPLES / "queues.yaml").read_text()
        sim.apply(list(yaml.safe_load_all(fixture)))
        yield sim


@pytest.fixture(autouse=True)
def clean(cluster: SimCluster) -> Iterator[None]:
    yield
    cluster.kubectl("delete", "pods", "-l", "e2e=queues", "--wait=false")
    cluster.kubectl("delete", "podgroups", "-l", "e2e=queues", "--wait=false")
    wait_for("the jobs to be gone", lambda: not cluster.pods(selector="e2e=queues") or None, 60)


def job(
    cluster: SimCluster,
    name: str,
    queue: str,
    members: int,
    cpu: int,
    *,
    pods_too: bool = True,
    **pod_spec: Any,
) -> None:
    """A gang of `members` pods of `cpu` cpu each in `queue` (`pods_too=False`: only the
    PodGroup; `members()` creates the pods later)."""
    labels = {"e2e": "queues", "job": name, "queue": queue}
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "minMember": members,
            "queue": queue,
            "minResources": {"cpu": str(cpu * members)},
        },
    }
    pods = _member_pods(name, queue, members, cpu, **pod_spec) if pods_too else []
    cluster.apply([group, *pods])


def members(cluster: SimCluster, name: str, queue: str, count: int, cpu: int) -> None:
    cluster.apply(_member_pods(name, queue, count, cpu))


def _member_pods(
    name: str, queue: str, count: int, cpu: int, **pod_spec: Any
) -> list[dict[str, Any]]:
    labels = {"e2e": "queues", "job": name, "queue": queue}
    return [
        pod_manifest(
            f"{name}-{index}",
            cpu=str(cpu),
            duration=None,
            labels=labels,
            annotations={"scheduling.k8s.io/group-name": name},
            **pod_spec,
        )
        for index in range(count)
    ]


def bound_cpu(cluster: SimCluster, queue: str) -> int:
    return sum(
        int(p["spec"]["containers"][0]["resources"]["requests"]["cpu"])
        for p in cluster.pods(selector=f"e2e=queues,queue={queue}")
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    )


def settled(cluster: SimCluster, probe: Any, quiet: float = 3.0, timeout: float = 90.0) -> Any:
    """Wait until `probe()` stops changing for `quiet` seconds; return its last value."""
    deadline = time.monotonic() + timeout
    last, since = probe(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = probe()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return last
    raise AssertionError(f"never settled; last {last}")


def group_message(cluster: SimCluster, name: str) -> str:
    group = cluster.get(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/{name}")
    return " ".join(c.get("message", "") for c in group.get("status", {}).get("conditions") or ())


def test_two_saturated_queues_converge_to_three_to_one(cluster: SimCluster) -> None:
    for index in range(20):
        job(cluster, f"r-{index:02d}", "research", 1, 4)
        job(cluster, f"p-{index:02d}", "prod", 1, 4)

    def agreed() -> tuple[int, int] | None:
        # Settled, and the Queue status (which counts reserved gangs too) says the same.
        shares = (bound_cpu(cluster, "research"), bound_cpu(cluster, "prod"))
        queue = cluster.get("/apis/scheduling.volcano.sh/v1beta1/queues/research")
        held = queue.get("status", {}).get("allocated", {}).get("cpu")
        return shares if held == str(shares[0]) else None

    settled(cluster, lambda: (bound_cpu(cluster, "research"), bound_cpu(cluster, "prod")))
    shares = wait_for("the queue status to agree", agreed, 30)
    # 75/25 of 64 cpu is 48/16: within one pod's size (4 cpu).
    assert abs(shares[0] - 48) <= 4 and abs(shares[1] - 16) <= 4, shares
    assert sum(shares) >= 60  # and the cluster is used
    waiting = [f"p-{i:02d}" for i in range(20)]
    messages = " ".join(group_message(cluster, name) for name in waiting)
    assert "queue prod over its share" in messages


def test_an_idle_queues_share_is_borrowed_then_reclaimed_whole(cluster: SimCluster) -> None:
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "keeper"},
            "spec": {
                "weight": 1,
                "guarantee": {"resource": {"cpu": "8"}},
                "deserved": {"cpu": "8"},
            },
        }
    )
    job(cluster, "k-00", "keeper", 2, 4)  # keeper holds exactly its guarantee
    for index in range(14):  # research alone borrows the rest: 14 gangs of 2 x 2 cpu
        job(cluster, f"r-{index:02d}", "research", 2, 2)
    try:
        wait_for("research to borrow all", lambda: bound_cpu(cluster, "research") == 56 or None)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; bound {bound_cpu(cluster, 'research')}; "
            + " | ".join(
                f"{p['metadata']['name']}: {p.get('status', {}).get('conditions')} "
                f"{p['metadata'].get('annotations')} {p['metadata'].get('creationTimestamp')}"
                for p in cluster.pods(selector="e2e=queues")
                if not p["spec"].get("nodeName")
            )
            + " held: "
            + str(metric(cluster.metrics(), "vulcan_extender_binds_in_flight"))
        ) from None
    assert bound_cpu(cluster, "keeper") == 8
    # prod gets work: 8 cpu. Deserved now (64 cpu, weights 3:1:1, keeper asking only its 8):
    # research 42, prod 14, keeper 8 — research gives back 8 cpu, keeper nothing.
    job(cluster, "p-00", "prod", 2, 4)
    wait_for("prod's gang to run", lambda: bound_cpu(cluster, "prod") == 8 or None, 60)
    research = cluster.pods(selector="e2e=queues,queue=research")
    gone = {p["metadata"]["name"] for p in research if p["metadata"].get("deletionTimestamp")}
    gone |= {f"r-{i:02d}-{m}" for i in range(14) for m in range(2)} - {
        p["metadata"]["name"] for p in research
    }
    # Whole gangs only (both members of every reclaimed gang), and only what prod needed.
    jobs = {name.rsplit("-", 1)[0] for name in gone}
    assert gone == {f"{j}-{m}" for j in jobs for m in range(2)}
    assert len(jobs) == 2, jobs
    keeper = cluster.pods(selector="e2e=queues,queue=keeper")
    assert len(keeper) == 2 and not any(p["metadata"].get("deletionTimestamp") for p in keeper)
    # The victims' Preempted events are written after each eviction's answer, through the
    # extender's paced event recorder: awaited, not read once (the CI run under load read them
    # before the last was written).
    wait_for(
        "a reclaimed pod's Preempted event naming queue prod",
        lambda: any(
            e["reason"] == "Preempted" and "queue prod" in e["note"]
            for name in sorted(gone)
            for e in cluster.events(name)
        ),
        30,
    )


def test_a_closed_queue_admits_nothing_and_a_capability_is_never_exceeded(
    cluster: SimCluster,
) -> None:
    cluster.apply(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "capped"},
                "spec": {"weight": 8, "capability": {"cpu": "8"}},
            },
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "shut"},
                "spec": {"weight": 1},
            },
        ]
    )
    # The PodGroup exists before the queue closes (Volcano's webhook refuses new ones into a
    # closed queue); its pod arrives after.
    job(cluster, "s-0", "shut", 1, 1, pods_too=False)
    cluster.kubectl(
        "patch",
        "queue",
        "shut",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"state":"Closed"}}',
    )
    members(cluster, "s-0", "shut", 1, 1)
    for index in range(6):
        job(cluster, f"c-{index}", "capped", 1, 2)
    peak = settled(cluster, lambda: bound_cpu(cluster, "capped"))
    assert peak == 8
    assert bound_cpu(cluster, "shut") == 0
    assert "queue shut is Closed" in group_message(cluster, "s-0")


def test_a_podgroup_refused_for_its_queues_capability_says_why_to_kubectl(
    cluster: SimCluster,
) -> None:
    """Not only `vulcan explain`: `kubectl describe podgroup` shows the Unschedulable condition
    and `kubectl get events` the event, both naming the queue, the resource and the numbers."""
    cluster.apply(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "tiny"},
            "spec": {"weight": 1, "capability": {"cpu": "2"}},
        }
    )
    job(cluster, "big-0", "tiny", 1, 4)
    expected = "queue tiny cannot hold minResources: cpu need 4, realCapability 2"

    def described() -> str | None:
        text = cluster.kubectl("describe", "podgroup", "big-0")
        status = text.split("Events:")[0]  # the condition, not only the event
        # (refused at enqueue before its pod was seen, it says "1/0 tasks" for a moment)
        told = "1/1 tasks in gang unschedulable" in status and expected in status
        return text if "Unschedulable" in status and told else None

    wait_for("kubectl describe to say why", described, 60)

    def evented() -> str | None:
        events = cluster.kubectl(
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=PodGroup,involvedObject.name=big-0",
            "-o",
            "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message",
        )
        return events if expected in events else None

    events = wait_for("kubectl get events to say why", evented, 60)
    assert "Warning" in events and "Unschedulable" in events
    cluster.kubectl("delete", "pods", "-l", "job=big-0", "--wait=false")
    cluster.kubectl("delete", "podgroup", "big-0")
    cluster.kubectl("delete", "queue", "tiny", "--wait=false")


def test_a_stuck_head_of_line_gang_does_not_stop_another_queue(cluster: SimCluster) -> None:
    job(cluster, "huge", "research", 20, 4)  # 80 cpu: can never fit in 64
    for index in range(3):
        job(cluster, f"p-{index}", "prod", 1, 2)
    wait_for("prod's jobs to run", lambda: bound_cpu(cluster, "prod") == 6 or None, 60)
    assert bound_cpu(cluster, "research") == 0


def test_pods_annotated_preemptable_false_in_any_spelling_are_never_reclaimed(
    cluster: SimCluster,
) -> None:
    """`volcano.sh/preemptable` is read as Go's ParseBool reads it: "False" and "0" are false
    (the reclaim walk once read anything but "false" as true)."""
    spellings = ("False", "0", "FALSE", "f")
    # No queue holds a guarantee (an earlier test may have made one): research alone borrows the
    # whole cluster, none of it evictable.
    cluster.kubectl("delete", "queue", "keeper", "--ignore-not-found")
    for index in range(16):
        name = f"np-{index:02d}"
        labels = {"e2e": "queues", "job": name, "queue": "research"}
        group = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "labels": labels},
            "spec": {"minMember": 2, "queue": "research", "minResources": {"cpu": "4"}},
        }
        pods = [
            pod_manifest(
                f"{name}-{m}",
                cpu="2",
                duration=None,
                labels=labels,
                annotations={
                    "scheduling.k8s.io/group-name": name,
                    "volcano.sh/preemptable": spellings[index % len(spellings)],
                },
            )
            for m in range(2)
        ]
        cluster.apply([group, *pods])
    wait_for("research to borrow all", lambda: bound_cpu(cluster, "research") == 64 or None, 90)
    borrowed = 64
    job(cluster, "p-np", "prod", 2, 4)  # within prod's deserved share (16 of 64)
    # prod deserves more than it has, but nothing it could reclaim may be evicted.
    assert settled(cluster, lambda: bound_cpu(cluster, "research")) == borrowed
    research = cluster.pods(selector="e2e=queues,queue=research")
    assert len(research) == 32
    assert not any(p["metadata"].get("deletionTimestamp") for p in research)
    assert bound_cpu(cluster, "prod") == 0
