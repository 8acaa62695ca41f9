"""A committed gang returns to all-or-nothing when it stops being whole (issue 31 item 1), and the
bind barrier's quorum follows Volcano's task-minimum rule (item 2).

The bind barrier with `extender.gang_quorum.QuorumWatch` listening to a real `ClusterCache`,
fed pod records as its informers would: one test per path that takes members away (evicted
whole, node failure, a member deleted by hand, the job controller restarting a task), and the
cases that must not break a gang (binds in flight the API does not show yet, members beyond
quorum, a Succeeded member cleaned up). No sleeps: the tests await the barrier's own events.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord
from extender.barrier import BindBarrier
from extender.gang_hold import GangRequirement
from extender.gang_quorum import QuorumWatch
from extender.protocol import BindingArgs
from plugins.model import gang as gangs
from tests.unit.test_gang_barrier import Events, FakeCommit, Signal, outcome

_rv = itertools.count(1)
NS = "ns"
GROUP = "ns/train"


def node(name: str, *, ready: bool = True) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name, "resourceVersion": str(next(_rv))},
            "status": {
                "allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
    )


def member(
    name: str,
    *,
    uid: str | None = None,
    node_name: str | None = None,
    task: str = "worker",
    phase: str = "Pending",
    deleting: bool = False,
) -> PodRecord:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": uid or f"uid-{name}",
        "resourceVersion": str(next(_rv)),
        "annotations": {"scheduling.k8s.io/group-name": "train", "volcano.sh/task-spec": task},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T03:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def podgroup(min_member: int, min_task_member: dict[str, int] | None = None) -> PodGroupRecord:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "qa"}
    if min_task_member:
        spec["minTaskMember"] = min_task_member
    return PodGroupRecord(
        {
            "metadata": {
                "name": "train",
                "namespace": NS,
                "uid": "pg-uid",
                "resourceVersion": str(next(_rv)),
            },
            "spec": spec,
            "status": {"phase": "Running"},
        }
    )


class Rig:
    """A cache, the barrier and the watch wired as the extender wires them. The fake commit
    does not touch the cache: `seen_bound` plays the watch event of a Binding."""

    def __init__(self, min_member: int, min_task_member: dict[str, int] | None = None) -> None:
        self.signal = Signal()
        self.events = Events(self.signal)
        self.commit = FakeCommit(self.signal)
        self.barrier = BindBarrier(self.commit, on_event=self.events)
        self.cache = ClusterCache()
        self.evicted: dict[str, str] = {}
        self.watch = QuorumWatch(self.cache, self.barrier, self.evicted.get)
        self.cache.pod_listeners.append(self.watch.pod_changed)
        for name in ("n0", "n1"):
            self.cache.on_node_add(node(name))
        self.group = podgroup(min_member, min_task_member)
        self.cache.on_podgroup_add(self.group)

    def add(self, pod: PodRecord) -> PodRecord:
        self.cache.on_pod_add(pod)
        return pod

    def requirement(self) -> GangRequirement:
        """What GangVerbs.bind asks for: the group's minimums and its live bound members."""
        bound = [
            p
            for k in self.cache.pods_by_group.get(GROUP, ())
            if gangs.counts_for_quorum(p := self.cache.pods[k])
        ]
        per_task: dict[str, int] = {}
        for pod in bound:
            per_task[pod.task or ""] = per_task.get(pod.task or "", 0) + 1
        return GangRequirement(
            GROUP,
            self.group.min_member,
            self.group.min_task_member,
            already_bound=len(bound),
            already_bound_per_task=per_task,
        )

    def bind(self, pod: PodRecord, node_name: str) -> asyncio.Task[None]:
        args = BindingArgs(pod.name, NS, pod.uid, node_name)
        return asyncio.create_task(self.barrier.hold(self.requirement(), args, pod.task))

    def seen_bound(self, pod: PodRecord, node_name: str) -> PodRecord:
        running = member(pod.name, uid=pod.uid, node_name=node_name, task=pod.task or "")
        return self.add(running)

    async def run_whole(self, pods: list[PodRecord]) -> list[PodRecord]:
        """Bind `pods` through the barrier (they reach quorum together) and let the cache see
        them bound; returns their bound records."""
        tasks = [self.bind(pod, f"n{i % 2}") for i, pod in enumerate(pods)]
        assert await asyncio.gather(*tasks) == ["bound"] * len(pods)
        assert self.barrier.committed(GROUP)
        return [self.seen_bound(pod, f"n{i % 2}") for i, pod in enumerate(pods)]

    def broken(self) -> list[str]:
        return [m for k, r, m in self.events.seen if k == GROUP and r == "Broken"]


def workers(count: int, start: int = 0, task: str = "worker") -> list[PodRecord]:
    return [member(f"train-{task}-{i}", task=task) for i in range(start, start + count)]


# ------------------------------------------------------------------------------ paths


async def test_a_gang_evicted_whole_holds_its_new_pods_until_all_can_bind() -> None:
    rig = Rig(4)
    bound = await rig.run_whole([rig.add(p) for p in workers(4)])
    assert len(rig.commit.calls) == 4
    # Reclaim evicts the whole gang: each victim first gets its deletionTimestamp.
    for pod in bound:
        rig.evicted[pod.key] = "reclaimed (whole) by queue default for gang ns/rq"
    for pod in bound:
        rig.add(member(pod.name, uid=pod.uid, node_name=pod.node, deleting=True))
    assert not rig.barrier.committed(GROUP)
    [message] = rig.broken()  # once, when the first member went
    assert message == (
        "gang ns/train is no longer whole: ns/train-worker-0 is being deleted (evicted: "
        "reclaimed (whole) by queue default for gang ns/rq); 3/4 members remain bound: its "
        "next placement is all-or-nothing again"
    )
    for pod in bound:
        rig.cache.on_pod_delete(rig.cache.pods[pod.key])
    # The job controller makes the pods again under the same names (new UIDs); the room for
    # two of them shows up: they hold their binds instead of binding one at a time.
    again = [rig.add(member(p.name, uid=f"new-{p.name}")) for p in bound]
    first_two = [rig.bind(pod, "n0") for pod in again[:2]]
    await rig.signal.until(lambda: rig.barrier.held(GROUP) == 2)
    assert len(rig.commit.calls) == 4  # nothing new bound
    rest = [rig.bind(pod, "n1") for pod in again[2:]]
    assert await asyncio.gather(*first_two, *rest) == ["bound"] * 4
    assert len(rig.commit.calls) == 8
    assert rig.events.reasons(GROUP).count("Committed") == 2


async def test_a_node_failure_that_evicts_members_uncommits_the_gang() -> None:
    rig = Rig(4)
    bound = await rig.run_whole([rig.add(p) for p in workers(4)])
    rig.cache.on_node_update(rig.cache.nodes["n0"], node("n0", ready=False))
    # The taint eviction controller evicts the pods of the NotReady node.
    on_n0 = [p for p in bound if p.node == "n0"]
    rig.add(member(on_n0[0].name, uid=on_n0[0].uid, node_name="n0", deleting=True))
    [message] = rig.broken()
    assert "is being deleted (its node n0 is not Ready); 3/4 members remain bound" in message
    assert not rig.barrier.committed(GROUP)


async def test_a_member_deleted_by_hand_is_replaced_through_a_new_quorum() -> None:
    rig = Rig(4)
    bound = await rig.run_whole([rig.add(p) for p in workers(4)])
    rig.cache.on_pod_delete(rig.cache.pods[bound[3].key])
    [message] = rig.broken()
    assert "ns/train-worker-3 was deleted; 3/4 members remain bound" in message
    # Its replacement holds its bind and, with the three still bound, makes the quorum.
    replacement = rig.add(member(bound[3].name, uid="replacement"))
    await rig.bind(replacement, "n1")
    reasons = rig.events.reasons(GROUP)
    assert reasons[-4:] == ["Broken", "Holding", "Held", "Committed"], reasons
    assert rig.barrier.committed(GROUP)


async def test_a_failed_member_counts_as_lost() -> None:
    rig = Rig(2)
    bound = await rig.run_whole([rig.add(p) for p in workers(2)])
    rig.add(member(bound[0].name, uid=bound[0].uid, node_name="n0", phase="Failed"))
    assert "ns/train-worker-0 failed; 1/2 members remain bound" in rig.broken()[0]


async def test_the_job_controller_restarting_a_task_breaks_the_task_minimum() -> None:
    # minMember 4 = master 1 + worker 3: the task minimums are checked (Volcano's rule).
    rig = Rig(4, {"master": 1, "worker": 3})
    pods = [rig.add(member("train-master-0", task="master"))] + [rig.add(p) for p in workers(4)]
    bound = await rig.run_whole(pods)
    # RestartTask of the master: its pod is deleted and made again (the PodGroup stays).
    # Four workers still make minMember, but not the master's minimum.
    rig.cache.on_pod_delete(rig.cache.pods[bound[0].key])
    [message] = rig.broken()
    assert message.endswith(
        "4/4 members remain bound (task master 0/1): its next placement is all-or-nothing again"
    )
    master = rig.add(member("train-master-0", uid="master-2", task="master"))
    await rig.bind(master, "n0")
    assert rig.events.reasons(GROUP)[-1] == "Committed"


# ------------------------------------------------------------------------------ not a break


async def test_binds_in_flight_keep_the_gang_whole_until_the_cache_sees_them() -> None:
    rig = Rig(2)
    first = [rig.seen_bound(rig.add(p), "n0") for p in workers(2)]
    rig.barrier.adopt(GROUP)  # bound before a restart
    # Two more members bind at once (beyond quorum); the API has not shown them bound yet
    # when the first two go away: the gang still has two, it stays committed.
    late = [rig.add(p) for p in workers(2, start=2)]
    await asyncio.gather(*(rig.bind(pod, "n1") for pod in late))
    for pod in first:
        rig.cache.on_pod_delete(rig.cache.pods[pod.key])
    assert rig.broken() == []
    assert rig.barrier.committed(GROUP)
    # Once the cache shows them bound they count from there (and are no longer "placing").
    for pod in late:
        rig.seen_bound(pod, "n1")
    rig.cache.on_pod_delete(rig.cache.pods[late[0].key])
    assert "1/2 members remain bound" in rig.broken()[0]
    assert rig.barrier.placing(GROUP) == {}


async def test_members_beyond_quorum_of_a_gang_that_stays_whole_bind_singly() -> None:
    rig = Rig(2)
    bound = await rig.run_whole([rig.add(p) for p in workers(3)])
    rig.cache.on_pod_delete(rig.cache.pods[bound[2].key])
    assert rig.broken() == [] and rig.barrier.committed(GROUP)
    extra = rig.add(member("train-worker-9"))
    await rig.bind(extra, "n1")  # elastic: at once, no hold
    assert rig.events.reasons(GROUP).count("Holding") == 1


async def test_a_succeeded_member_cleaned_up_is_not_a_loss() -> None:
    rig = Rig(2)
    bound = await rig.run_whole([rig.add(p) for p in workers(2)])
    done = rig.add(member(bound[0].name, uid=bound[0].uid, node_name="n0", phase="Succeeded"))
    rig.cache.on_pod_delete(done)
    assert rig.broken() == []


async def test_a_chained_task_waits_whole_again_once_its_finished_task_is_gone() -> None:
    # minAvailable 2 = the first task's replicas; the second task depends on it. While the two
    # Succeeded members exist they make the quorum (Volcano's ReadyTaskNum) and the second
    # task's members bind one at a time. A failed node's taint eviction deletes the finished
    # pods: the one member still waiting must not bind alone.
    rig = Rig(2)
    bound = await rig.run_whole([rig.add(p) for p in workers(2, task="t0")])
    finished = [
        rig.add(member(p.name, uid=p.uid, node_name=p.node, task="t0", phase="Succeeded"))
        for p in bound
    ]
    waiting = rig.add(workers(1, task="t1")[0])
    rig.cache.on_pod_delete(finished[0])
    [message] = rig.broken()
    assert message == (
        "gang ns/train is no longer whole: finished member ns/train-t0-0 was deleted; 1/2 "
        "members remain bound: its next placement is all-or-nothing again"
    )
    rig.cache.on_pod_delete(finished[1])
    calls = len(rig.commit.calls)
    held = rig.bind(waiting, "n1")
    await rig.signal.until(lambda: rig.barrier.held(GROUP) == 1)
    assert len(rig.commit.calls) == calls  # held, not bound alone
    again = rig.add(member("train-t0-0", uid="t0-0-again", task="t0"))
    assert await asyncio.gather(held, rig.bind(again, "n0")) == ["bound", "bound"]


async def test_a_member_made_again_after_its_finished_one_left_unnoticed_waits_whole() -> None:
    # The finished members go while nothing waits (no event: it could be the job's cleanup);
    # the job controller then makes one again: its arrival finds the gang short.
    rig = Rig(2)
    bound = await rig.run_whole([rig.add(p) for p in workers(2, task="t0")])
    for p in bound:
        rig.cache.on_pod_delete(
            rig.add(member(p.name, uid=p.uid, node_name=p.node, task="t0", phase="Succeeded"))
        )
    assert rig.broken() == [] and rig.barrier.committed(GROUP)
    again = rig.add(member("train-t0-0", uid="t0-0-again", task="t0"))
    [message] = rig.broken()
    assert "new member ns/train-t0-0 arrived; 0/2 members remain bound" in message
    calls = len(rig.commit.calls)
    held = rig.bind(again, "n0")
    await rig.signal.until(lambda: rig.barrier.held(GROUP) == 1)
    assert len(rig.commit.calls) == calls
    held.cancel()


async def test_a_member_that_never_bound_going_away_changes_nothing() -> None:
    rig = Rig(2)
    await rig.run_whole([rig.add(p) for p in workers(2)])
    spare = rig.add(member("train-worker-5"))
    rig.cache.on_pod_delete(spare)
    assert rig.broken() == [] and rig.barrier.committed(GROUP)


async def test_uncommit_of_a_group_not_committed_is_a_no_op() -> None:
    rig = Rig(2)
    assert rig.barrier.uncommit(GROUP, "why") is False
    assert rig.broken() == []


# ------------------------------------------------------------------------------ item 2


async def test_task_minimums_above_min_member_are_not_waited_for() -> None:
    # Volcano's mpi example: minAvailable 3, a launcher (1) that depends on 10 workers. The
    # launcher's pod is made only once the workers run: three workers make the quorum.
    rig = Rig(3, {"launcher": 1, "worker": 10})
    pods = [rig.add(p) for p in workers(10)]
    held = [rig.bind(pod, "n0") for pod in pods[:2]]
    await rig.signal.until(lambda: rig.barrier.held(GROUP) == 2)
    assert rig.commit.calls == []
    assert await asyncio.gather(*held, rig.bind(pods[2], "n1")) == ["bound"] * 3
    assert rig.barrier.committed(GROUP)


async def test_the_hold_message_says_min_member_is_reached_and_which_task_is_short() -> None:
    signal = Signal()
    events = Events(signal)
    barrier = BindBarrier(FakeCommit(signal), on_event=events, default_timeout=0.01)
    need = GangRequirement("ns/pg", 4, {"ps": 1, "worker": 3})
    tasks = [
        asyncio.create_task(barrier.hold(need, BindingArgs(f"w{i}", "ns", f"u{i}", "n"), "worker"))
        for i in range(5)
    ]
    errors = [await outcome(t) for t in tasks]
    assert str(errors[0]) == (
        "gang ns/pg: timed out after 0.01s waiting for members: 5 members hold binds, minMember "
        "4 reached; still short: task ps 0/1"
    )


# ------------------------------------------------------------------------------ the rule


def test_task_minimums_are_checked_only_when_min_member_covers_their_sum() -> None:
    assert gangs.checks_task_minimums(4, {"ps": 1, "worker": 3})
    assert gangs.checks_task_minimums(5, {"ps": 1, "worker": 3})
    assert not gangs.checks_task_minimums(3, {"launcher": 1, "worker": 10})
    assert not gangs.checks_task_minimums(1, {"a": 1, "b": 5, "c": 5})
    assert gangs.checks_task_minimums(0, {})


def test_quorum_shortfall() -> None:
    assert gangs.quorum_shortfall(4, {"ps": 1, "worker": 3}, 5, {"worker": 5}) == (
        0,
        {"ps": (0, 1)},
    )
    assert gangs.quorum_shortfall(4, {"ps": 1, "worker": 3}, 2, {"ps": 1, "worker": 1}) == (
        2,
        {"worker": (1, 3)},
    )
    assert gangs.quorum_shortfall(3, {"launcher": 1, "worker": 10}, 3, {"worker": 3}) == (0, {})
    assert gangs.quorum_shortfall(2, {}, 1, {}) == (1, {})
