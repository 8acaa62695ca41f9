"""A gang stranded half placed (`plugins.model.stranded`, applied by `extender.evictor`): short
of its quorum because members taken away stay terminating on a lost node past their grace
period, so their controller cannot make them again. Its survivors are evicted (once), and only
when some controller makes them again."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord
from extender import stranded as stranded_module
from extender.evictor import STRANDED, Evictor
from extender.ledger import GangLedger
from plugins.model.stranded import stranded_gang
from tests.helpers import until
from tests.unit.test_evictor_leftovers import Writer

_rv = itertools.count(1)
NOW = 1_800_000_000.0  # POSIX seconds
OWNER = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "name": "j",
    "uid": "job-uid",
    "controller": True,
}


def stamp(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def member(
    name: str,
    node: str | None = "n1",
    *,
    deleted_due: float | None = None,
    phase: str = "Running",
    owned: bool = True,
    task: str = "worker",
) -> PodRecord:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "resourceVersion": str(next(_rv)),
        "annotations": {"scheduling.k8s.io/group-name": "g", "volcano.sh/task-spec": task},
    }
    if owned:
        meta["ownerReferences"] = [OWNER]
    if deleted_due is not None:
        meta["deletionTimestamp"] = stamp(deleted_due)
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def group(min_member: int = 3, **spec: Any) -> PodGroupRecord:
    return PodGroupRecord(
        {
            "metadata": {"name": "g", "namespace": "ns", "resourceVersion": "1", "uid": "g1"},
            "spec": {"minMember": min_member, "queue": "q", **spec},
            "status": {"phase": "Running"},
        }
    )


def node(name: str, ready: bool) -> NodeRecord:
    status = "True" if ready else "Unknown"
    return NodeRecord(
        {
            "metadata": {"name": name, "resourceVersion": "1"},
            "status": {
                "allocatable": {"cpu": "8", "memory": "8Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": status}],
            },
        }
    )


NODES = {"n1": node("n1", True), "lost": node("lost", False)}


def test_deletion_due_is_read_from_the_deletion_timestamp() -> None:
    assert member("a", deleted_due=NOW).deletion_due == NOW
    assert member("b").deletion_due is None and not member("b").deleting


def test_survivors_of_a_gang_short_of_quorum_with_a_member_stuck_past_grace_are_named() -> None:
    members = [member("a"), member("b"), member("c", "lost", deleted_due=NOW - 11)]
    found = stranded_gang(group(3), members, NODES, NOW, after=10)
    assert found is not None
    assert found.survivors == ("ns/a", "ns/b") and found.stuck == ("ns/c",)
    assert "ns/c on node lost (not Ready), 11s past its grace period" in found.why
    assert "2/3 members remain bound" in found.why


def test_not_yet_past_the_grace_period_and_the_slack_is_left_alone() -> None:
    members = [member("a"), member("b"), member("c", "lost", deleted_due=NOW - 9)]
    assert stranded_gang(group(3), members, NODES, NOW, after=10) is None
    # Being deleted, its grace period not over: its kubelet may yet confirm it.
    members[2] = member("c", "lost", deleted_due=NOW + 20)
    assert stranded_gang(group(3), members, NODES, NOW, after=10) is None


def test_a_gang_still_at_quorum_is_not_stranded() -> None:
    members = [member("a"), member("b"), member("c", "lost", deleted_due=NOW - 60)]
    assert stranded_gang(group(2), members, NODES, NOW, after=10) is None


def test_a_role_short_of_its_minimum_strands_the_gang() -> None:
    members = [
        member("ps", task="ps", node="lost", deleted_due=NOW - 60),
        member("w0"),
        member("w1"),
    ]
    spec = {"minTaskMember": {"ps": 1, "worker": 2}}
    found = stranded_gang(group(3, **spec), members, NODES, NOW, after=10)
    assert found is not None and found.survivors == ("ns/w0", "ns/w1")
    # Member count made by other roles' pods, the missing role still strands it.
    members.append(member("w2"))
    found = stranded_gang(group(3, **spec), members, NODES, NOW, after=10)
    assert found is not None and found.survivors == ("ns/w0", "ns/w1", "ns/w2")


def test_bare_survivors_are_not_evicted_nobody_would_make_them_again() -> None:
    members = [member("a", owned=False), member("b"), member("c", "lost", deleted_due=NOW - 60)]
    assert stranded_gang(group(3), members, NODES, NOW, after=10) is None


def test_a_member_that_failed_by_itself_is_not_a_member_taken_away() -> None:
    members = [member("a"), member("b"), member("c", phase="Failed")]
    assert stranded_gang(group(3), members, NODES, NOW, after=10) is None


def test_nothing_left_bound_nothing_to_evict() -> None:
    members = [
        member("a", deleted_due=NOW + 5),
        member("b", None),
        member("c", "lost", deleted_due=NOW - 60),
    ]
    assert stranded_gang(group(3), members, NODES, NOW, after=10) is None


def stranded_scene(
    writer: Writer, poke: Callable[[], None] = lambda: None
) -> tuple[ClusterCache, Evictor, list[float], list[asyncio.Task[None]]]:
    """A gang of three (minMember 3) on two nodes, c's node lost: the taint eviction deleted
    c with 30 s of grace at NOW, and nobody confirms. The cache, the evictor (stranded after
    10 s, on the returned clock), the clock, and the tasks the evictor spawned."""
    cache = ClusterCache()
    for record in NODES.values():
        cache.on_node_add(record)
    cache.on_podgroup_add(group(3))
    clock = [NOW]
    tasks: list[asyncio.Task[None]] = []

    def spawn(coro: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.ensure_future(coro))

    evictor = Evictor(
        cache,
        GangLedger(cache.bump_node),
        writer,  # type: ignore[arg-type]
        spawn,
        poke,
        stranded_after=10,
    )
    evictor.stranded.clock = lambda: clock[0]
    cache.pod_listeners.append(lambda key, pod, _old: evictor.pod_changed(key, pod))
    for pod in (member("a"), member("b"), member("c", "lost")):
        cache.on_pod_add(pod)
    cache.on_pod_update(cache.pods["ns/c"], member("c", "lost", deleted_due=NOW + 30))
    return cache, evictor, clock, tasks


async def test_the_evictor_evicts_a_stranded_gangs_survivors_once() -> None:
    writer = Writer()
    cache, evictor, clock, tasks = stranded_scene(writer)
    evictor.evict_stranded()
    assert writer.evicted == [] and evictor.stranded.watched == {"ns/g"}
    clock[0] = NOW + 39
    evictor.evict_stranded()
    assert writer.evicted == []
    clock[0] = NOW + 41
    evictor.evict_stranded()
    await asyncio.gather(*tasks)
    assert sorted(writer.evicted) == ["ns/a", "ns/b"]
    assert cache.pods["ns/a"].deleting and cache.pods["ns/b"].deleting
    reasons = [reason for reason, _note in writer.events]
    assert reasons.count(STRANDED) == 3  # the gang's event and one per survivor
    assert "ns/a" in evictor.notes and "cannot be made whole" in evictor.notes["ns/a"]
    # Asked once: the next passes do not ask again.
    evictor.evict_stranded()
    await asyncio.gather(*tasks)
    assert sorted(writer.evicted) == ["ns/a", "ns/b"]
    # The survivors go, then the stuck member at last (its node came back): forgotten.
    for key in ("ns/a", "ns/b", "ns/c"):
        evictor.evict_stranded()
        assert evictor.stranded.watched == {"ns/g"}
        cache.on_pod_delete(cache.pods[key])
    evictor.evict_stranded()
    assert evictor.stranded.watched == set() and evictor.stranded.acted == {}


class BudgetWriter(Writer):
    """Evictions refused (as a PodDisruptionBudget refuses them) while `refusing`."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = True
        self.asked: list[str] = []

    async def evict(self, pod: PodRecord) -> str:
        self.asked.append(pod.key)
        return "refused" if self.refusing else await super().evict(pod)


async def test_a_refused_eviction_of_a_stranded_gang_is_asked_again_after_a_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stranded_module, "REFUSED_RETRY", 0.05)
    writer = BudgetWriter()
    pokes: list[float] = []
    cache, evictor, clock, tasks = stranded_scene(writer, lambda: pokes.append(clock[0]))
    clock[0] = NOW + 41
    evictor.evict_stranded()
    await until(lambda: len(writer.asked) == 2 and len(pokes) == 2)  # one per refusal
    assert not cache.pods["ns/a"].deleting and not cache.pods["ns/b"].deleting
    # Refused: not asked again every pass, but once the backoff is over...
    assert evictor.stranded.retry_at == {"ns/g": NOW + 41 + 0.05}
    evictor.evict_stranded()
    assert len(writer.asked) == 2
    # ... which brings a pass of its own (a quiet cluster may have none).
    await until(lambda: len(pokes) == 3)
    clock[0] = NOW + 41.05
    evictor.evict_stranded()
    await until(lambda: len(writer.asked) == 4)
    # Refused again: twice the wait.
    assert evictor.stranded.retry_at == {"ns/g": NOW + 41.05 + 0.1}
    await until(lambda: len(pokes) == 6)
    writer.refusing = False
    clock[0] = NOW + 41.15
    evictor.evict_stranded()
    await until(lambda: sorted(writer.evicted) == ["ns/a", "ns/b"])
    assert cache.pods["ns/a"].deleting and cache.pods["ns/b"].deleting
    assert evictor.stranded.retry_at == {}
    await asyncio.gather(*tasks)


async def test_off_when_the_flag_is_zero() -> None:
    cache = ClusterCache()
    for record in NODES.values():
        cache.on_node_add(record)
    cache.on_podgroup_add(group(3))
    writer = Writer()
    evictor = Evictor(
        cache,
        GangLedger(cache.bump_node),
        writer,  # type: ignore[arg-type]
        lambda coro: coro.close(),
        lambda: None,
    )
    cache.pod_listeners.append(lambda key, pod, _old: evictor.pod_changed(key, pod))
    for pod in (member("a"), member("b"), member("c", "lost", deleted_due=NOW - 3600)):
        cache.on_pod_add(pod)
    evictor.evict_stranded()
    assert writer.evicted == [] and evictor.stranded.watched == set()  # nothing kept either
