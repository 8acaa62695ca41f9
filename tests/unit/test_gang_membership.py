"""plugins.model.gang: task statuses, counts, JobValid / JobReady as Volcano's gang plugin defines
them (spec/volcano.md §3.1, §3.3), on hand-built snapshots."""

from __future__ import annotations

from typing import Any

import pytest

from core.cache import ClusterCache, Snapshot
from core.records import NodeRecord, PodGroupRecord, PodRecord
from plugins.model.gang import (
    ALLOCATED,
    BINDING,
    BOUND,
    FAILED,
    PENDING,
    RELEASING,
    RUNNING,
    SUCCEEDED,
    UNKNOWN,
    gang_view,
    task_status,
)
from plugins.model.gang_ready import (
    members_needed,
    missing_task_members,
    pending_members,
    ready,
    valid,
)

NS = "team-a"
GROUP = f"{NS}/train"


def pod(
    name: str,
    *,
    phase: str = "Pending",
    node: str | None = None,
    task: str | None = None,
    group: str | None = "train",
    cpu: str | None = "1",
    gpu: int = 0,
    deleting: bool = False,
    priority: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
    label_group: bool = False,
) -> PodRecord:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "creationTimestamp": created}
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    if group:
        if label_group:
            labels["scheduling.x-k8s.io/pod-group"] = group
        else:
            annotations["scheduling.k8s.io/group-name"] = group
    if task:
        annotations["volcano.sh/task-spec"] = task
    meta["annotations"], meta["labels"] = annotations, labels
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    requests: dict[str, Any] = {}
    if cpu:
        requests["cpu"] = cpu
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def podgroup(
    min_member: int, min_task_member: dict[str, int] | None = None, name: str = "train"
) -> PodGroupRecord:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "default"}
    if min_task_member:
        spec["minTaskMember"] = min_task_member
    return PodGroupRecord({"metadata": {"name": name, "namespace": NS}, "spec": spec})


def snapshot(group: PodGroupRecord | None, pods: list[PodRecord]) -> Snapshot:
    cache = ClusterCache()
    cache.on_node_add(
        NodeRecord(
            {
                "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "64", "pods": "110"}},
            }
        )
    )
    if group is not None:
        cache.on_podgroup_add(group)
    for p in pods:
        cache.on_pod_add(p)
    return cache.snapshot()


# ------------------------------------------------------------------------------- statuses


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (pod("p", phase="Pending"), PENDING),
        (pod("p", phase="Pending", node="n1"), BOUND),
        (pod("p", phase="Running", node="n1"), RUNNING),
        (pod("p", phase="Running", node="n1", deleting=True), RELEASING),
        (pod("p", phase="Pending", deleting=True), RELEASING),
        (pod("p", phase="Pending", node="n1", deleting=True), RELEASING),
        # A finished pod being deleted is still finished, not Releasing.
        (pod("p", phase="Succeeded", node="n1", deleting=True), SUCCEEDED),
        (pod("p", phase="Failed", node="n1"), FAILED),
        (pod("p", phase="Unknown", node="n1"), UNKNOWN),
    ],
)
def test_task_status_follows_volcano(record: PodRecord, expected: str) -> None:
    assert task_status(record) == expected


def test_ledger_reservations_and_held_binds_are_allocated_and_binding() -> None:
    waiting = pod("p")
    assert task_status(waiting, allocated={waiting.key}) == ALLOCATED
    assert task_status(waiting, allocated={waiting.key}, binding={waiting.key}) == BINDING
    # What the API server says wins over the ledger.
    bound = pod("q", node="n1")
    assert task_status(bound, allocated={bound.key}) == BOUND


# --------------------------------------------------------------------------------- counts


def test_counts_of_a_mixed_gang() -> None:
    pods = [
        pod("r1", phase="Running", node="n1"),
        pod("r2", phase="Running", node="n1"),
        pod("b1", node="n1"),
        pod("x1", phase="Running", node="n1", deleting=True),
        pod("x2", deleting=True),  # deleted before it was ever scheduled
        pod("p1"),
        pod("s1", phase="Succeeded", node="n1"),
        pod("f1", phase="Failed", node="n1"),
    ]
    view = gang_view(snapshot(podgroup(5), pods), GROUP)
    assert view is not None
    assert view.created == 8
    assert view.pending == 1
    assert view.allocated == 3  # r1 r2 b1
    assert view.ready_num == 4  # + s1
    assert view.valid_num == 5  # + p1
    assert view.releasing == 2
    assert view.releasing_on_node == 1
    # Running, Bound, Failed, Succeeded, plus the Releasing member still on its node.
    assert view.scheduled == 6
    assert view.occupying == 4  # r1 r2 b1 x1: terminating members still hold their node
    assert (view.running, view.succeeded, view.failed, view.completed) == (2, 1, 1, 2)
    assert view.status["team-a/x2"] == RELEASING
    assert [p.name for p in view.members] == ["b1", "f1", "p1", "r1", "r2", "s1", "x1", "x2"]


def test_membership_by_annotation_or_coscheduling_label_only_of_this_group() -> None:
    pods = [
        pod("a"),
        pod("b", label_group=True),
        pod("other", group="other"),
        pod("loose", group=None),
    ]
    view = gang_view(snapshot(podgroup(2), pods), GROUP)
    assert view is not None
    assert [p.name for p in view.members] == ["a", "b"]


def test_no_podgroup_no_view() -> None:
    assert gang_view(snapshot(None, [pod("a")]), GROUP) is None


def test_podgroup_without_pods() -> None:
    view = gang_view(snapshot(podgroup(3), []), GROUP)
    assert view is not None
    assert view.created == 0
    assert valid(view) == (False, "gang team-a/train: 0/3 members created")


# ------------------------------------------------------------------------------ JobValid


def test_min_member_four_with_three_created_is_invalid() -> None:
    view = gang_view(snapshot(podgroup(4), [pod("w0"), pod("w1"), pod("w2")]), GROUP)
    assert view is not None
    assert valid(view) == (False, "gang team-a/train: 3/4 members created")
    assert not ready(view)


def test_four_created_is_valid_even_if_none_placed() -> None:
    view = gang_view(snapshot(podgroup(4), [pod(f"w{i}") for i in range(4)]), GROUP)
    assert view is not None
    assert valid(view) == (True, "")
    assert not ready(view)
    assert members_needed(view) == 4


def test_failed_and_terminating_members_do_not_count_as_valid() -> None:
    pods = [
        pod("w0"),
        pod("w1"),
        pod("w2", phase="Running", node="n1"),
        pod("w3", phase="Failed", node="n1"),
        pod("w4", phase="Running", node="n1", deleting=True),
    ]
    view = gang_view(snapshot(podgroup(4), pods), GROUP)
    assert view is not None
    assert valid(view) == (
        False,
        "gang team-a/train: 3/4 members created (not counted: 1 Failed, 1 Releasing)",
    )


def test_min_task_member_checked_per_role_before_the_job() -> None:
    # minMember 4 = master 1 + worker 3; the master and one worker exist.
    pods = [pod("master-0", task="master"), pod("worker-0", task="worker")]
    view = gang_view(snapshot(podgroup(4, {"master": 1, "worker": 3}), pods), GROUP)
    assert view is not None
    # Volcano's CheckTaskValid fails first and decides the reason alone.
    assert valid(view) == (False, "gang team-a/train: task worker: 1/3 members created")


def test_every_short_role_is_named() -> None:
    pods = [pod("worker-0", task="worker"), pod("ps-0", task="ps")]
    view = gang_view(snapshot(podgroup(5, {"master": 1, "worker": 3, "ps": 1}), pods), GROUP)
    assert view is not None
    assert valid(view) == (
        False,
        "gang team-a/train: task master: 0/1 members created; task worker: 1/3 members created",
    )


def test_role_checks_are_skipped_when_min_member_is_below_their_sum() -> None:
    # Volcano: minAvailable (2) < Σ minTaskMember (4) => CheckTaskValid/Ready return true.
    pods = [pod(f"worker-{i}", task="worker", phase="Running", node="n1") for i in range(2)]
    view = gang_view(snapshot(podgroup(2, {"master": 1, "worker": 3}), pods), GROUP)
    assert view is not None
    assert valid(view) == (True, "")
    assert ready(view)
    assert missing_task_members(view) == {}


# ------------------------------------------------------------------------------ JobReady


def test_ready_counts_reserved_binding_bound_running_and_succeeded() -> None:
    pods = [
        pod("w0", phase="Running", node="n1"),
        pod("w1", node="n1"),
        pod("w2", phase="Succeeded", node="n1"),
        pod("w3"),
        pod("w4"),
    ]
    snap = snapshot(podgroup(5), pods)
    view = gang_view(snap, GROUP)
    assert view is not None
    assert not ready(view)
    assert members_needed(view) == 2
    reserved = gang_view(snap, GROUP, allocated={"team-a/w3"}, binding={"team-a/w4"})
    assert reserved is not None
    assert reserved.ready_num == 5
    assert ready(reserved)
    assert members_needed(reserved) == 0


def test_ready_needs_each_role_even_when_the_total_is_met() -> None:
    pods = [pod(f"worker-{i}", task="worker", phase="Running", node="n1") for i in range(4)]
    pods.append(pod("master-0", task="master"))
    view = gang_view(snapshot(podgroup(4, {"master": 1, "worker": 3}), pods), GROUP)
    assert view is not None
    assert members_needed(view) == 0
    assert missing_task_members(view) == {"master": 1}
    assert not ready(view)


def test_pending_best_effort_members_count_as_ready() -> None:
    pods = [pod("w0", phase="Running", node="n1"), pod("be", cpu=None)]
    view = gang_view(snapshot(podgroup(2), pods), GROUP)
    assert view is not None
    assert view.pending_best_effort == 1
    assert ready(view)
    # ... and are not offered for placement (Volcano leaves them to backfill).
    assert pending_members(view) == []


def test_pending_members_in_placement_order() -> None:
    pods = [
        pod("worker-0", task="worker", created="2026-01-01T00:00:01Z"),
        pod("worker-1", task="worker", created="2026-01-01T00:00:00Z"),
        pod("worker-big", task="worker", cpu="4", created="2026-01-01T00:00:05Z"),
        pod("worker-gpu", task="worker", gpu=1, created="2026-01-01T00:00:06Z"),
        pod("worker-urgent", task="worker", priority=10, created="2026-01-01T00:00:09Z"),
        pod("master-0", task="master", created="2026-01-01T00:00:09Z"),
        pod("done", task="worker", phase="Running", node="n1"),
    ]
    snap = snapshot(podgroup(4, {"master": 1}), pods)
    view = gang_view(snap, GROUP)
    assert view is not None
    assert [p.name for p in pending_members(view)] == [
        "master-0",  # its role is short of minTaskMember
        "worker-urgent",  # higher priority
        "worker-gpu",  # larger request (extended resources first)
        "worker-big",
        "worker-1",  # then oldest first
        "worker-0",
    ]
    reserved = gang_view(snap, GROUP, allocated={"team-a/master-0"})
    assert reserved is not None
    assert "master-0" not in [p.name for p in pending_members(reserved)]


def test_members_gated_by_the_user_count_for_no_quorum_until_ungated() -> None:
    from plugins.model.gang import SCHEDULING_GATED

    def gated(name: str, gate: str) -> PodRecord:
        record = pod(name)
        raw = {
            "metadata": {"name": name, "namespace": NS, "annotations": dict(record.annotations)},
            "spec": {
                "schedulingGates": [{"name": gate}],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
            "status": {"phase": "Pending"},
        }
        return PodRecord(raw)

    users = gated("a", "example.com/wait")
    ours = gated("b", "scheduling.volcano.sh/queue-allocation-gate")
    assert task_status(users) == SCHEDULING_GATED
    assert task_status(ours) == PENDING  # vulcan lifts its own gate on admission
    view = gang_view(snapshot(podgroup(2), [users, ours]), GROUP)
    assert view is not None
    assert valid(view) == (
        False,
        f"gang {GROUP}: 1/2 members created (not counted: 1 {SCHEDULING_GATED})",
    )
    assert [p.key for p in pending_members(view)] == [f"{NS}/b"]
