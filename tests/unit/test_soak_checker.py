"""The soak's invariant checker (bench.soak_checker), driven by synthetic event sequences with
a clock of our own: it must report what it exists to report, and stay silent otherwise."""

from __future__ import annotations

from bench.soak_checker import Checker, Limits
from bench.soak_fit import deserved, pack
from bench.soak_model import Group, Job, Node, Pod, Queue, decode_pod

CPU4 = {"cpu": 4000, "memory": 2**30, "pods": 1}


def cluster(limits: Limits | None = None, nodes: int = 2, cpu: int = 16) -> Checker:
    checker = Checker(limits or Limits(partial_window=5.0, stall_after=30.0))
    for index in range(nodes):
        key = f"node-{index}"
        allocatable = {"cpu": cpu * 1000, "memory": 64 * 2**30, "pods": 110}
        checker.node(key, Node(key, allocatable=allocatable))
    checker.queue("default", Queue("default", weight=1))
    return checker


def gang(checker: Checker, name: str, members: int, minimum: int, now: float = 0.0) -> None:
    key = f"ns/{name}"
    checker.group(key, Group(key, min_member=minimum), now)
    for index in range(members):
        pod_key = f"ns/{name}-{index}"
        checker.pod(pod_key, Pod(pod_key, uid=f"{name}-{index}", group=key, requests=CPU4), now)


def bind(checker: Checker, name: str, index: int, node: str, now: float, **fields: object) -> None:
    pod_key = f"ns/{name}-{index}"
    pod = checker.pods[pod_key]
    changed = Pod(
        pod_key,
        uid=pod.uid,
        group=pod.group,
        job=pod.job,
        requests=pod.requests,
        node=node,
        phase=str(fields.get("phase", "Running")),
        deleting=bool(fields.get("deleting", False)),
    )
    checker.pod(pod_key, changed, now)


def kinds(checker: Checker) -> list[str]:
    return [v.kind for v in checker.violations]


def test_gang_bound_piecemeal_longer_than_the_window_is_reported() -> None:
    checker = cluster()
    gang(checker, "g", 4, 4)
    bind(checker, "g", 0, "node-0", 1.0)
    bind(checker, "g", 1, "node-0", 2.0)
    checker.tick(5.0)
    assert kinds(checker) == []  # 4 s partial: inside the window
    checker.tick(6.5)
    assert kinds(checker) == ["partial-gang"]
    violation = checker.violations[0]
    assert violation.subject == "ns/g" and violation.since == 1.0
    assert "minMember=4" in violation.detail and "bound piecemeal" in violation.detail
    assert "ns/g-0@node-0 bound t=1.0s" in violation.detail
    assert "ns/g-2 Pending" in violation.detail
    bind(checker, "g", 2, "node-1", 8.0)
    bind(checker, "g", 3, "node-1", 9.0)
    assert violation.until == 9.0
    assert checker.worst_partial == 8.0
    assert len(checker.violations) == 1  # one episode, one report


def test_gang_partial_shorter_than_the_window_is_not_reported() -> None:
    checker = cluster()
    gang(checker, "g", 4, 4)
    for index in range(4):
        bind(checker, "g", index, "node-0" if index < 2 else "node-1", 1.0 + index * 0.5)
    checker.tick(30.0)
    checker.finish(31.0)
    assert kinds(checker) == []
    assert checker.worst_partial == 1.5
    assert "ns/g" in checker.whole


def test_partial_episode_that_passes_the_window_between_looks_is_still_reported() -> None:
    checker = cluster()
    gang(checker, "g", 2, 2)
    bind(checker, "g", 0, "node-0", 1.0)
    bind(checker, "g", 1, "node-0", 7.0)  # no tick in between
    assert kinds(checker) == ["partial-gang"]


def test_members_finishing_or_terminating_are_not_a_partial_placement() -> None:
    checker = cluster()
    gang(checker, "g", 3, 3)
    for index in range(3):
        bind(checker, "g", index, "node-0", 1.0)
    bind(checker, "g", 0, "node-0", 2.0, phase="Succeeded")
    checker.tick(20.0)
    assert kinds(checker) == []
    assert "ns/g" not in checker.degraded


def test_bare_gang_losing_members_is_counted_but_a_jobs_gang_must_be_made_whole() -> None:
    checker = cluster(Limits(partial_window=5.0, loss_window=10.0, stall_after=1000.0))
    gang(checker, "bare", 2, 2)
    bind(checker, "bare", 0, "node-0", 1.0)
    bind(checker, "bare", 1, "node-1", 1.0)
    checker.pod("ns/bare-1", None, 2.0)  # evicted: nobody makes a bare pod again
    checker.tick(30.0)
    assert kinds(checker) == [] and checker.degraded == {"ns/bare"}

    checker.job("ns/j", Job("ns/j", phase="Running", replicas=2, min_available=2))
    checker.group("ns/jg", Group("ns/jg", min_member=2, job="ns/j"), 30.0)
    for index in range(2):
        key = f"ns/jg-{index}"
        pod = Pod(key, uid=key, group="ns/jg", job="ns/j", node="node-0", phase="Running")
        checker.pod(key, pod, 30.0)
    checker.pod("ns/jg-1", None, 31.0)
    checker.tick(38.0)
    assert kinds(checker) == []  # inside the loss window
    checker.tick(42.0)
    assert kinds(checker) == ["partial-gang"]
    assert "lost members" in checker.violations[0].detail


def _job_gang_that_lost_two() -> Checker:
    """A Volcano Job's gang of 3, bound at t=1; two members gone at t=2."""
    checker = cluster(Limits(partial_window=5.0, loss_window=100.0))
    checker.job("ns/j", Job("ns/j", phase="Running", replicas=3, min_available=3))
    checker.group("ns/g", Group("ns/g", min_member=3, job="ns/j"), 0.0)
    for index in range(3):
        key = f"ns/g-{index}"
        checker.pod(key, Pod(key, uid=key, group="ns/g", job="ns/j", requests=CPU4), 0.0)
        bind(checker, "g", index, "node-0", 1.0)
    checker.pod("ns/g-1", None, 2.0)
    checker.pod("ns/g-2", None, 2.0)
    return checker


def test_a_lost_member_bound_back_alone_while_still_short_is_piecemeal() -> None:
    checker = _job_gang_that_lost_two()
    checker.pod("ns/g-1b", Pod("ns/g-1b", uid="n1", group="ns/g", job="ns/j", requests=CPU4), 3.0)
    checker.pod("ns/g-1b", Pod("ns/g-1b", uid="n1", group="ns/g", job="ns/j", node="node-1"), 4.0)
    checker.tick(8.5)
    assert kinds(checker) == []  # piecemeal is timed from the first bind back (t=4)
    checker.tick(9.5)
    assert kinds(checker) == ["partial-gang"]


def test_replacements_bound_together_long_after_the_loss_are_not_piecemeal() -> None:
    """Real soak, seed 7: a job's gang lost two members to a node failure and got both back
    90 s later (inside the loss window) in one go: no bind window was passed."""
    checker = _job_gang_that_lost_two()
    for name in ("1b", "2b"):
        key = f"ns/g-{name}"
        checker.pod(key, Pod(key, uid=name, group="ns/g", job="ns/j", requests=CPU4), 3.0)
    for name in ("1b", "2b"):
        key = f"ns/g-{name}"
        checker.pod(key, Pod(key, uid=name, group="ns/g", job="ns/j", node="node-1"), 92.0)
    checker.tick(120.0)
    assert kinds(checker) == []


def test_a_queue_over_its_capability_is_reported() -> None:
    checker = cluster()
    checker.queue("small", Queue("small", weight=1, capability={"cpu": 6000}))
    checker.group("ns/g", Group("ns/g", min_member=1, queue="small"), 0.0)
    for index in range(2):
        key = f"ns/g-{index}"
        checker.pod(key, Pod(key, uid=key, group="ns/g", requests=CPU4, node="node-0"), 0.0)
    checker.tick(0.5)
    assert kinds(checker) == []  # inside the grace for watch skew
    checker.tick(1.6)  # the grace is counted from the first look that saw it
    assert kinds(checker) == ["queue-over-capability"]
    assert "cpu 8000 > 6000" in checker.violations[0].detail
    assert "ns/g 2 bound (minMember 1)" in checker.violations[0].detail


def test_a_queue_at_its_capability_is_fine() -> None:
    checker = cluster()
    checker.queue("small", Queue("small", weight=1, capability={"cpu": 8000}))
    checker.group("ns/g", Group("ns/g", min_member=2, queue="small"), 0.0)
    for index in range(2):
        key = f"ns/g-{index}"
        checker.pod(key, Pod(key, uid=key, group="ns/g", requests=CPU4, node="node-0"), 0.0)
    checker.tick(5.0)
    assert kinds(checker) == []


def test_a_pod_bound_to_a_full_node_is_reported_at_once() -> None:
    checker = cluster(nodes=1, cpu=8)
    for index in range(2):
        key = f"ns/p{index}"
        checker.pod(key, Pod(key, uid=key, requests=CPU4, node="node-0"), 0.0)
    assert kinds(checker) == []
    checker.pod("ns/p2", Pod("ns/p2", uid="p2", requests=CPU4, node="node-0"), 1.0)
    assert kinds(checker) == ["node-overcommitted"]
    assert "cpu 12000 > 8000" in checker.violations[0].detail
    assert "ns/p2 cpu=4" in checker.violations[0].detail


def test_finished_pods_free_their_room_and_terminating_ones_do_not() -> None:
    checker = cluster(nodes=1, cpu=8)
    checker.pod("ns/a", Pod("ns/a", uid="a", requests=CPU4, node="node-0", phase="Succeeded"), 0)
    checker.pod("ns/b", Pod("ns/b", uid="b", requests=CPU4, node="node-0", deleting=True), 0)
    checker.pod("ns/c", Pod("ns/c", uid="c", requests=CPU4, node="node-0"), 0)
    assert kinds(checker) == []
    checker.pod("ns/d", Pod("ns/d", uid="d", requests=CPU4, node="node-0"), 1.0)
    assert kinds(checker) == ["node-overcommitted"]


def test_work_that_fits_but_waits_is_a_stall_and_work_that_does_not_fit_is_not() -> None:
    checker = cluster(Limits(stall_after=30.0), nodes=2, cpu=16)
    gang(checker, "fits", 4, 4)  # 16 cpu of 32 free
    gang(checker, "huge", 9, 9)  # 36 cpu: never fits
    checker.tick(1.0)
    checker.tick(20.0)
    assert kinds(checker) == []
    checker.tick(32.0)
    assert kinds(checker) == ["stall"]
    assert checker.violations[0].subject == "ns/fits"
    assert "4 member(s) needing cpu=16" in checker.violations[0].detail


def test_a_gang_waiting_behind_its_queues_capability_is_not_a_stall() -> None:
    checker = cluster(Limits(stall_after=10.0), nodes=2, cpu=16)
    checker.queue("capped", Queue("capped", weight=1, capability={"cpu": 8000}))
    checker.group("ns/g", Group("ns/g", min_member=3, queue="capped"), 0.0)
    for index in range(3):
        key = f"ns/g-{index}"
        checker.pod(key, Pod(key, uid=key, group="ns/g", requests=CPU4), 0.0)
    checker.tick(1.0)
    checker.tick(60.0)
    assert kinds(checker) == []


def test_a_gang_beyond_its_queues_deserved_share_is_not_a_stall() -> None:
    checker = cluster(Limits(stall_after=10.0), nodes=2, cpu=16)
    checker.queue("a", Queue("a", weight=1))
    checker.queue("b", Queue("b", weight=1))
    checker.group("ns/run", Group("ns/run", min_member=3, queue="a"), 0.0)
    for index in range(3):  # queue a holds 12 of its 16 deserved; b asks for 16
        key = f"ns/run-{index}"
        checker.pod(key, Pod(key, uid=key, group="ns/run", requests=CPU4, node="node-0"), 0.0)
    checker.group("ns/more", Group("ns/more", min_member=2, queue="a"), 0.0)
    checker.group("ns/b", Group("ns/b", min_member=4, queue="b"), 0.0)
    for name, count in (("more", 2), ("b", 4)):
        for index in range(count):
            key = f"ns/{name}-{index}"
            checker.pod(key, Pod(key, uid=key, group=f"ns/{name}", requests=CPU4), 0.0)
    checker.tick(1.0)
    checker.tick(60.0)
    # `more` would take queue a to 20 cpu > its 16 deserved; b (16 cpu of 20 free) is stalled.
    assert [v.subject for v in checker.violations] == ["ns/b"]


def waiting_gang(
    checker: Checker, name: str, members: int, created: str, priority: int = 0
) -> None:
    key = f"ns/{name}"
    checker.group(key, Group(key, min_member=members, created=created), 0.0)
    for index in range(members):
        pod_key = f"{key}-{index}"
        pod = Pod(pod_key, uid=pod_key, group=key, requests=CPU4, priority=priority)
        checker.pod(pod_key, pod, 0.0)


def test_a_gang_behind_older_work_that_takes_its_room_waits_its_turn() -> None:
    checker = cluster(Limits(stall_after=10.0), nodes=2, cpu=16)
    # Each fits the 32 free cpu alone; together (24 + 16) they do not: the older goes first.
    waiting_gang(checker, "young", 4, "2026-11-26T10:00:05Z")
    waiting_gang(checker, "old", 6, "2026-11-26T10:00:01Z")
    checker.tick(1.0)
    checker.tick(12.0)
    assert [v.subject for v in checker.violations] == ["ns/old"]
    assert "after the gangs ahead of it" in checker.violations[0].detail


def test_the_line_puts_higher_priority_first_whatever_its_age() -> None:
    checker = cluster(Limits(stall_after=10.0), nodes=2, cpu=16)
    waiting_gang(checker, "old", 6, "2026-11-26T10:00:01Z")
    waiting_gang(checker, "urgent", 4, "2026-11-26T10:00:05Z", priority=100)
    checker.tick(1.0)
    checker.tick(12.0)
    assert [v.subject for v in checker.violations] == ["ns/urgent"]


def test_a_gang_whose_finished_members_met_its_minimum_comes_after_those_that_wait_for_theirs() -> (
    None
):
    checker = cluster(Limits(stall_after=10.0), nodes=2, cpu=16)
    waiting_gang(checker, "young", 4, "2026-11-26T10:00:05Z")
    # An older job's gang of minimum 1: one member finished, its second waits (its elastic part).
    checker.group("ns/done", Group("ns/done", min_member=1, created="2026-11-26T10:00:01Z"), 0.0)
    checker.pod("ns/done-0", Pod("ns/done-0", uid="d0", group="ns/done", requests=CPU4), 0.0)
    checker.pod("ns/done-1", Pod("ns/done-1", uid="d1", group="ns/done", requests=CPU4), 0.0)
    bind(checker, "done", 0, "node-0", 0.5, phase="Succeeded")
    for index in range(2):  # 16 cpu of others: 16 free, all of it the young gang's
        key = f"ns/other-{index}"
        checker.pod(key, Pod(key, uid=key, requests={"cpu": 8000}, node=f"node-{index}"), 0.0)
    checker.tick(1.0)
    checker.tick(12.0)
    assert [v.subject for v in checker.violations] == ["ns/young"]


def test_the_gang_behind_is_a_stall_once_the_room_ahead_of_it_is_taken_and_left() -> None:
    checker = cluster(Limits(stall_after=10.0), nodes=2, cpu=16)
    waiting_gang(checker, "old", 6, "2026-11-26T10:00:01Z")
    waiting_gang(checker, "young", 4, "2026-11-26T10:00:05Z")
    checker.tick(1.0)
    for index in range(6):  # the older one runs: 8 cpu left, the younger still waits its turn
        bind(checker, "old", index, f"node-{index % 2}", 2.0)
    checker.tick(2.0)
    checker.tick(30.0)
    assert kinds(checker) == []
    for index in range(6):  # it finishes: the room is free and nothing is ahead any more
        bind(checker, "old", index, f"node-{index % 2}", 31.0, phase="Succeeded")
    checker.tick(32.0)
    checker.tick(43.0)
    assert [v.subject for v in checker.violations] == ["ns/young"]


def test_a_job_whose_pods_finished_must_reach_a_final_phase() -> None:
    checker = cluster(Limits(job_final_after=10.0))
    checker.job("ns/j", Job("ns/j", phase="Running", replicas=2))
    for index in range(2):
        key = f"ns/j-{index}"
        checker.pod(key, Pod(key, uid=key, job="ns/j", node="node-0", phase="Succeeded"), 0.0)
    checker.tick(1.0)
    checker.tick(5.0)
    assert kinds(checker) == []
    checker.tick(12.0)
    assert kinds(checker) == ["job-not-final"]
    checker.job("ns/j", Job("ns/j", phase="Completed", replicas=2))
    checker.tick(13.0)
    assert checker.violations[0].until == 13.0


def test_pack_and_deserved() -> None:
    node = {"cpu": 8000, "memory": 2**34, "pods": 110}
    assert pack([CPU4, CPU4, CPU4], {"n0": node, "n1": node}) is not None
    assert pack([CPU4, CPU4, CPU4], {"n0": node, "n1": {"cpu": 2000}}) is None
    shares = deserved(
        {"cpu": 40000, "memory": 0},
        {"a": 1, "b": 3},
        {"a": {"cpu": 40000}, "b": {"cpu": 40000}},
        {"a": {}, "b": {}},
    )
    assert shares["a"]["cpu"] == 10000 and shares["b"]["cpu"] == 30000
    capped = deserved(
        {"cpu": 40000},
        {"a": 1, "b": 3},
        {"a": {"cpu": 40000}, "b": {"cpu": 40000}},
        {"a": {}, "b": {"cpu": 12000}},
    )
    assert capped["b"]["cpu"] == 12000 and capped["a"]["cpu"] == 28000


def test_decode_pod_reads_what_the_invariants_need() -> None:
    pod = decode_pod(
        {
            "metadata": {
                "name": "p",
                "namespace": "ns",
                "uid": "u",
                "annotations": {"scheduling.k8s.io/group-name": "g"},
                "labels": {"volcano.sh/job-name": "j"},
                "deletionTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {
                "nodeName": "n",
                "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
            },
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByX"}
                ],
            },
        }
    )
    assert (pod.group, pod.job, pod.node, pod.deleting) == ("ns/g", "ns/j", "n", True)
    assert pod.requests == {"cpu": 500, "memory": 2**30, "pods": 1}
    assert pod.disruption == "PreemptionByX"
    assert not pod.live_bound and pod.occupies


def test_members_evicted_into_failed_do_not_hide_a_piecemeal_rebind() -> None:
    checker = cluster()
    gang(checker, "g", 3, 3)
    evicted = Pod("ns/old", uid="old", group="ns/g", node="node-1", phase="Failed")
    evicted.deleting, evicted.disruption = True, "DeletionByTaintManager"
    checker.pod("ns/old", evicted, 0.0)  # held on a node that is down
    bind(checker, "g", 0, "node-0", 1.0)
    checker.tick(7.0)
    assert kinds(checker) == ["partial-gang"]


def test_a_job_deleted_before_its_limit_ends_its_episode_without_a_violation() -> None:
    checker = cluster(Limits(job_final_after=10.0))
    checker.job("ns/j", Job("ns/j", phase="Running", replicas=1))
    checker.pod("ns/j-0", Pod("ns/j-0", uid="u", job="ns/j", node="node-0", phase="Failed"), 0.0)
    checker.tick(1.0)
    checker.job("ns/j", None, 5.0)
    checker.tick(6.0)
    checker.finish(60.0)
    assert kinds(checker) == []


def test_a_job_waiting_for_pods_held_by_a_down_node_is_not_late() -> None:
    checker = cluster(Limits(job_final_after=10.0))
    checker.node("node-1", Node("node-1", allocatable={"cpu": 16000}, ready=False))
    checker.job("ns/j", Job("ns/j", phase="Running", replicas=2))
    done = Pod("ns/j-0", uid="a", job="ns/j", node="node-0", phase="Succeeded")
    lost = Pod("ns/j-1", uid="b", job="ns/j", node="node-1", phase="Failed", deleting=True)
    checker.pod("ns/j-0", done, 0.0)
    checker.pod("ns/j-1", lost, 0.0)
    checker.tick(1.0)
    checker.tick(30.0)
    assert kinds(checker) == []
    checker.node("node-1", Node("node-1", allocatable={"cpu": 16000}, ready=True))
    checker.tick(31.0)
    checker.tick(42.0)  # back up, and the job still has not moved: late
    assert kinds(checker) == ["job-not-final"]


def test_a_gang_violation_says_what_the_extender_thinks_of_the_gang() -> None:
    from bench.soak_report import extender_summary

    view = {
        "podgroup": "soak/g",
        "queue": "q0",
        "phase": "Inqueue",
        "admitted": False,
        "committed": False,
        "members": {"created": 3, "pending": 3},
        "reserved": {},
        "hold": None,
        "backoffSecondsLeft": 0.0,
        "reason": "gang soak/g: waiting for admission: queue q0 over its share",
    }
    queues = {
        "used": {"cpu": "40"},
        "reservedByNode": {"n1": {"cpu": "4"}},
        "queues": [{"name": "q0", "allocated": {"cpu": "42"}, "deserved": {"cpu": "43"}}],
    }
    line = extender_summary(view, queues)
    assert "admitted=False" in line and "members created 3, pending 3" in line
    assert "reason: gang soak/g: waiting for admission: queue q0 over its share" in line
    assert "queue q0: allocated {'cpu': '42'}" in line
    assert "cluster used {'cpu': '40'}, reserved {'n1': {'cpu': '4'}}" in line
    assert extender_summary({"error": "podgroup soak/g is not in the extender's cache"}, None) == (
        "no view (podgroup soak/g is not in the extender's cache)"
    )


def test_a_gang_violation_lists_its_unbound_members() -> None:
    from bench.soak_report import members_summary

    def pod(name: str, **spec: object) -> dict[str, object]:
        return {
            "metadata": {
                "name": name,
                "namespace": "soak",
                "annotations": {"vulcan.sh/gang-admitted": "2026-01-01T00:00:05.000000Z"},
            },
            "spec": spec,
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "lastTransitionTime": "2026-01-01T00:00:01Z",
                        "message": "gang soak/g: waiting",
                    }
                ]
            },
        }

    view = {
        "reservations": [
            {"pod": "soak/a", "node": "n1", "waitingFor": {"node": "n1", "pods": ["soak/v"]}}
        ]
    }
    lines = members_summary(
        [pod("a"), pod("b", schedulingGates=[{"name": "x"}]), pod("c", nodeName="n2")], view
    )
    assert lines == [
        "a: gates -; PodScheduled False/Unschedulable at 2026-01-01T00:00:01Z 'gang soak/g: "
        "waiting'; admitted 2026-01-01T00:00:05.000000Z; slot n1 waiting for ['soak/v']",
        "b: gates ['x']; PodScheduled False/Unschedulable at 2026-01-01T00:00:01Z 'gang soak/g: "
        "waiting'; admitted 2026-01-01T00:00:05.000000Z; no slot",
    ]


def _enqueued_gang_that_cannot_fit(phase: str, big_minimum: int = 20) -> Checker:
    """Queue q (capability 24 cpu); 8 of each node's 16 cpu taken by other pods; `big` (2 x 10
    cpu, minResources 20) cannot fit the free 8 + 8; `small` (2 x 4 cpu) can."""
    checker = cluster(Limits(stall_after=10.0), nodes=2, cpu=16)
    checker.queue("q", Queue("q", weight=1, capability={"cpu": 24000}))
    for index in range(2):
        key = f"ns/other-{index}"
        checker.pod(key, Pod(key, uid=key, requests={"cpu": 8000}, node=f"node-{index}"), 0.0)
    for name, size, made in (("big", 10, "10:00:01"), ("small", 4, "10:00:05")):
        key = f"ns/{name}"
        minimum = {"cpu": (big_minimum if name == "big" else 2 * size) * 1000}
        group = Group(
            key,
            min_member=2,
            queue="q",
            min_resources=minimum,
            phase=phase if name == "big" else "Pending",
            created=f"2026-11-26T{made}Z",
        )
        checker.group(key, group, 0.0)
        for index in range(2):
            pod_key = f"{key}-{index}"
            requests = {"cpu": size * 1000, "pods": 1}
            checker.pod(pod_key, Pod(pod_key, uid=pod_key, group=key, requests=requests), 0.0)
    checker.tick(1.0)
    checker.tick(30.0)
    return checker


def test_a_gang_held_back_by_its_queues_enqueued_gangs_is_not_a_stall() -> None:
    # Volcano's enqueue: 0 allocated + 20 inqueue + 8 > 24: `small` waits for `big` to run.
    assert kinds(_enqueued_gang_that_cannot_fit("Inqueue")) == []
    # `big` not enqueued holds nothing: `small` could be enqueued and placed, and waits.
    checker = _enqueued_gang_that_cannot_fit("Pending")
    assert [v.subject for v in checker.violations] == ["ns/small"]


def test_an_enqueued_gang_holds_what_its_largest_members_ask() -> None:
    """`big`'s minResources say 12 cpu, its two members ask 20: vulcan's books count 20 for it
    (its placement takes the largest members first), so `small` waits: 0 + 20 + 8 > 24."""
    assert kinds(_enqueued_gang_that_cannot_fit("Inqueue", big_minimum=12)) == []
