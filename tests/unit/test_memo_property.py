"""The memo decides as a pass without it would (plugins.framework.memo): over random clusters,
queues and gang backlogs, pass after pass with the cluster changing in between (gangs bound,
finished, added, deleted; queues reshaped), every pass is run with the memo and without it on
the same input, and every gang's decision must be the same."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cache import ClusterCache
from core.numa import format_cpuset
from core.records import NodeRecord, PodGroupRecord, PodRecord, QueueRecord
from core.records.numa import NumaRecord
from plugins.framework.config import DEFAULT_SCHEDULER_CONF, parse_scheduler_config
from plugins.framework.decisions import Admitted, Adopted, Decision, Enqueued, Grown
from plugins.framework.memo import Memo
from plugins.framework.pass_input import ExtenderFacts, PassInput, QueueWait, Settings
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy
from plugins.framework.run import run_pass
from tests.session_harness import Ledger

POLICY = build_policy(parse_scheduler_config(DEFAULT_SCHEDULER_CONF))
NUMA_POLICY = build_policy(
    parse_scheduler_config(DEFAULT_SCHEDULER_CONF + "  - name: numa-aware\n")
)


def node(name: str, cpu: int) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name},
            "status": {
                "allocatable": {"cpu": str(cpu), "memory": "64Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def queue(name: str, weight: int, capability: int | None) -> QueueRecord:
    spec: dict[str, Any] = {"weight": weight}
    if capability is not None:
        spec["capability"] = {"cpu": str(capability)}
    return QueueRecord({"metadata": {"name": name, "uid": f"q-{name}"}, "spec": spec})


def group(
    name: str, queue_name: str, members: int, cpu: int, phase: str, owned: bool
) -> PodGroupRecord:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    meta["creationTimestamp"] = f"2026-01-01T00:{len(name) % 60:02d}:00Z"
    if owned:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": name,
                "uid": "j",
                "controller": True,
            }
        ]
    return PodGroupRecord(
        {
            "metadata": meta,
            "spec": {
                "queue": queue_name,
                "minMember": members,
                "minResources": {"cpu": str(members * cpu)},
            },
            "status": {"phase": phase},
        }
    )


def member(
    name: str,
    group_name: str,
    cpu: int,
    priority: int,
    node_name: str | None,
    guaranteed: bool = False,
) -> PodRecord:
    resources: dict[str, Any] = {"requests": {"cpu": str(cpu)}}
    if guaranteed:  # pins whole cpus: the numa-aware plugin's
        resources = {"requests": {"cpu": str(cpu), "memory": "1Gi"}}
        resources["limits"] = dict(resources["requests"])
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "priority": priority,
        "containers": [{"name": "c", "resources": resources}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return PodRecord(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "annotations": {"scheduling.k8s.io/group-name": group_name},
            },
            "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending"},
        }
    )


class World:
    """The cluster and the extender's facts, changed as an extender and kube-scheduler would."""

    def __init__(self, data: Any, queues: int, nodes: int, numa: bool = False) -> None:
        self.data = data
        self.numa = numa
        self.cache = ClusterCache()
        self.cpus: dict[str, int] = {}
        for index in range(nodes):
            name, cpus = f"n{index}", data.draw(st.sampled_from([4, 8, 16]))
            self.cache.on_node_add(node(name, cpus))
            self.cpus[name] = cpus
            if numa and data.draw(st.booleans()):
                self.cache.on_numa_add(self.topology(name, cpus))
        self.queues = [f"q{index}" for index in range(queues)]
        for name in self.queues:
            cap = data.draw(st.one_of(st.none(), st.integers(2, 24)))
            self.cache.on_queue_add(queue(name, data.draw(st.integers(1, 4)), cap))
        self.admitted: set[str] = set()
        self.ledger = Ledger()
        self.starving: dict[str, QueueWait] = {}
        self.promised: dict[str, frozenset[str]] = {}
        self.touched: set[str] = set()
        self.names = itertools.count()
        for _ in range(data.draw(st.integers(1, 8))):
            self.add_gang()

    def topology(self, name: str, cpus: int) -> NumaRecord:
        """A Numatopology of two cells, some of whose cpus its exporter reports taken."""
        policy = self.data.draw(st.sampled_from(["single-numa-node", "restricted", "best-effort"]))
        free = self.data.draw(st.lists(st.integers(0, cpus - 1), unique=True))
        detail = {str(c): {"numa": c * 2 // cpus} for c in range(cpus)}
        return NumaRecord(
            {
                "metadata": {"name": name},
                "spec": {
                    "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": policy},
                    "numares": {"cpu": {"allocatable": format_cpuset(free), "capacity": cpus}},
                    "cpuDetail": detail,
                },
            }
        )

    def add_gang(self) -> None:
        data = self.data
        name = f"g{next(self.names)}"
        members = data.draw(st.integers(1, 3))
        cpu = data.draw(st.integers(1, 4))
        owned = data.draw(st.booleans())
        with_pods = not owned or data.draw(st.booleans())
        q = data.draw(st.sampled_from(self.queues))
        self.cache.on_podgroup_add(group(name, q, members, cpu, "Pending", owned))
        priority = data.draw(st.sampled_from([0, 10, 100]))
        if with_pods:
            for index in range(members + data.draw(st.integers(0, 1))):
                pod = member(f"{name}-{index}", name, cpu, priority, None, self.numa)
                self.cache.on_pod_add(pod)

    def given(self) -> PassInput:
        facts = ExtenderFacts(
            admitted=frozenset(self.admitted),
            ledger=self.ledger,
            starving=dict(self.starving),
            promised=dict(self.promised),
            promised_version=len(self.promised),
        )
        return PassInput(
            self.cache.live_view(),
            facts,
            Settings(queue_of=self.cache.queue_of),
            1000.0,
        )

    def apply(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            key = decision.key
            if isinstance(decision, Admitted | Adopted):
                self.admitted.add(key)
                self.touched.add(key)
                self.promised.pop(key, None)
            if isinstance(decision, Admitted):
                pods = self.cache.pods
                for pod_key, name in decision.slots.items():
                    self.ledger.slots[pod_key] = (name, pods[pod_key].requests, key)
                    self.cache.bump_node(name)  # as the gang ledger tells the cache
                if decision.evictions is not None:
                    for unit in decision.evictions.units:
                        for pod_key in unit.pods:
                            gone = self.cache.pods.get(pod_key)
                            if gone is not None:
                                self.cache.on_pod_delete(gone)
            if isinstance(decision, Enqueued):
                old = self.cache.podgroups[key]
                self.cache.on_podgroup_add(_phase(old, "Inqueue"))
                if decision.promise is not None:
                    self.promised[key] = frozenset(
                        p for unit in decision.promise.units for p in unit.pods
                    )
                    self.touched.add(key)
            assert not isinstance(decision, Grown)

    def change(self) -> None:
        """kube-scheduler binds what is reserved; some gangs end; new ones come. Where nodes
        report NUMA, sometimes only an exporter reports anew."""
        data = self.data
        for pod_key, (name, _, group_key) in list(self.ledger.slots.items()):
            pod = self.cache.pods.get(pod_key)
            del self.ledger.slots[pod_key]
            self.cache.bump_node(name)
            self.touched.add(group_key)
            if pod is not None and data.draw(st.booleans()):
                self.cache.on_pod_add(_bound(pod, name))
        if self.numa and data.draw(st.booleans()):
            name = data.draw(st.sampled_from(sorted(self.cpus)))
            record = self.topology(name, self.cpus[name])
            old = self.cache.numa.get(name)
            if old is None:
                self.cache.on_numa_add(record)
            else:
                self.cache.on_numa_update(old, record)
            return
        for key in list(self.cache.podgroups):
            if data.draw(st.integers(0, 5)) == 0:
                for pod_key in list(self.cache.pods_by_group.get(key, ())):
                    self.cache.on_pod_delete(self.cache.pods[pod_key])
                self.cache.on_podgroup_delete(self.cache.podgroups[key])
                self.admitted.discard(key)
                self.promised.pop(key, None)
                self.touched.add(key)
        for _ in range(data.draw(st.integers(0, 2))):
            self.add_gang()


def _phase(old: PodGroupRecord, phase: str) -> PodGroupRecord:
    raw = {
        "metadata": {
            "name": old.name,
            "namespace": old.namespace,
            "uid": old.uid,
            "creationTimestamp": old.created,
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": old.name,
                    "uid": "j",
                    "controller": True,
                }
            ]
            if old.job_owned
            else [],
        },
        "spec": {
            "queue": old.queue,
            "minMember": old.min_member,
            "minResources": old.min_resources.to_resource_list() if old.min_resources else None,
        },
        "status": {"phase": phase},
    }
    return PodGroupRecord(raw)


def _bound(pod: PodRecord, name: str) -> PodRecord:
    cpu = pod.requests.cpu // 1000
    return member(pod.name, pod.group or "", cpu, pod.priority, name, pod.numa is not None)


def _table(decisions: list[Decision]) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {(d.key, "gang"): d.summary() for d in decisions}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data(), st.integers(1, 4), st.integers(1, 4), st.integers(2, 6))
def test_the_memo_decides_as_a_pass_without_it(
    data: Any, queues: int, nodes: int, passes: int
) -> None:
    memo_and_fresh_agree(World(data, queues, nodes), POLICY, passes)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data(), st.integers(1, 3), st.integers(1, 4), st.integers(2, 5))
def test_the_memo_decides_as_a_pass_without_it_where_nodes_report_numa(
    data: Any, queues: int, nodes: int, passes: int
) -> None:
    """Guaranteed members, nodes whose Numatopology (policy, free cpus) changes between
    passes, and the numa-aware plugin in the conf."""
    memo_and_fresh_agree(World(data, queues, nodes, numa=True), NUMA_POLICY, passes)


def memo_and_fresh_agree(world: World, policy: Policy, passes: int) -> None:
    memo = Memo()
    for _ in range(passes):
        given_ = world.given()
        without = run_pass(given_, policy)
        memo.changed(world.cache.take_dirty_groups() | world.touched)
        world.touched = set()
        with_memo = run_pass(given_, policy, memo)
        table = memo.table()
        table.update(_table(with_memo.decisions))
        fresh = _table(without.decisions)
        differing = {k: (table.get(k), fresh.get(k)) for k in table.keys() | fresh.keys()}
        assert table == fresh, {k: v for k, v in differing.items() if v[0] != v[1]}
        # The queues' starvation as the session leaves it (backfill and the next pass read it).
        assert with_memo.starving == without.starving
        world.starving = dict(without.starving)
        world.apply(without.decisions)
        world.change()


def test_with_nothing_changed_the_memo_decides_nothing_again() -> None:
    """Three queues of capability 2, each full of running work, and a backlog they refuse: the
    first pass decides every gang, the next ones none (every decision is kept); a gang added to
    one queue is the only one decided then, and the others of its queue are kept."""
    cache = ClusterCache()
    cache.on_node_add(node("n0", 64))
    for index in range(3):
        cache.on_queue_add(queue(f"q{index}", 1, 2))
    for index in range(30):
        name, q = f"g{index}", f"q{index % 3}"
        running = index < 6  # two running gangs of 1 cpu per queue
        cache.on_podgroup_add(group(name, q, 1, 1, "Running" if running else "Pending", False))
        cache.on_pod_add(member(f"{name}-0", name, 1, 0, "n0" if running else None))
    memo = Memo()
    running = frozenset(f"ns/g{index}" for index in range(6))  # admitted before

    def decided() -> list[str]:
        memo.changed(cache.take_dirty_groups())
        given_ = PassInput(
            cache.live_view(),
            ExtenderFacts(admitted=running, ledger=Ledger()),
            Settings(queue_of=cache.queue_of),
            0.0,
        )
        return [d.key for d in run_pass(given_, POLICY, memo).decisions]

    assert len(decided()) == 30
    assert decided() == []
    assert decided() == []
    cache.on_podgroup_add(group("late", "q1", 1, 1, "Pending", False))
    cache.on_pod_add(member("late-0", "late", 1, 0, None))
    assert decided() == ["ns/late"]
    assert decided() == []
