"""The memo decides as a pass without it with gangs placed within HyperNodes (a networkTopology,
the network-topology-aware plugin in the conf) and gangs of subgroups: as `test_memo_property`,
with some gangs hard or soft, some in two partitions, and the HyperNode tree changing between
passes (HyperNodes made, deleted, rewired)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.records import PodGroupRecord, PodRecord
from core.records.topology import HyperNodeRecord
from plugins.framework.config import DEFAULT_SCHEDULER_CONF, parse_scheduler_config
from plugins.framework.decisions import Decision, Enqueued, Grown
from plugins.framework.registry import build_policy
from tests.unit.test_memo_property import World, memo_and_fresh_agree

CONF = DEFAULT_SCHEDULER_CONF.rstrip() + "\n  - name: network-topology-aware\n"
POLICY = build_policy(parse_scheduler_config(CONF))
# Without reclaim and preempt a waiting gang reads no victims (whose key moves with any change):
# only the tree's own input tells the memo that a HyperNode changed.
NO_EVICTIONS = build_policy(parse_scheduler_config(CONF.replace("preempt, reclaim, ", "")))
PART = "volcano.sh/partition-id"
TOPOLOGIES: list[dict[str, Any] | None] = [
    None,
    {"mode": "hard", "highestTierAllowed": 1},
    {"mode": "hard", "highestTierAllowed": 2},
    {"mode": "soft"},
]


def hypernode(name: str, tier: int, kind: str, members: list[str]) -> HyperNodeRecord:
    selectors = [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]
    spec = {"tier": tier, "members": selectors}
    return HyperNodeRecord({"metadata": {"name": name}, "spec": spec})


class TopologyWorld(World):
    def __init__(self, data: Any, queues: int, nodes: int) -> None:
        self.topologies: dict[str, dict[str, Any]] = {}
        self.nodes = nodes
        super().__init__(data, queues, nodes)
        self.rewire()

    def add_gang(self) -> None:
        super().add_gang()
        key = max(self.cache.podgroups, key=lambda k: self.cache.group_versions.get(k, 0))
        extra: dict[str, Any] = {}
        topology = self.data.draw(st.sampled_from(TOPOLOGIES))
        if topology is not None:
            extra["networkTopology"] = topology
        if self.data.draw(st.booleans()):
            # Subgroups: its pods in two partitions, each a gang of its own.
            extra["subGroupPolicy"] = [
                {
                    "name": "p",
                    "subGroupSize": self.data.draw(st.integers(1, 2)),
                    "minSubGroups": self.data.draw(st.integers(0, 2)),
                    "matchLabelKeys": [PART],
                    "networkTopology": self.data.draw(st.sampled_from(TOPOLOGIES)),
                }
            ]
            for index, pod_key in enumerate(sorted(self.cache.pods_by_group.get(key, ()))):
                self.cache.on_pod_add(_labelled(self.cache.pods[pod_key], str(index % 2)))
        if extra:
            self.topologies[key] = extra
            self.cache.on_podgroup_add(_with(self.cache.podgroups[key], extra))

    def rewire(self) -> None:
        """Tier-1 HyperNodes of random node ranges, one tier-2 over some of them."""
        for name in list(self.cache.topology.records):
            self.cache.on_hypernode_delete(self.cache.topology.records[name])
        every = set(range(1, self.nodes))  # one node a HyperNode: a gang may fit none
        some = st.sets(st.integers(1, max(1, self.nodes - 1)))
        cuts = sorted(self.data.draw(st.one_of(st.just(every), st.just(set()), some)))
        bounds = [0, *cuts, self.nodes]
        leaves = []
        for index, (start, end) in enumerate(itertools.pairwise(bounds)):
            if start < end:
                leaves.append(f"t{index}")
                names = [f"n{i}" for i in range(start, end)]
                self.cache.on_hypernode_add(hypernode(f"t{index}", 1, "Node", names))
        if leaves and self.data.draw(st.booleans()):
            some = self.data.draw(st.sets(st.sampled_from(leaves), min_size=1))
            self.cache.on_hypernode_add(hypernode("spine", 2, "HyperNode", sorted(some)))

    def apply(self, decisions: list[Decision]) -> None:
        # An elastic member grown within its gang's HyperNode gets a slot, as admitted ones.
        for decision in decisions:
            if isinstance(decision, Grown):
                self.ledger.slots[decision.pod] = (decision.node, decision.request, decision.key)
                self.cache.bump_node(decision.node)
                self.touched.add(decision.key)
        super().apply([d for d in decisions if not isinstance(d, Grown)])
        for decision in decisions:
            topology = self.topologies.get(decision.key)
            if isinstance(decision, Enqueued) and topology is not None:
                group = self.cache.podgroups[decision.key]
                self.cache.on_podgroup_add(_with(group, topology))

    def change(self) -> None:
        """As `World.change`, or (drawn) only the tree rewired: a pass where nothing but the
        HyperNodes changed, which only the tree's own input can tell the memo."""
        if self.data.draw(st.booleans()):
            self.rewire()
            return
        super().change()
        if self.data.draw(st.booleans()):
            self.rewire()


def _labelled(pod: PodRecord, part: str) -> PodRecord:
    spec = {
        "schedulerName": "volcano",
        "priority": pod.priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{pod.requests.cpu}m"}}}],
    }
    meta = {
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
        "labels": {PART: part},
        "annotations": {"scheduling.k8s.io/group-name": pod.group.split("/")[-1]},
    }
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": "Pending"}})


def _with(group: PodGroupRecord, extra: dict[str, Any]) -> PodGroupRecord:
    raw = {
        "metadata": {
            "name": group.name,
            "namespace": group.namespace,
            "uid": group.uid,
            "creationTimestamp": group.created,
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": group.name,
                    "uid": "j",
                    "controller": True,
                }
            ]
            if group.job_owned
            else [],
        },
        "spec": {
            "queue": group.queue,
            "minMember": group.min_member,
            "minResources": group.min_resources.to_resource_list() if group.min_resources else None,
            **extra,
        },
        "status": {"phase": group.phase},
    }
    return PodGroupRecord(raw)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.data(),
    st.integers(1, 3),
    st.integers(1, 6),
    st.integers(2, 6),
    st.sampled_from([POLICY, NO_EVICTIONS]),
)
def test_the_memo_decides_as_a_pass_without_it_with_hypernodes(
    data: Any, queues: int, nodes: int, passes: int, policy: Any
) -> None:
    memo_and_fresh_agree(TopologyWorld(data, queues, nodes), policy, passes)
