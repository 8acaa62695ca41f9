"""Placement within a HyperNode (a gang's networkTopology, Volcano's network-topology-aware):
the tree's node sets, the tiers tried, the binpacking score, the reason a hard gang waits with,
and whole passes over a cluster of 4 tier-1 HyperNodes of 4 nodes under 2 spines."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from core.api.topology import HyperNode
from core.cache import ClusterCache
from core.hypernode_tree import build_tree
from core.records import NodeRecord, PodGroupRecord, PodRecord, QueueRecord
from core.records.topology import HyperNodeRecord
from plugins.builtin.network_topology import NetworkTopologyPlugin
from plugins.framework.config import DEFAULT_SCHEDULER_CONF, ConfigError, parse_scheduler_config
from plugins.framework.decisions import Admitted, Waiting
from plugins.framework.memo import Memo
from plugins.framework.registry import build_policy
from plugins.model.domains import (
    BinpackWeights,
    constraint_of,
    domain_score,
    gang_of,
    gradients,
    nodes_allowed,
)
from tests.session_harness import run

CONF = DEFAULT_SCHEDULER_CONF.rstrip() + "\n  - name: network-topology-aware\n"
POLICY = build_policy(parse_scheduler_config(CONF))
PLAIN = build_policy(parse_scheduler_config(DEFAULT_SCHEDULER_CONF))
# No reclaim or preempt: a waiting gang then reads no victims, whose key moves with any change.
HARD_1_TOPOLOGY = {"mode": "hard", "highestTierAllowed": 1}
NO_EVICTIONS = build_policy(parse_scheduler_config(CONF.replace("preempt, reclaim, ", "")))


def hypernode(name: str, tier: int, members: list[dict[str, Any]], tier_name: str = "") -> dict:
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return {"metadata": {"name": name}, "spec": spec}


def exact(kind: str, *names: str) -> list[dict[str, Any]]:
    return [{"type": kind, "selector": {"exactMatch": {"name": n}}} for n in names]


def node(name: str, cpu: int = 4, labels: dict[str, str] | None = None) -> NodeRecord:
    return NodeRecord(
        {
            "metadata": {"name": name, "labels": labels or {}},
            "status": {
                "allocatable": {"cpu": str(cpu), "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def two_spines(cache: ClusterCache) -> None:
    """n0..n15 (4 cpu each); s0..s3 hold 4 nodes each; spine a holds s0, s1; b s2, s3."""
    for i in range(16):
        cache.on_node_add(node(f"n{i}"))
    for s in range(4):
        nodes = [f"n{4 * s + i}" for i in range(4)]
        cache.on_hypernode_add(HyperNodeRecord(hypernode(f"s{s}", 1, exact("Node", *nodes))))
    cache.on_hypernode_add(HyperNodeRecord(hypernode("a", 2, exact("HyperNode", "s0", "s1"))))
    cache.on_hypernode_add(HyperNodeRecord(hypernode("b", 2, exact("HyperNode", "s2", "s3"))))


def gang(
    cache: ClusterCache, name: str, members: int, cpu: int, topology: dict[str, Any] | None
) -> None:
    spec: dict[str, Any] = {"minMember": members, "queue": "default"}
    if topology is not None:
        spec["networkTopology"] = topology
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    cache.on_podgroup_add(PodGroupRecord({"metadata": meta, "spec": spec, "status": {}}))
    for i in range(members):
        cache.on_pod_add(
            PodRecord(
                {
                    "metadata": {
                        "name": f"{name}-{i}",
                        "namespace": "ns",
                        "uid": f"uid-{name}-{i}",
                        "annotations": {"scheduling.k8s.io/group-name": name},
                    },
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
                    },
                    "status": {"phase": "Pending"},
                }
            )
        )


def cluster() -> ClusterCache:
    cache = ClusterCache()
    cache.on_queue_add(QueueRecord({"metadata": {"name": "default", "uid": "q"}, "spec": {}}))
    two_spines(cache)
    return cache


def decide(cache: ClusterCache, key: str, policy: Any = POLICY, memo: Memo | None = None) -> Any:
    result = run(policy, cache.live_view(), memo)
    found = [d for d in result.decisions if d.key == key]
    return found[-1] if found else None


def domain_of(cache: ClusterCache, nodes: set[str], tier: int) -> set[str]:
    tree = cache.live_view().hypernodes
    return {d.name for d in tree.domains.values() if d.tier == tier and nodes & d.nodes}


# ----------------------------------------------------------------------------- the tree


def test_members_resolve_exact_regex_label_and_nested() -> None:
    labels = {"n0": {"tor": "t0"}, "n1": {"tor": "t0"}, "n2": {"tor": "t1"}, "m3": {}}
    specs = {
        "t0": hypernode(
            "t0", 1, [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"tor": "t0"}}}}]
        ),
        "t1": hypernode(
            "t1", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^[nm][23]$"}}}]
        ),
        "gone": hypernode("gone", 1, exact("Node", "n9")),
        "spine": hypernode("spine", 2, exact("HyperNode", "t0", "t1", "gone"), tier_name="spine"),
    }
    tree = build_tree({k: HyperNode.model_validate(v) for k, v in specs.items()}, labels)
    assert tree.domains["t0"].nodes == {"n0", "n1"}
    assert tree.domains["t1"].nodes == {"n2", "m3"}
    assert tree.domains["gone"].nodes == frozenset()  # a node that does not exist: none
    assert tree.domains["spine"].nodes == {"n0", "n1", "n2", "m3"}
    assert tree.domains["t0"].parent == "spine" and tree.domains["spine"].parent is None
    assert tree.tiers == (1, 2) and tree.top_tier == 3
    assert tree.tier_names == {"spine": 2}


def test_a_cycle_is_cut_where_it_closes() -> None:
    specs = {
        "x": hypernode("x", 2, [*exact("HyperNode", "y"), *exact("Node", "n0")]),
        "y": hypernode("y", 1, [*exact("HyperNode", "x"), *exact("Node", "n1")]),
    }
    tree = build_tree(
        {k: HyperNode.model_validate(v) for k, v in specs.items()}, {"n0": {}, "n1": {}}
    )
    assert tree.domains["x"].nodes == {"n0", "n1"} == tree.domains["y"].nodes


def test_the_cache_rebuilds_the_tree_when_a_node_is_relabelled() -> None:
    cache = ClusterCache()
    cache.on_node_add(node("n0", labels={"tor": "a"}))
    selector = {"labelMatch": {"matchLabels": {"tor": "a"}}}
    cache.on_hypernode_add(
        HyperNodeRecord(hypernode("a", 1, [{"type": "Node", "selector": selector}]))
    )
    before = cache.epochs.topology
    assert cache.live_view().hypernodes.domains["a"].nodes == {"n0"}
    cache.on_node_update(cache.nodes["n0"], node("n0", labels={"tor": "b"}))
    assert cache.epochs.topology > before
    assert cache.live_view().hypernodes.domains["a"].nodes == frozenset()


# ----------------------------------------------------------------------------- the formulas


def test_tiers_tried_hard_soft_and_by_name() -> None:
    cache = cluster()
    tree = cache.live_view().hypernodes
    hard1 = constraint_of({"mode": "hard", "highestTierAllowed": 1}, tree)
    assert hard1 is not None
    assert [[d and d.name for d in g] for g in gradients(hard1, tree)] == [["s0", "s1", "s2", "s3"]]
    hard3 = constraint_of({"mode": "hard", "highestTierAllowed": 3}, tree)
    assert hard3 is not None
    assert [len(g) for g in gradients(hard3, tree)] == [4, 2, 1]  # tier 3: the whole cluster
    soft = constraint_of({"mode": "soft"}, tree)
    assert soft is not None
    assert [[d and d.name for d in g] for g in gradients(soft, tree)][1:] == [["a", "b"], [None]]
    unknown = constraint_of({"mode": "hard", "highestTierName": "rack"}, tree)
    assert unknown is not None and gradients(unknown, tree) == [[None]]  # Volcano: untranslated
    assert constraint_of(None, tree) is None


def test_nodes_one_more_member_may_take_keep_the_gang_in_one_hypernode() -> None:
    tree = cluster().live_view().hypernodes
    s0 = {f"n{i}" for i in range(4)}
    hard1 = constraint_of({"mode": "hard", "highestTierAllowed": 1}, tree)
    hard2 = constraint_of({"mode": "hard", "highestTierAllowed": 2}, tree)
    soft = constraint_of({"mode": "soft"}, tree)
    top = constraint_of({"mode": "hard", "highestTierAllowed": 3}, tree)
    assert hard1 is not None and hard2 is not None and soft is not None and top is not None
    assert nodes_allowed(hard1, tree, ["n0", "n3"]) == s0
    assert nodes_allowed(hard2, tree, ["n0", "n5"]) == {f"n{i}" for i in range(8)}  # spine a
    assert nodes_allowed(hard1, tree, ["n0", "n5"]) == set()  # already split: nowhere
    assert nodes_allowed(hard1, tree, []) == {f"n{i}" for i in range(16)}
    assert nodes_allowed(soft, tree, ["n0"]) is None
    assert nodes_allowed(top, tree, ["n0"]) is None  # the whole cluster allowed


def test_binpack_score_is_volcanos() -> None:
    weights = BinpackWeights({"cpu": 2, "memory": 1})
    request = {"cpu": 4000, "memory": 0, "nvidia.com/gpu": 1}  # gpu: no weight, not scored
    score = domain_score(request, {"cpu": 16000}, {"cpu": 4000}, weights)
    assert score == pytest.approx(0.5)  # (4 + 4) / 16, memory not requested
    assert domain_score({"cpu": 13000}, {"cpu": 16000}, {"cpu": 4000}, weights) == 0.0


def test_the_required_room_is_a_lower_bound() -> None:
    cache = cluster()
    gang(cache, "g", 3, 1, None)
    members = [cache.pods[f"ns/g-{i}"] for i in range(3)]
    found = gang_of(members, 2, [])
    assert found.request["cpu"] == 3000 and found.required["cpu"] == 2000 and found.need == 2


def test_plugin_arguments_as_volcanos() -> None:
    plugin = NetworkTopologyPlugin(
        {
            "weight": 10,
            "hypernode.binpack.cpu": 5,
            "hypernode.binpack.memory": -1,
            "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpu": 2,
        }
    )
    assert plugin.weight == 10
    weights = plugin.binpack_weights().weights
    assert weights == {"cpu": 5, "memory": 1, "nvidia.com/gpu": 2, "example.com/foo": 1}
    with pytest.raises(ConfigError, match=r"hypernode\.binpack\.normal-pod\.fading"):
        NetworkTopologyPlugin({"hypernode.binpack.normal-pod.fading": "much"})


# ----------------------------------------------------------------------------- whole passes


def test_hard_tier1_gang_of_4_lands_in_one_tier1_domain() -> None:
    cache = cluster()
    gang(cache, "g", 4, 2, {"mode": "hard", "highestTierAllowed": 1})
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Admitted)
    assert len(domain_of(cache, set(decision.slots.values()), 1)) == 1


def test_hard_tier1_gang_too_big_for_one_domain_waits_naming_the_closest() -> None:
    cache = cluster()
    gang(cache, "g", 6, 3, {"mode": "hard", "highestTierAllowed": 1})
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Waiting)
    assert (
        "networkTopology hard, highestTierAllowed 1: no HyperNode of tier <= 1" in decision.reason
    )
    assert "the closest, s0 (tier 1, 4 nodes), has room for 4 of 6 required members" in (
        decision.reason
    )
    assert "not enough cpu (need 18, free 16)" in decision.reason
    # Without the plugin in the conf Volcano offers the whole cluster: placed.
    assert isinstance(decide(cache, "ns/g", PLAIN), Admitted)


def test_hard_tier2_gang_of_6_lands_under_one_spine() -> None:
    cache = cluster()
    gang(cache, "g", 6, 3, {"mode": "hard", "highestTierName": "", "highestTierAllowed": 2})
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Admitted)
    assert len(domain_of(cache, set(decision.slots.values()), 2)) == 1


def test_soft_gang_of_6_spans_two_tier1_domains_under_one_spine() -> None:
    cache = cluster()
    gang(cache, "g", 6, 3, {"mode": "soft"})
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Admitted)
    nodes = set(decision.slots.values())
    assert len(domain_of(cache, nodes, 1)) == 2
    assert len(domain_of(cache, nodes, 2)) == 1


def test_soft_gang_too_big_for_a_spine_lands_anywhere() -> None:
    cache = cluster()
    gang(cache, "g", 12, 3, {"mode": "soft"})
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Admitted)
    assert len(domain_of(cache, set(decision.slots.values()), 2)) == 2


def test_binpacking_prefers_the_fuller_domain() -> None:
    """s2 already runs 3 cpu: of the tier-1 HyperNodes with room, it scores highest."""
    cache = cluster()
    gang(cache, "busy", 1, 3, None)
    busy = cache.pods["ns/busy-0"]
    raw = {
        "metadata": {
            "name": "busy-0",
            "namespace": "ns",
            "uid": busy.uid,
            "annotations": {"scheduling.k8s.io/group-name": "busy"},
        },
        "spec": {
            "schedulerName": "volcano",
            "nodeName": "n9",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}],
        },
        "status": {"phase": "Running"},
    }
    cache.on_pod_update(busy, PodRecord(raw))
    gang(cache, "g", 4, 2, {"mode": "hard", "highestTierAllowed": 1})
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Admitted)
    assert domain_of(cache, set(decision.slots.values()), 1) == {"s2"}


def test_a_gang_waits_until_the_hypernodes_are_listed() -> None:
    cache = cluster()
    cache.topology.listing()
    gang(cache, "g", 4, 2, {"mode": "hard", "highestTierAllowed": 1})
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Waiting)
    assert "waiting for the HyperNodes to be listed" in decision.reason
    cache.topology.synced()
    assert isinstance(decide(cache, "ns/g"), Admitted)


def test_a_hypernode_change_is_seen_by_the_memo() -> None:
    """A hard gang waits while no tier-1 HyperNode holds it; a new one that does (with a
    memo kept decision before) admits it in the next pass, as without the memo."""
    cache = cluster()
    gang(cache, "g", 6, 3, {"mode": "hard", "highestTierAllowed": 1})
    memo = Memo()
    memo.changed(cache.take_dirty_groups())
    assert isinstance(decide(cache, "ns/g", NO_EVICTIONS, memo), Waiting)
    memo.changed(cache.take_dirty_groups())
    assert decide(cache, "ns/g", NO_EVICTIONS, memo) is None  # kept: nothing changed
    nodes = [f"n{i}" for i in range(8)]
    cache.on_hypernode_add(HyperNodeRecord(hypernode("big", 1, exact("Node", *nodes))))
    memo.changed(cache.take_dirty_groups())
    decision = decide(cache, "ns/g", NO_EVICTIONS, memo)
    assert isinstance(decision, Admitted)
    assert set(decision.slots.values()) <= set(nodes)
    assert Counter(decision.slots.values()).most_common(1)[0][1] == 1


def running_gang(cache: ClusterCache, topology: dict[str, Any], nodes: list[str]) -> None:
    """A gang of minMember 4 running 4 cpu a member on `nodes`, and its 5th member (2 cpu, an
    elastic one) waiting."""
    gang(cache, "g", 4, 4, topology)
    raw = {
        "metadata": {"name": "g", "namespace": "ns", "uid": "uid-g"},
        "spec": {"minMember": 4, "queue": "default", "networkTopology": topology},
        "status": {"phase": "Running"},
    }
    cache.on_podgroup_add(PodGroupRecord(raw))
    for i, name in enumerate(nodes):
        old = cache.pods[f"ns/g-{i}"]
        bound = {
            "metadata": {
                "name": f"g-{i}",
                "namespace": "ns",
                "uid": old.uid,
                "annotations": {"scheduling.k8s.io/group-name": "g"},
            },
            "spec": {
                "schedulerName": "volcano",
                "nodeName": name,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}],
            },
            "status": {"phase": "Running"},
        }
        cache.on_pod_update(old, PodRecord(bound))
    elastic = {
        "metadata": {
            "name": "g-4",
            "namespace": "ns",
            "uid": "uid-g-4",
            "annotations": {"scheduling.k8s.io/group-name": "g"},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
        },
        "status": {"phase": "Pending"},
    }
    cache.on_pod_add(PodRecord(elastic))


def grown(cache: ClusterCache) -> Any:
    result = run(POLICY, cache.live_view(), admitted={"ns/g"}, elastic_waiting={"ns/g": {"ns/g-4"}})
    return [d for d in result.decisions if type(d).__name__ == "Grown"]


def test_an_elastic_member_grows_only_within_the_gangs_hypernode() -> None:
    """s0 is full with the gang's 4 members: under hard tier 1 its 5th has nowhere to go;
    under hard tier 2 it joins a node of spine a (s1), never spine b."""
    cache = cluster()
    running_gang(cache, HARD_1_TOPOLOGY, ["n0", "n1", "n2", "n3"])
    assert grown(cache) == []
    cache = cluster()
    running_gang(cache, {"mode": "hard", "highestTierAllowed": 2}, ["n0", "n1", "n2", "n3"])
    [decision] = grown(cache)
    assert domain_of(cache, {decision.node}, 1) == {"s1"}


def test_a_gang_replacing_members_stays_in_the_hypernode_of_its_running_ones() -> None:
    """Two members run in s2; the gang lost the others: the replacements land in s2."""
    cache = cluster()
    running_gang(cache, HARD_1_TOPOLOGY, ["n8", "n9"])
    result = run(POLICY, cache.live_view())
    [decision] = [d for d in result.decisions if d.key == "ns/g"]
    assert isinstance(decision, Admitted)
    assert domain_of(cache, set(decision.slots.values()), 1) == {"s2"}


def filler(cache: ClusterCache, node_name: str, priority: int) -> None:
    """A plain pod (no gang) filling `node_name` (4 cpu) at `priority`."""
    raw = {
        "metadata": {"name": f"fill-{node_name}", "namespace": "ns", "uid": f"uid-f-{node_name}"},
        "spec": {
            "schedulerName": "volcano",
            "priority": priority,
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}],
        },
        "status": {"phase": "Running"},
    }
    cache.on_pod_add(PodRecord(raw))


def preempting(topology: dict[str, Any] | None) -> tuple[set[str], ClusterCache]:
    """Every node full of plain pods, the cheapest on n0, n4, n8, n12 (one per tier-1
    HyperNode), then n1; a gang of 4 x 2 cpu of a higher priority: the nodes it evicts on."""
    cache = cluster()
    cheap = {"n0": 1, "n4": 2, "n8": 3, "n12": 4, "n1": 5}
    for i in range(16):
        filler(cache, f"n{i}", cheap.get(f"n{i}", 10))
    gang(cache, "g", 4, 2, topology)
    # Enqueued already (its minResources counted in its queue): the enqueue votes promise no
    # victims of their own, the placement alone chooses them.
    spec: dict[str, Any] = {"minMember": 4, "queue": "default", "minResources": {"cpu": "8"}}
    if topology is not None:
        spec["networkTopology"] = topology
    meta = {"name": "g", "namespace": "ns", "uid": "uid-g"}
    raw_group = {"metadata": meta, "spec": spec, "status": {"phase": "Inqueue"}}
    cache.on_podgroup_add(PodGroupRecord(raw_group))
    for i in range(4):
        old = cache.pods[f"ns/g-{i}"]
        raw = {
            "metadata": {
                "name": f"g-{i}",
                "namespace": "ns",
                "uid": old.uid,
                "annotations": {"scheduling.k8s.io/group-name": "g"},
            },
            "spec": {
                "schedulerName": "volcano",
                "priority": 100,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            },
            "status": {"phase": "Pending"},
        }
        cache.on_pod_update(old, PodRecord(raw))
    decision = decide(cache, "ns/g")
    assert isinstance(decision, Admitted) and decision.evictions is not None
    pods = cache.pods
    return {pods[p].node or "" for u in decision.evictions.units for p in u.pods}, cache


def test_preemption_for_a_hard_gang_frees_room_inside_one_hypernode() -> None:
    anywhere, _ = preempting(None)
    assert anywhere == {"n0", "n4"}  # the cheapest two, in two HyperNodes
    inside, cache = preempting(HARD_1_TOPOLOGY)
    assert inside == {"n0", "n1"}  # the cheapest two within one (s0)
    assert domain_of(cache, inside, 1) == {"s0"}
