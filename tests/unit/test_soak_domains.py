"""The soak's topology invariants (bench.soak_domains, issue 50): a hard-topology gang whose
live bound members no HyperNode of its tier holds is a `domain-split` at once, one kept inside
a domain is not; a subgroup bound partly past the window is a `partial-subgroup`; the stall
check counts room inside one HyperNode only; and the soak's tree and workload hold them."""

from __future__ import annotations

from typing import Any

from bench.soak_checker import Checker, Limits
from bench.soak_domains import place
from bench.soak_model import Group, Node, Pod, Queue, decode_group, decode_hypernode
from bench.soak_topology import SUBGROUP_LABEL, hypernodes
from bench.soak_workload import Shape, schedule

CPU4 = {"cpu": 4000, "memory": 2**30, "pods": 1}
NODES = [f"node-{i}" for i in range(4)]
HARD_1 = {"mode": "hard", "highestTierAllowed": 1}
HARD_2 = {"mode": "hard", "highestTierAllowed": 2}
SUBGROUPS = [
    {
        "name": "part",
        "subGroupSize": 2,
        "minSubGroups": 2,
        "matchLabelKeys": [SUBGROUP_LABEL],
        "networkTopology": HARD_1,
    }
]


def cluster(cpu: int = 32) -> Checker:
    """4 nodes under the soak's tree: leaves soak-leaf-0..3 (a node each), ToRs soak-tor-0
    (nodes 0, 1) and soak-tor-1 (nodes 2, 3)."""
    checker = Checker(Limits(partial_window=5.0, stall_after=30.0))
    for key in NODES:
        allocatable = {"cpu": cpu * 1000, "memory": 64 * 2**30, "pods": 110}
        checker.node(key, Node(key, allocatable=allocatable))
    for obj in hypernodes(NODES):
        record = decode_hypernode(obj)
        checker.hypernode(record.key, record)
    checker.queue("default", Queue("default", weight=1))
    return checker


def gang(
    checker: Checker,
    name: str,
    members: int,
    topology: dict[str, Any] | None = None,
    subgroups: list[dict[str, Any]] | None = None,
) -> None:
    key = f"ns/{name}"
    group = Group(key, min_member=members, topology=topology, subgroups=subgroups or [])
    checker.group(key, group, 0.0)
    for index in range(members):
        pod_key = f"ns/{name}-{index}"
        labels = {SUBGROUP_LABEL: str(index // 2)} if subgroups else {}
        pod = Pod(pod_key, uid=pod_key, group=key, requests=CPU4, labels=labels)
        checker.pod(pod_key, pod, 0.0)


def bind(checker: Checker, name: str, index: int, node: str, now: float) -> None:
    pod = checker.pods[f"ns/{name}-{index}"]
    bound = Pod(
        pod.key, uid=pod.uid, group=pod.group, requests=pod.requests, labels=pod.labels, node=node
    )
    bound.phase = "Running"
    checker.pod(pod.key, bound, now)


def kinds(checker: Checker) -> list[str]:
    return [v.kind for v in checker.violations]


def test_the_tree_is_a_leaf_per_node_under_tors_of_two() -> None:
    tree = cluster().tree
    assert {d.name: (d.tier, sorted(d.nodes)) for d in tree.domains.values()} == {
        "soak-leaf-0": (1, ["node-0"]),
        "soak-leaf-1": (1, ["node-1"]),
        "soak-leaf-2": (1, ["node-2"]),
        "soak-leaf-3": (1, ["node-3"]),
        "soak-tor-0": (2, ["node-0", "node-1"]),
        "soak-tor-1": (2, ["node-2", "node-3"]),
    }
    assert tree.top_tier == 3


def test_a_hard_gang_bound_across_its_domains_is_a_split_at_once() -> None:
    checker = cluster()
    gang(checker, "g", 3, HARD_2)
    bind(checker, "g", 0, "node-0", 1.0)
    bind(checker, "g", 1, "node-1", 1.1)  # same ToR: fine
    assert kinds(checker) == []
    bind(checker, "g", 2, "node-2", 1.2)  # the other ToR
    assert kinds(checker) == ["domain-split"]
    violation = checker.violations[0]
    assert violation.subject == "ns/g" and violation.since == 1.2
    assert "no HyperNode of tier <= 2 holds them all" in violation.detail
    assert "node-2 (soak-leaf-2, tier 1)" in violation.detail
    checker.tick(3.0)
    checker.finish(4.0)
    assert kinds(checker) == ["domain-split"]  # one episode, one report
    assert checker.worst_partial == 4.0 - 1.2  # a split gang is partly placed


def test_a_hard_gang_inside_one_domain_is_no_violation() -> None:
    checker = cluster()
    gang(checker, "one", 3, HARD_1)
    gang(checker, "two", 4, HARD_2)
    for index in range(3):
        bind(checker, "one", index, "node-3", 1.0)
    for index in range(4):
        bind(checker, "two", index, f"node-{index % 2}", 1.0)
    checker.tick(10.0)
    checker.finish(11.0)
    assert kinds(checker) == []
    assert checker.whole_in_domain == {"ns/one", "ns/two"}  # counted in the report


def test_a_soft_gang_or_one_of_no_topology_may_span_any_nodes() -> None:
    checker = cluster()
    gang(checker, "soft", 4, {"mode": "soft"})
    gang(checker, "plain", 4)
    gang(checker, "top", 4, {"mode": "hard", "highestTierAllowed": 3})  # the cluster's tier
    for name in ("soft", "plain", "top"):
        for index in range(4):
            bind(checker, name, index, NODES[index], 1.0)
    checker.finish(2.0)
    assert kinds(checker) == []


def test_a_subgroup_bound_partly_past_the_window_is_partial() -> None:
    checker = cluster()
    gang(checker, "sg", 4, HARD_2, SUBGROUPS)
    checker.group("ns/sg", Group("ns/sg", min_member=2, topology=HARD_2, subgroups=SUBGROUPS), 0)
    bind(checker, "sg", 0, "node-0", 1.0)  # subgroup part-0: 1 of 2
    bind(checker, "sg", 2, "node-1", 1.0)  # subgroup part-1: 1 of 2
    checker.tick(5.0)
    assert kinds(checker) == []  # inside the window (and the gang's minimum 2 is met)
    checker.tick(6.5)
    assert sorted(v.subject for v in checker.violations) == ["ns/sg part-0", "ns/sg part-1"]
    assert set(kinds(checker)) == {"partial-subgroup"}
    assert "subgroup part-0: 1/2 live bound" in checker.violations[0].detail
    bind(checker, "sg", 1, "node-0", 7.0)
    bind(checker, "sg", 3, "node-1", 7.0)
    assert all(v.until == 7.0 for v in checker.violations)
    assert checker.whole_subgroups == {"ns/sg part-0", "ns/sg part-1"}
    assert kinds(checker) == ["partial-subgroup"] * 2


def test_a_subgroup_split_across_its_tier_is_a_split_and_whole_ones_are_not() -> None:
    checker = cluster()
    gang(checker, "sg", 4, HARD_2, SUBGROUPS)
    bind(checker, "sg", 0, "node-0", 1.0)
    bind(checker, "sg", 1, "node-0", 1.0)
    bind(checker, "sg", 2, "node-1", 1.0)
    assert kinds(checker) == []
    bind(checker, "sg", 3, "node-0", 1.0)  # part-1 on two leaves
    assert kinds(checker) == ["domain-split"]
    assert checker.violations[0].subject == "ns/sg part-1"
    assert "subgroup part-1 (subGroupSize 2)" in checker.violations[0].detail


def test_the_stall_check_counts_room_inside_one_domain_only() -> None:
    checker = cluster(cpu=8)  # 8 cpu a node: a tier-1 domain holds two 4-cpu members
    group = Group("ns/g", min_member=4, topology=HARD_1)
    pods = [Pod(f"ns/g-{i}", requests=CPU4) for i in range(4)]
    room = {n: {"cpu": 8000, "memory": 64 * 2**30, "pods": 110} for n in NODES}
    assert place(checker.tree, group, pods, room) is None
    group.topology = HARD_2
    placed = place(checker.tree, group, pods, room)
    assert placed is not None and len({placed[i] for i in range(4)}) == 2
    tors = ({"node-0", "node-1"}, {"node-2", "node-3"})
    assert any(set(placed.values()) <= tor for tor in tors)
    # Subgroups of 2 within a leaf each: 2 leaves of 8 cpu hold them.
    group.subgroups = SUBGROUPS
    for index, pod in enumerate(pods):
        pod.labels = {SUBGROUP_LABEL: str(index // 2)}
    placed = place(checker.tree, group, pods, room)
    assert placed is not None and placed[0] == placed[1] and placed[2] == placed[3]


def test_a_waiting_hard_gang_that_fits_no_domain_is_no_stall() -> None:
    checker = cluster(cpu=8)
    gang(checker, "big", 4, HARD_1)  # 16 cpu: more than any 8-cpu leaf
    gang(checker, "fits", 2, HARD_1)
    checker.tick(1.0)
    checker.tick(40.0)
    assert [(v.kind, v.subject) for v in checker.violations] == [("stall", "ns/fits")]


def test_the_workload_holds_topology_gangs_and_subgroups_and_off_leaves_the_rest() -> None:
    actions = schedule(11, 1800.0)
    assert [a.kind for a in actions[:2]] == ["setup", "hypernodes"]
    groups = [a.objects[0]["spec"] for a in actions if a.kind == "gang"]
    jobs = [a.objects[0]["spec"] for a in actions if a.kind == "job"]
    modes = [
        (s["networkTopology"]["mode"], s["networkTopology"].get("highestTierAllowed"))
        for s in groups + jobs
        if "networkTopology" in s
    ]
    assert {("hard", 1), ("hard", 2), ("soft", None)} <= set(modes)
    assert any("subGroupPolicy" in s for s in groups)
    assert any("partitionPolicy" in t for j in jobs for t in j["tasks"])
    for spec in groups:  # a hard tier-1 gang fits one 32-cpu node
        if spec.get("networkTopology") == HARD_1:
            assert int(spec["minResources"]["cpu"]) <= 16
    off = schedule(11, 1800.0, Shape(topology=False))
    assert "hypernodes" not in {a.kind for a in off}
    assert not any("networkTopology" in repr(a.objects) for a in off)
    # The rest of the seed's story is the same with topology on or off.
    assert [(a.at, a.kind, a.name) for a in off] == [
        (a.at, a.kind, a.name) for a in actions if a.kind != "hypernodes"
    ]


def test_decoding_keeps_what_the_checks_read() -> None:
    group = decode_group(
        {
            "metadata": {"name": "g", "namespace": "ns"},
            "spec": {"minMember": 4, "networkTopology": HARD_1, "subGroupPolicy": SUBGROUPS},
        }
    )
    assert group.topology == HARD_1 and group.subgroups == SUBGROUPS
    broken = decode_hypernode({"metadata": {"name": "h"}, "spec": {"tier": "x"}})
    assert broken.key == "h" and broken.spec is None


def test_a_partial_subgroup_whose_gang_goes_inside_the_window_is_no_violation() -> None:
    checker = cluster()
    gang(checker, "sg", 4, None, SUBGROUPS)
    bind(checker, "sg", 0, "node-0", 1.0)
    checker.group("ns/sg", None, 3.0)
    for index in range(4):
        checker.pod(f"ns/sg-{index}", None, 3.0)
    checker.tick(10.0)
    checker.finish(11.0)
    assert kinds(checker) == [] and checker.subgroups_seen == {}
