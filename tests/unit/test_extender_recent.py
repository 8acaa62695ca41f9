"""prioritize reuses what the filter call just before it looked up, and only while that is
exactly right: every answer equals the one a server without that memory gives, whatever
changes between the two calls (nodes added, removed, resized, pods bound, reservations)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import orjson
import pytest

from core.cache import ClusterCache
from core.records import NodeRecord, PodRecord
from core.resources import ResourceVector
from extender import fastpath, protocol
from extender.binder import Binder
from extender.ledger import GangLedger, Reservation
from extender.server import ExtenderServer
from plugins.framework.config import default_config
from plugins.framework.node_order import Framework

_rv = itertools.count(1)


def node(name: str, cpu: int, gpus: int = 0) -> NodeRecord:
    allocatable = {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return NodeRecord(
        {
            "metadata": {"name": name, "resourceVersion": str(next(_rv))},
            "status": {"allocatable": allocatable},
        }
    )


def bound(name: str, node_name: str, cpu_m: int) -> PodRecord:
    return PodRecord(
        {
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(next(_rv))},
            "spec": {
                "nodeName": node_name,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu_m}m"}}}],
            },
            "status": {"phase": "Running"},
        }
    )


def pod_doc(name: str, cpu_m: int, uid: str = "u-1", rv: str = "7") -> dict[str, Any]:
    """The pod kube-scheduler sends (its UID and version given, whatever its requests)."""
    resources = {"cpu": f"{cpu_m}m", "memory": "1Gi"}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv},
        "spec": {"containers": [{"name": "c", "resources": {"requests": resources}}]},
        "status": {"phase": "Pending"},
    }


def body(pod: dict[str, Any], names: list[Any]) -> bytes:
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


class Cluster:
    """One cache, a server under test and a reference server that never reuses anything."""

    def __init__(self, nodes: int = 12) -> None:
        self.cache = ClusterCache()
        self.ledger = GangLedger(self.cache.bump_node)
        framework = Framework(default_config())
        self.server = ExtenderServer(self.cache, framework, Binder(None), ledger=self.ledger)  # type: ignore[arg-type]
        self.reference = ExtenderServer(
            self.cache,
            framework,
            Binder(None),  # type: ignore[arg-type]
            ledger=self.ledger,
        )
        self.names = [f"n{i}" for i in range(nodes)]
        for index, name in enumerate(self.names):
            self.cache.on_node_add(node(name, 4 + index % 3 * 4))

    def hold(self, name: str) -> None:
        """Another gang's member holds a little room on the node: filter checks the fit of its
        candidates (without a reservation on one it passes them as kube-scheduler sent them)."""
        self.ledger.reserve(Reservation(f"ns/held-on-{name}", name, ResourceVector({"cpu": 1})))

    async def fresh_prioritize(self, request: bytes) -> Any:
        self.reference._recent = None
        return orjson.loads(self.reference.prioritize(request))


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many candidates each name lookup resolved."""
    counted: list[int] = []
    original = fastpath.rows_of

    def rows_of(cache: ClusterCache, names: Any) -> Any:
        counted.append(len(names))
        return original(cache, names)

    monkeypatch.setattr(fastpath, "rows_of", rows_of)
    return counted


def in_order_of(answer: list[dict[str, Any]], names: list[str]) -> bool:
    """The answer names some candidates (those above the lowest score), in candidate order."""
    hosts = [entry["Host"] for entry in answer]
    return bool(hosts) and hosts == [name for name in names if name in set(hosts)]


async def test_same_body_reuses_filter_lookup(lookups: list[int]) -> None:
    c = Cluster()
    request = body(pod_doc("p", 3000), c.names)  # 3 of 4, 8 or 12 cores: scores differ
    c.server.pass_through_filter(request)
    answer = orjson.loads(c.server.prioritize(request))
    # One lookup for both calls: filter needed none (no room is held on a candidate), and
    # prioritize kept filter's parse of the same body.
    assert lookups == [len(c.names)]
    assert answer == await c.fresh_prioritize(request)
    assert in_order_of(answer, c.names)


async def test_survivors_reuse_the_passing_rows(lookups: list[int]) -> None:
    c = Cluster()
    for index, name in enumerate(c.names[:5]):  # some nodes too full for 3 cores
        c.cache.on_pod_add(bound(f"hog{index}", name, 3_500 if index % 2 else 7_500))
    c.hold("n0")  # a full node: it fails, so prioritize's survivors are free of reservations
    pod = pod_doc("p", 3_000)
    filtered = orjson.loads(c.server.pass_through_filter(body(pod, c.names)))
    survivors = filtered["NodeNames"]
    assert filtered["FailedNodes"] and len(survivors) < len(c.names)
    request = body(pod, survivors)
    answer = orjson.loads(c.server.prioritize(request))
    assert lookups == [len(c.names)]
    assert answer == await c.fresh_prioritize(request)
    assert in_order_of(answer, survivors)


async def test_any_node_change_in_between_is_seen(lookups: list[int]) -> None:
    c = Cluster()
    request = body(pod_doc("p", 3000), c.names)
    c.server.pass_through_filter(request)
    before = orjson.loads(c.server.prioritize(request))
    c.server.pass_through_filter(request)
    # A pod bound to the best node between filter and prioritize changes its score.
    best = max(before, key=lambda entry: entry["Score"])["Host"]
    c.cache.on_pod_add(bound("late", best, 3_900))
    answer = orjson.loads(c.server.prioritize(request))
    assert answer == await c.fresh_prioritize(request)
    assert answer != before
    assert lookups[-1] == len(c.names)  # looked up again, not reused


async def test_node_replaced_in_between_is_not_answered_from_its_old_slot() -> None:
    c = Cluster()
    request = body(pod_doc("p", 1000), c.names)
    c.server.pass_through_filter(request)
    # n3 goes away and a new node takes its column slot.
    c.cache.on_node_delete(c.cache.nodes["n3"])
    c.cache.on_node_add(node("fresh", 64))
    answer = orjson.loads(c.server.prioritize(request))
    assert answer == await c.fresh_prioritize(request)
    assert "n3" not in {entry["Host"] for entry in answer}  # unknown now: not scored


async def test_another_pod_with_the_same_candidates_is_scored_for_itself() -> None:
    c = Cluster()
    c.cache.on_pod_add(bound("half", "n0", 2_000))
    c.server.pass_through_filter(body(pod_doc("small", 100), c.names))
    request = body(pod_doc("big", 3_900, uid="u-2"), c.names)
    answer = orjson.loads(c.server.prioritize(request))
    assert answer == await c.fresh_prioritize(request)


async def test_reservation_made_in_between_is_subtracted() -> None:
    c = Cluster()
    request = body(pod_doc("p", 1000), c.names)
    c.server.pass_through_filter(request)
    c.ledger.reserve(Reservation("ns/gang-0", "n1", ResourceVector({"cpu": 3_000})))
    answer = orjson.loads(c.server.prioritize(request))
    assert answer == await c.fresh_prioritize(request)


@pytest.mark.parametrize("some_fail", [False, True])
async def test_own_reservation_reordering_is_not_misread(some_fail: bool) -> None:
    """With a reservation of its own the Python path lists that node last. If the reservation
    is gone by prioritize (here without the ledger telling the cache), the fast path scores the
    reused slots: they must not be paired with the reordered names."""
    c = Cluster()
    ledger = GangLedger()  # not wired to the cache: nothing bumps when it changes
    c.server.ledger = c.reference.ledger = ledger
    if some_fail:
        for name in c.names[5:8]:
            c.cache.on_pod_add(bound(f"hog-{name}", name, 3_900))
    c.cache.on_pod_add(bound("some", "n0", 1_000))
    ledger.reserve(Reservation("ns/p", "n0", ResourceVector({"cpu": 2_000})))
    pod = pod_doc("p", 1000)
    filtered = orjson.loads(c.server.pass_through_filter(body(pod, c.names)))
    survivors = filtered["NodeNames"]
    assert survivors[-1] == "n0" and bool(filtered["FailedNodes"]) == some_fail
    ledger.release("ns/p")
    request = body(pod, survivors)
    answer = orjson.loads(c.server.prioritize(request))
    assert answer == await c.fresh_prioritize(request)


async def test_random_changes_between_filter_and_prioritize() -> None:
    rng = random.Random(3)
    c = Cluster(nodes=30)
    extra = itertools.count()
    for step in range(150):
        pod = pod_doc(f"p{step}", rng.choice((500, 1_500, 3_000)), uid=f"u{step % 4}")
        candidates = rng.sample(sorted(c.cache.nodes), 12)
        filtered = orjson.loads(c.server.pass_through_filter(body(pod, candidates)))
        roll = rng.random()
        if roll < 0.2:
            c.cache.on_pod_add(bound(f"b{step}", rng.choice(candidates), rng.randrange(100, 3000)))
        elif roll < 0.3:
            victim = rng.choice(candidates)
            c.cache.on_node_delete(c.cache.nodes[victim])
            c.cache.on_node_add(node(f"x{next(extra)}", rng.choice((4, 8, 16))))
        elif roll < 0.4:
            c.ledger.reserve(
                Reservation(f"ns/g{step % 3}", rng.choice(candidates), ResourceVector({"cpu": 500}))
            )
        elif roll < 0.5:
            c.ledger.release(f"ns/g{step % 3}")
        names = filtered["NodeNames"] if rng.random() < 0.7 else candidates
        request = body(pod, names)
        answer = orjson.loads(c.server.prioritize(request))
        assert answer == await c.fresh_prioritize(request), step


async def test_same_uid_and_version_with_other_requests_is_parsed_again() -> None:
    """The request is keyed by the resource fields themselves, not by UID + resourceVersion."""
    c = Cluster(nodes=3)
    for name in c.names:  # n0: 4 cores, n1: 8, n2: 12
        c.cache.on_pod_add(bound(f"on-{name}", name, 3_000))
    c.hold("n2")
    small = orjson.loads(c.server.pass_through_filter(body(pod_doc("p", 500), c.names)))
    large = orjson.loads(c.server.pass_through_filter(body(pod_doc("p", 5_000), c.names)))
    assert small["NodeNames"] == c.names
    assert large["NodeNames"] == ["n1", "n2"] and set(large["FailedNodes"]) == {"n0"}


async def test_names_that_are_not_strings_are_still_refused() -> None:
    c = Cluster(nodes=2)
    for verb in (c.server.filter, c.server.prioritize):
        with pytest.raises(protocol.BadRequest, match="NodeNames must be a list of strings"):
            await verb(body(pod_doc("p", 100), ["n0", 1]))
    # A name vulcan does not know passes while no room is held on a candidate (kube-scheduler
    # knows the node: vulcan's informer is behind), and fails when the fit is checked.
    request = body(pod_doc("p", 100), ["n0", "ghost"])
    assert orjson.loads(c.server.pass_through_filter(request))["NodeNames"] == ["n0", "ghost"]
    c.hold("n0")
    assert orjson.loads(c.server.pass_through_filter(request))["FailedNodes"] == {
        "ghost": "node unknown to vulcan (not in its cache yet)"
    }
