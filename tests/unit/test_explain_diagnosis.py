"""`vulcan explain`'s diagnosis on hand-made API objects: for every pending cause, the first
line names it (and the cause key says which), with and without the extender's debug views."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from explain import Collected, diagnose, render
from explain.focus import focus_of
from explain.texts import duration

NOW = 1_800_000_000.0


def at(seconds_from_now: float) -> str:
    return datetime.fromtimestamp(NOW + seconds_from_now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str, cpu: str = "8", gpu: int = 0) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "32Gi", "pods": "110"}
    if gpu:
        allocatable["nvidia.com/gpu"] = str(gpu)
    return {
        "metadata": {"name": name},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def queue(name: str, weight: int = 1, state: str = "Open", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"weight": weight, **spec},
        "status": {"state": state},
    }


def podgroup(
    name: str,
    min_member: int = 1,
    queue_name: str = "default",
    phase: str = "Pending",
    *,
    min_resources: dict[str, str] | None = None,
    message: str = "",
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue_name}
    if min_resources:
        spec["minResources"] = min_resources
    status: dict[str, Any] = {"phase": phase}
    if message:
        status["conditions"] = [{"type": "Unschedulable", "status": "True", "message": message}]
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta, "spec": spec, "status": status}


def pod(
    name: str,
    group: str | None = None,
    *,
    cpu: str = "1",
    gpu: int = 0,
    on: str | None = None,
    phase: str | None = None,
    deleting_in: float | None = None,
    refused: str = "",
    refused_at: float = -5,
    queue_name: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    limits = {"cpu": cpu}
    if gpu:
        limits["nvidia.com/gpu"] = str(gpu)
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    if queue_name:
        annotations["scheduling.volcano.sh/queue-name"] = queue_name
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": annotations}
    if deleting_in is not None:
        meta["deletionTimestamp"] = at(deleting_in)
    status: dict[str, Any] = {"phase": phase or ("Running" if on else "Pending")}
    if refused:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": refused,
                "lastTransitionTime": at(refused_at),
            }
        ]
    body: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": "x", "resources": {"requests": limits, "limits": limits}}
        ],
        **spec,
    }
    if on:
        body["nodeName"] = on
    return {"metadata": meta, "spec": body, "status": status}


def gang(name: str, members: int, **kw: Any) -> list[dict[str, Any]]:
    return [pod(f"{name}-{i}", name, **kw) for i in range(members)]


def found(kind: str, name: str, target: dict[str, Any], **parts: Any) -> Collected:
    parts.setdefault("nodes", [node(f"node-{i}") for i in range(4)])
    parts.setdefault("queues", [queue("default")])
    return Collected(kind, "default", name, target, now=NOW, **parts)


def explain(collected: Collected) -> tuple[str, str]:
    explanation = diagnose(collected)
    return explanation.cause, render(explanation).splitlines()[0]


# ------------------------------------------------------------------------------ queues


def test_a_closed_queue_is_named_first() -> None:
    group = podgroup("s-0", queue_name="shut", message="gang default/s-0: waiting for admission")
    cause, first = explain(
        found(
            "podgroup",
            "s-0",
            group,
            podgroups=[group],
            pods=gang("s-0", 1),
            queues=[queue("default"), queue("shut", state="Closed")],
        )
    )
    assert cause == "queue-closed"
    assert first == (
        "podgroup default/s-0 is Pending: queue shut is Closed: a queue that is not Open admits "
        "no new work"
    )


def test_a_queue_that_does_not_exist() -> None:
    group = podgroup("x", queue_name="nowhere")
    cause, first = explain(found("podgroup", "x", group, podgroups=[group], pods=gang("x", 1)))
    assert cause == "queue-missing"
    assert "its queue nowhere does not exist" in first


def test_a_queue_at_its_capability() -> None:
    running = podgroup("c-0", 4, "capped", "Running")
    waiting = podgroup("c-1", 1, "capped", min_resources={"cpu": "2"})
    pods = [pod(f"c-0-{i}", "c-0", on=f"node-{i}") for i in range(4)] + [
        pod("c-1-0", "c-1", cpu="2")
    ]
    cause, first = explain(
        found(
            "podgroup",
            "c-1",
            waiting,
            podgroups=[running, waiting],
            pods=pods,
            queues=[queue("default"), queue("capped", capability={"cpu": "4"})],
        )
    )
    assert cause == "queue-capability"
    assert first.endswith(
        "queue capped is at its capability: it holds cpu 4 of its capability cpu 4, and the "
        "gang needs cpu 2 more"
    )


def test_a_queue_at_its_deserved_share_while_another_waits() -> None:
    """qa holds 16 of 32 cpu; qb's gang (short of a member) asks for 16: each deserves 16, so
    qa's next gang would take it over its share."""
    held = podgroup("a-0", 8, "qa", "Running")
    more = podgroup("a-1", 2, "qa")
    other = podgroup("b-0", 9, "qb")
    pods = (
        [pod(f"a-0-{i}", "a-0", cpu="2", on=f"node-{i % 4}") for i in range(8)]
        + gang("a-1", 2, cpu="2")
        + gang("b-0", 8, cpu="2")
    )
    cause, first = explain(
        found(
            "podgroup",
            "a-1",
            more,
            podgroups=[held, more, other],
            pods=pods,
            queues=[queue("default"), queue("qa"), queue("qb")],
        )
    )
    assert cause == "queue-share"
    assert "queue qa is at its deserved share: it holds cpu 16 and deserves cpu 16" in first
    assert "(weight 1 of 2)" in first and "the gang needs cpu 4 more" in first
    assert "while queue qb waits for cpu 16" in first


def test_the_extenders_queue_numbers_are_used_when_it_answers() -> None:
    """The extender's last pass says qa deserves 4 cpu (e.g. counting reservations explain
    cannot see): the diagnosis takes its numbers over its own."""
    group = podgroup("a-1", 1, "qa")
    queues_view = {
        "plugin": "proportion",
        "queues": [
            {
                "name": "qa",
                "state": "Open",
                "open": True,
                "weight": 1,
                "deserved": {"cpu": "4"},
                "realCapability": {"cpu": "32"},
                "allocated": {"cpu": "4"},
                "request": {"cpu": "5"},
            },
        ],
    }
    collected = found(
        "podgroup",
        "a-1",
        group,
        podgroups=[group],
        pods=gang("a-1", 1),
        queues=[queue("default"), queue("qa")],
        extender_queues=queues_view,
        extender_gang={"admitted": False, "members": {}},
        extender_url="http://x",
    )
    explanation = diagnose(collected)
    assert explanation.cause == "queue-share"
    assert "deserves cpu 4" in explanation.finding.headline
    assert "queue shares the extender's last pass" in explanation.source


# ------------------------------------------------------------------------------ the gang


def test_a_gang_missing_members() -> None:
    group = podgroup("short", 3, message="gang default/short: 2/3 members created")
    cause, first = explain(
        found("podgroup", "short", group, podgroups=[group], pods=gang("short", 2))
    )
    assert cause == "gang-members"
    assert first.endswith(
        "the gang is missing members: 2 of the 3 pods it needs exist (minMember 3)"
    )


def test_a_gang_missing_a_task_role() -> None:
    group = podgroup("mpi", 4)
    group["spec"]["minTaskMember"] = {"master": 1, "worker": 3}
    workers = [pod(f"mpi-w-{i}", "mpi") for i in range(4)]
    for member in workers:
        member["metadata"]["annotations"]["volcano.sh/task-spec"] = "worker"
    cause, first = explain(found("podgroup", "mpi", group, podgroups=[group], pods=workers))
    assert cause == "gang-members"
    assert "task master has 0 of the 1 members it needs" in first


def test_no_node_has_room_for_a_member() -> None:
    group = podgroup("big", 2)
    nodes = [node(f"node-{i}", gpu=4) for i in range(4)]
    # node-0 has 1 GPU free, the others 2: a 4-GPU member fits an empty node, none now.
    busy = [pod("other-0", cpu="1", gpu=3, on="node-0")]
    busy += [pod(f"other-{i}", cpu="1", gpu=2, on=f"node-{i}") for i in range(1, 4)]
    cause, first = explain(
        found(
            "podgroup",
            "big",
            group,
            podgroups=[group],
            pods=[*busy, *gang("big", 2, gpu=4)],
            nodes=nodes,
        )
    )
    assert cause == "node-room"
    assert first.endswith(
        "no node has room for a member: default/big-0 needs 4 nvidia.com/gpu on one node; the "
        "largest free is 2 on node-1"
    )


def test_a_gang_too_big_for_the_free_room_together() -> None:
    group = podgroup("trio", 3)
    nodes = [node("node-0", gpu=4), node("node-1", gpu=4)]
    busy = [pod(f"other-{i}", cpu="1", gpu=1, on=f"node-{i}") for i in range(2)]
    cause, first = explain(
        found(
            "podgroup",
            "trio",
            group,
            podgroups=[group],
            pods=[*busy, *gang("trio", 3, gpu=2)],
            nodes=nodes,
        )
    )
    assert cause == "node-room"
    assert "the gang does not fit in the nodes' free room" in first
    assert "nvidia.com/gpu" in first


def test_waiting_for_evicted_victims_to_terminate_from_the_api_server_alone() -> None:
    """Every node is full; the victim on node-2 is being deleted (grace ends in 20 s): the
    admitted gang fits once it is gone."""
    nodes = [node(f"node-{i}", cpu="4") for i in range(3)]
    victims = [pod(f"big-{i}", cpu="4", on=f"node-{i}") for i in range(3)]
    victims[2]["metadata"]["deletionTimestamp"] = at(20)
    group = podgroup("small", 2, "small", "Inqueue")
    cause, first = explain(
        found(
            "podgroup",
            "small",
            group,
            podgroups=[group],
            nodes=nodes,
            pods=[*victims, *gang("small", 2, cpu="2")],
            queues=[queue("default"), queue("small")],
        )
    )
    assert cause == "victims-terminating"
    assert "waiting for 1 pod(s) evicted for it to terminate: default/big-2 on node-2" in first
    assert "(grace period ends in 20s)" in first


def test_waiting_for_victims_as_the_extender_reports_them() -> None:
    group = podgroup("small", 1, phase="Inqueue")
    victim = pod("big-0", on="node-0", deleting_in=12)
    gang_view = {
        "admitted": True,
        "members": {"created": 1, "admitted": 1, "holdingBinds": 0, "bound": 0},
        "reservations": [
            {
                "pod": "default/small-0",
                "node": "node-0",
                "waitingFor": {"node": "node-0", "pods": ["default/big-0"]},
            },
        ],
    }
    cause, first = explain(
        found(
            "podgroup",
            "small",
            group,
            podgroups=[group],
            pods=[victim, *gang("small", 1)],
            extender_gang=gang_view,
            extender_url="http://x",
        )
    )
    assert cause == "victims-terminating"
    assert "default/big-0 on node-0 (grace period ends in 12s)" in first


def test_held_binds_wait_for_the_member_that_cannot_come() -> None:
    group = podgroup("late", 3, phase="Inqueue")
    refusal = (
        "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )
    members = [*gang("late", 2), pod("late-2", "late", refused=refusal)]
    gang_view = {
        "admitted": True,
        "members": {"created": 3, "admitted": 3, "holdingBinds": 2, "bound": 0},
        "hold": {
            "pods": ["default/late-0", "default/late-1"],
            "timeoutSeconds": 60,
            "secondsLeft": 41.2,
        },
        "gangTimeoutSeconds": 60,
        "reservations": [],
    }
    cause, first = explain(
        found(
            "podgroup",
            "late",
            group,
            podgroups=[group],
            pods=members,
            extender_gang=gang_view,
            extender_url="http://x",
        )
    )
    assert cause == "binds-held"
    assert first == (
        "podgroup default/late is Inqueue: 2 of 3 members hold their binds, waiting for the rest "
        "of the gang: default/late-2 cannot be placed: 0/4 nodes are available: 4 node(s) didn't "
        "match Pod's node affinity/selector; the hold times out in 41s"
    )


def test_held_binds_from_the_podgroups_events_alone() -> None:
    """Without the extender: the GangHolding event says when the hold began and its limit;
    members refused for the gang's own (stale) reason are the held ones, "podgroup not found"
    (refused before the extender's cache had the group) included."""
    group = podgroup("late", 3, phase="Inqueue")
    stale = "0/4 nodes are available: 4 gang default/late: 2/3 members created"
    unfound = "0/4 nodes are available: 4 podgroup default/late not found"
    members = [
        pod("late-0", "late", refused=stale, refused_at=-30),
        pod("late-1", "late", refused=unfound, refused_at=-1),  # newer than late-2's
    ]
    members.append(
        pod(
            "late-2",
            "late",
            refused="0/4 nodes are available: 4 node(s) had untolerated taint {x: y}",
            refused_at=-2,
        )
    )
    holding = {
        "reason": "GangHolding",
        "regarding": {"kind": "PodGroup", "name": "late"},
        "note": "default/late-0 holds its bind on node-1: the gang's binds wait until it has "
        "quorum, at most 60s (1/3 members hold binds)",
        "eventTime": at(-10),
    }
    cause, first = explain(
        found("podgroup", "late", group, podgroups=[group], pods=members, events=[holding])
    )
    assert cause == "binds-held"
    assert (
        "default/late-2 cannot be placed: 0/4 nodes are available: 4 node(s) had untolerated"
        in first
    )
    assert first.endswith("the hold times out in 50s")


def test_a_gang_backing_off_after_a_timeout() -> None:
    group = podgroup("late", 2)
    gang_view = {"admitted": False, "backoffSecondsLeft": 7.4, "members": {}, "reservations": []}
    timed_out = {
        "reason": "GangTimedOut",
        "regarding": {"kind": "PodGroup", "name": "late"},
        "note": "gang default/late: timed out after 60s waiting for members: 1/2 hold binds",
        "eventTime": at(-3),
    }
    cause, first = explain(
        found(
            "podgroup",
            "late",
            group,
            podgroups=[group],
            pods=gang("late", 2),
            extender_gang=gang_view,
            extender_url="http://x",
            events=[timed_out],
        )
    )
    assert cause == "gang-backoff"
    assert "timed out after 60s" in first and first.endswith("it may be admitted again in 7s")


def test_a_running_gang_is_not_waiting() -> None:
    group = podgroup("ok", 2, phase="Running")
    pods = [pod(f"ok-{i}", "ok", on="node-0") for i in range(2)]
    cause, first = explain(found("podgroup", "ok", group, podgroups=[group], pods=pods))
    assert cause == "scheduled"
    assert "not waiting: 2 members are scheduled (minMember 2)" in first


def test_a_partly_placed_gang_is_named_first() -> None:
    """Issue 31: two of four members bound (the others made again after an eviction) is the
    first-line cause, before "not waiting: scheduled" and with what the rest waits for."""
    group = podgroup("qa-j2", 4, "default", phase="Unknown")
    pods = [pod(f"qa-j2-{i}", "qa-j2", cpu="8", on="node-0") for i in range(2)]
    pods += [pod(f"qa-j2-{i}", "qa-j2", cpu="8") for i in range(2, 4)]
    pods.append(pod("other", cpu="16", on="node-1"))  # the room the rest would need
    broken = {
        "reason": "GangBroken",
        "regarding": {"kind": "PodGroup", "name": "qa-j2"},
        "note": "gang default/qa-j2 is no longer whole: default/qa-j2-2 was deleted; 3/4 members "
        "remain bound: its next placement is all-or-nothing again",
        "eventTime": at(-3),
    }
    cause, first = explain(
        found(
            "podgroup",
            "qa-j2",
            group,
            podgroups=[group],
            pods=pods,
            events=[broken],
            nodes=[node("node-0", cpu="16"), node("node-1", cpu="16")],
        )
    )
    assert cause == "gang-partial"
    assert first.startswith(
        "podgroup default/qa-j2 is Unknown: partly placed: 2 of the 4 members it needs "
        "(minMember 4) are bound (default/qa-j2-0, default/qa-j2-1); gang default/qa-j2 is no "
        "longer whole"
    ), first
    assert "the other 2 wait: no node has room for a member" in first, first


def test_members_being_deleted_do_not_make_a_gang_whole() -> None:
    # Scheduled counts terminating members; a gang with one of them is still partly placed.
    group = podgroup("lost", 2, phase="Running")
    pods = [pod("lost-0", "lost", on="node-0"), pod("lost-1", "lost", on="node-1", deleting_in=30)]
    cause, first = explain(found("podgroup", "lost", group, podgroups=[group], pods=pods))
    assert cause == "gang-partial"
    assert "1 of the 2 members it needs (minMember 2) are bound (default/lost-0)" in first
    assert "the missing members do not exist yet" in first


def test_a_finished_gang_is_not_partly_placed() -> None:
    group = podgroup("done", 2, phase="Completed")
    pods = [pod("done-0", "done", on="node-0", phase="Succeeded")]
    cause, _first = explain(found("podgroup", "done", group, podgroups=[group], pods=pods))
    assert cause != "gang-partial"


# ------------------------------------------------------------------------------ jobs, flows, pods


def job(name: str, phase: str = "Pending", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}", "labels": labels},
        "spec": {"minAvailable": 2},
        "status": {"state": {"phase": phase}, "minAvailable": 2},
    }


def job_owner(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": name,
        "uid": f"u-{name}",
        "controller": True,
    }


def test_a_vcjob_is_explained_through_its_podgroup() -> None:
    vcjob = job("train")
    group = podgroup("train-u-train", 2, "shut", owner=job_owner("train"))
    collected = found(
        "job",
        "train",
        vcjob,
        jobs=[vcjob],
        podgroups=[group],
        queues=[queue("default"), queue("shut", state="Closed")],
    )
    assert focus_of(collected).podgroup_key == "default/train-u-train"
    explanation = diagnose(collected)
    assert explanation.cause == "queue-closed"
    assert [label for label, _ in explanation.chain][:3] == ["job", "podgroup", "queue"]
    assert render(explanation).startswith("vcjob default/train is Pending: queue shut is Closed")


def test_a_running_vcjob_whose_gang_is_partly_placed_is_not_called_running() -> None:
    vcjob = job("rqb-j3", phase="Running")
    group = podgroup("rqb-j3-u-rqb-j3", 2, phase="Unknown", owner=job_owner("rqb-j3"))
    pods = [pod("rqb-j3-w-0", "rqb-j3-u-rqb-j3", on="node-0"), pod("rqb-j3-w-1", "rqb-j3-u-rqb-j3")]
    cause, first = explain(
        found("job", "rqb-j3", vcjob, jobs=[vcjob], podgroups=[group], pods=pods)
    )
    assert cause == "gang-partial"
    assert first.startswith("vcjob default/rqb-j3 is Running: partly placed: 1 of the 2"), first


def test_a_vcjob_whose_podgroup_is_not_made_yet() -> None:
    vcjob = job("train")
    cause, first = explain(found("job", "train", vcjob, jobs=[vcjob]))
    assert cause == "podgroup-missing"
    assert "its PodGroup default/train-u-train does not exist" in first


def test_a_vcjob_group_without_pods_is_enqueued_first_not_short_of_members() -> None:
    """A Volcano Job's pods come after its PodGroup is enqueued: no pods is not the cause."""
    vcjob = job("train")
    group = podgroup("train-u-train", 2, min_resources={"cpu": "64"}, owner=job_owner("train"))
    cause, first = explain(found("job", "train", vcjob, jobs=[vcjob], podgroups=[group]))
    # 64 cpu on a cluster of 4 x 8: no queue could ever hold it, so that is the cause.
    assert cause == "cannot-fit"
    assert "the gang cannot fit this cluster: it needs cpu 64, the cluster has cpu 32" in first


def test_admitted_work_not_placed_yet_is_named_when_the_queue_cannot_hold_more() -> None:
    """Volcano's enqueue counts Inqueue groups' minResources before their pods run (a Volcano
    Job's group is enqueued before its job makes them)."""
    first = podgroup(
        "first", 2, phase="Inqueue", min_resources={"nvidia.com/gpu": "8"}, owner=job_owner("first")
    )
    second = podgroup("second", 2, min_resources={"nvidia.com/gpu": "8"}, owner=job_owner("second"))
    nodes = [node(f"node-{i}", gpu=2) for i in range(4)]
    cause, first_line = explain(
        found("podgroup", "second", second, podgroups=[first, second], nodes=nodes)
    )
    assert cause == "queue-capacity"
    assert first_line.endswith(
        "queue default cannot hold the gang's minResources: it needs nvidia.com/gpu 8, the "
        "queue may hold at most nvidia.com/gpu 8 (the cluster less other queues' guarantees) "
        "and holds nvidia.com/gpu 0, and admitted work not placed yet holds nvidia.com/gpu 8 "
        "(default/first)"
    )


def flow(*steps: tuple[str, list[str]], phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": "pipe", "namespace": "default"},
        "spec": {
            "flows": [
                {"name": s, "dependsOn": {"targets": d}} if d else {"name": s} for s, d in steps
            ]
        },
        "status": {"state": {"phase": phase}},
    }


def template(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {}}


def test_a_jobflow_names_the_pending_step_and_its_cause() -> None:
    jf = flow(("prep", []), ("train", ["prep"]))
    jobs = [job("pipe-prep", "Completed"), job("pipe-train")]
    group = podgroup("pipe-train-u-pipe-train", 2, owner=job_owner("pipe-train"))
    pods = [pod(f"pipe-train-{i}", "pipe-train-u-pipe-train", gpu=4) for i in range(2)]
    nodes = [node(f"node-{i}", gpu=2) for i in range(2)]
    cause, first = explain(
        found("jobflow", "pipe", jf, jobs=jobs, podgroups=[group], pods=pods, nodes=nodes)
    )
    assert cause == "cannot-fit"
    assert first.startswith(
        "jobflow default/pipe is Running: step train (vcjob default/pipe-train) is Pending: the "
        "gang cannot fit this cluster: default/pipe-train-0 asks for nvidia.com/gpu 4 on one "
        "node, the largest node node-0 has nvidia.com/gpu 2"
    )


def test_a_jobflow_step_waits_for_its_dependency() -> None:
    jf = flow(("prep", []), ("train", ["prep"]))
    cause, first = explain(
        found(
            "jobflow",
            "pipe",
            jf,
            jobs=[job("pipe-prep", "Running")],
            templates=[template("prep"), template("train")],
        )
    )
    assert cause == "flow-dependencies"
    assert (
        "step train waits for step prep to complete (vcjob default/pipe-prep is Running)" in first
    )


def test_a_jobflow_with_a_failed_step_or_a_missing_template() -> None:
    jf = flow(("prep", []), ("train", ["prep"]))
    failed, first = explain(found("jobflow", "pipe", jf, jobs=[job("pipe-prep", "Failed")]))
    assert failed == "flow-failed" and "step prep (vcjob default/pipe-prep) is Failed" in first
    missing, first = explain(
        found(
            "jobflow",
            "pipe",
            jf,
            jobs=[job("pipe-prep", "Completed")],
            templates=[template("prep")],
        )
    )
    assert missing == "flow-template" and "JobTemplate default/train not found" in first


def test_a_plain_pod_and_a_bound_pod() -> None:
    lonely = pod("solo", gpu=8)
    nodes = [node("node-0", gpu=2)]
    cause, first = explain(found("pod", "solo", lonely, pods=[lonely], nodes=nodes))
    assert cause == "node-room" and "needs 8 nvidia.com/gpu on one node" in first
    bound = pod("done", on="node-0")
    cause, first = explain(found("pod", "done", bound, pods=[bound]))
    assert cause == "not-pending" and first.endswith("bound to node node-0 (Running)")


def test_a_member_pod_is_explained_by_its_gang() -> None:
    group = podgroup("short", 3)
    members = gang("short", 2)
    cause, first = explain(found("pod", "short-0", members[0], podgroups=[group], pods=members))
    assert cause == "gang-members"
    assert first.startswith("pod default/short-0 is Pending: the gang is missing members")


def test_the_render_has_the_chain_unblock_and_source() -> None:
    group = podgroup("short", 3)
    text = render(
        diagnose(found("podgroup", "short", group, podgroups=[group], pods=gang("short", 2)))
    )
    labels = [line.split()[0] for line in text.splitlines()[1:] if not line.startswith("   ")]
    assert labels == ["podgroup", "queue", "gang", "nodes", "unblock", "source"]
    assert "the API server only" in text


def test_durations() -> None:
    assert [duration(s) for s in (0.4, 41.2, 60, 125, 3600, 3720)] == [
        "0s",
        "41s",
        "1m",
        "2m5s",
        "1h",
        "1h2m",
    ]


# ------------------------------------------------------- kube-scheduler's filters (issue 32)


def test_members_that_tolerate_no_taint_of_the_gpu_nodes() -> None:
    group = podgroup("gpu", 2)
    nodes = [node(f"gpu-{i}", gpu=4) for i in range(2)]
    for n in nodes:
        n["spec"] = {
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        }
    cause, first = explain(
        found("podgroup", "gpu", group, podgroups=[group], pods=gang("gpu", 2, gpu=1), nodes=nodes)
    )
    assert cause == "node-filters"
    assert first.endswith(
        "no node passes kube-scheduler's filters for default/gpu-0: 0/2 nodes are available: "
        "2 node(s) had untolerated taint {nvidia.com/gpu: present}."
    )
    tolerant = gang(
        "gpu",
        2,
        gpu=8,
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    cause, first = explain(
        found("podgroup", "gpu", group, podgroups=[group], pods=tolerant, nodes=nodes)
    )
    # Tolerated: the tainted nodes are the member's, and none is large enough, ever.
    assert cause == "cannot-fit"
    assert first.endswith(
        "default/gpu-0 asks for nvidia.com/gpu 8 on one node, the largest node gpu-0 has "
        "nvidia.com/gpu 4"
    )


def test_host_port_members_outnumber_the_nodes() -> None:
    group = podgroup("web", 3)
    ports = [
        {
            "name": "c",
            "image": "x",
            "resources": {"requests": {"cpu": "1"}},
            "ports": [{"containerPort": 80, "hostPort": 8080}],
        }
    ]
    nodes = [node("node-0"), node("node-1")]
    cause, first = explain(
        found(
            "podgroup",
            "web",
            group,
            podgroups=[group],
            pods=gang("web", 3, containers=ports),
            nodes=nodes,
        )
    )
    assert cause == "node-filters"
    assert "kube-scheduler's filters leave too few nodes for the whole gang" in first
    assert "2 node(s) didn't have free ports for the requested pod ports" in first


# ------------------------------------------------------------------- can never fit this cluster


def test_a_gang_bigger_than_the_whole_cluster_cannot_fit() -> None:
    """9 cpu on a cluster of 8: no wait helps; explain says so instead of advising to wait."""
    group = podgroup("huge", 3, min_resources={"cpu": "9"}, message="waiting for admission")
    nodes = [node("node-0", cpu="4"), node("node-1", cpu="4")]
    members = gang("huge", 3, cpu="3")
    collected = found("podgroup", "huge", group, podgroups=[group], pods=members, nodes=nodes)
    explanation = diagnose(collected)
    first = render(explanation).splitlines()[0]
    assert explanation.cause == "cannot-fit"
    assert first == (
        "podgroup default/huge is Pending: the gang cannot fit this cluster: it needs cpu 9, "
        "the cluster has cpu 8 in all (largest node node-0: cpu 4)"
    )
    assert not any("wait" in hint for hint in explanation.finding.unblock)
    # The same cause for one of its pods.
    pod_cause, pod_first = explain(
        found("pod", "huge-0", members[0], podgroups=[group], pods=members, nodes=nodes)
    )
    assert pod_cause == "cannot-fit"
    assert pod_first.endswith(first.split(": ", 1)[1])


def test_a_member_asking_for_a_resource_no_node_offers_cannot_fit() -> None:
    group = podgroup("scratch", 2)
    members = gang("scratch", 2)
    for member in members:
        member["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "1Gi"
    cause, first = explain(found("podgroup", "scratch", group, podgroups=[group], pods=members))
    assert cause == "cannot-fit"
    assert first.endswith(
        "the gang cannot fit this cluster: default/scratch-0 asks for ephemeral-storage 1Gi, "
        "which no node offers (largest node node-0: cpu 8, memory 32Gi)"
    )


def test_a_member_bigger_than_the_largest_node_cannot_fit() -> None:
    group = podgroup("wide", 2)
    members = gang("wide", 2, cpu="12")
    cause, first = explain(found("podgroup", "wide", group, podgroups=[group], pods=members))
    assert cause == "cannot-fit"
    assert first.endswith(
        "the gang cannot fit this cluster: default/wide-0 asks for cpu 12 on one node, the "
        "largest node node-0 has cpu 8"
    )


# ------------------------------------------------------------------- one cause per job


def _job_world(queue_name: str, members: list[dict[str, Any]], **parts: Any) -> dict[str, Any]:
    vcjob = job("qa-j0")
    group = podgroup("qa-j0-u-qa-j0", 2, queue_name, owner=job_owner("qa-j0"))
    for member in members:
        member["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "qa-j0-u-qa-j0"
        member["metadata"].setdefault("labels", {})["volcano.sh/job-name"] = "qa-j0"
    others = parts.pop("others", [])
    return {
        "vcjob": vcjob,
        "members": members,
        "parts": {
            "jobs": [vcjob],
            "podgroups": [group, *parts.pop("groups", [])],
            "pods": [*members, *others],
            **parts,
        },
    }


def _same_cause(world: dict[str, Any]) -> str:
    by_job = diagnose(found("job", "qa-j0", world["vcjob"], **world["parts"]))
    pod0 = world["members"][0]
    by_pod = diagnose(found("pod", pod0["metadata"]["name"], pod0, **world["parts"]))
    assert by_job.cause == by_pod.cause, (render(by_job), render(by_pod))
    assert by_job.finding.headline == by_pod.finding.headline
    return by_job.cause


def test_a_job_and_its_pod_name_the_same_cause() -> None:
    """Issue 34: `explain vcjob qa-j0` said kube-scheduler cannot place it while `explain pod
    qa-j0-worker-0` said the queue is at its deserved share: one job, one cause."""
    insufficient = "0/4 nodes are available: 4 Insufficient cpu."
    # The queue is at its share (qa holds 16 of 32 and deserves 16), and the pods also carry
    # kube-scheduler's refusal: the queue is the cause for both.
    held = podgroup("a-0", 8, "qa", "Running")
    busy = [pod(f"a-0-{i}", "a-0", cpu="2", on=f"node-{i % 4}") for i in range(8)]
    members = [pod(f"qa-j0-worker-{i}", cpu="2", refused=insufficient) for i in range(2)]
    waiting = podgroup("b-0", 9, "qb")
    world = _job_world(
        "qa",
        members,
        groups=[held, waiting],
        others=busy + gang("b-0", 8, cpu="2"),
        queues=[queue("default"), queue("qa"), queue("qb")],
    )
    assert _same_cause(world) == "queue-share"
    # A gang that can never fit: both say so.
    members = [pod(f"qa-j0-worker-{i}", cpu="12", refused=insufficient) for i in range(2)]
    assert _same_cause(_job_world("default", members)) == "cannot-fit"
    # A closed queue.
    members = [pod(f"qa-j0-worker-{i}") for i in range(2)]
    world = _job_world("shut", members, queues=[queue("default"), queue("shut", state="Closed")])
    assert _same_cause(world) == "queue-closed"


def test_a_job_enqueued_on_the_promise_of_eviction_names_whom_it_will_preempt() -> None:
    vcjob = job("urgent")
    group = podgroup(
        "urgent-u-urgent",
        4,
        phase="Inqueue",
        min_resources={"cpu": "16"},
        owner=job_owner("urgent"),
    )
    promise = "will preempt default/low-x (whole gang, 4 pods, priority 10)"
    cause, first = explain(
        found(
            "job",
            "urgent",
            vcjob,
            jobs=[vcjob],
            podgroups=[group],
            extender_gang={"admitted": False, "members": {}, "promise": promise},
            extender_url="http://x",
        )
    )
    assert cause == "will-evict"
    assert promise in first


# ------------------------------------------------------------------ shares without the extender


def test_without_the_extender_explain_computes_the_shares_with_the_confs_queue_plugin() -> None:
    from explain.world import build_world
    from plugins.framework.config import parse_scheduler_config
    from plugins.framework.registry import build_policy
    from plugins.model.capacity_shares import CapacityShares
    from plugins.model.queue_inputs import queue_inputs

    found = Collected(
        kind="podgroup",
        namespace="default",
        name="pg",
        target=podgroup("pg", queue_name="team"),
        nodes=[node("n1")],
        queues=[queue("team", deserved={"cpu": "2"})],
        podgroups=[podgroup("pg", queue_name="team")],
    )
    default = build_world(found)
    assert default.plugin == "proportion"
    assert default.shares_from == "computed by explain (proportion)"
    capacity = build_policy(
        parse_scheduler_config("tiers:\n- plugins:\n  - name: gang\n  - name: capacity\n")
    )
    world = build_world(found, capacity)
    assert world.plugin == "capacity" and isinstance(world.model, CapacityShares)
    assert world.shares_from == "computed by explain (capacity)"
    assert world.model.shares["team"].deserved.cpu == 2000  # capacity's spec.deserved
    # The same inputs the extender's pass computes (no reservations are known here).
    assert world.inputs == queue_inputs(world.snapshot, {})


def test_a_member_beyond_its_placed_gang_behind_the_gate_says_so() -> None:
    """A job's later member (a dependent task, an elastic one) made behind the
    queue-allocation gate: the API server's SchedulingGated condition is not kube-scheduler's
    refusal; vulcan lifts the gate when the queue has room for the member."""
    group = podgroup("job", 2, phase="Running")
    members = gang("job", 2, on="node-0")
    late = pod("job-2", "job", schedulingGates=[{"name": GATE}])
    late["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }
    ]
    everything = [*members, late]
    cause, first = explain(found("pod", "job-2", late, podgroups=[group], pods=everything))
    assert cause == "gated", first
    assert "waits behind scheduling.volcano.sh/queue-allocation-gate" in first
    assert "Scheduling is blocked" not in first


GATE = "scheduling.volcano.sh/queue-allocation-gate"
