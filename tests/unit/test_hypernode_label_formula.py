"""Label-based HyperNode discovery (Volcano's `label` source): its configuration and the
formula from node labels to the HyperNode tree, on the example of Volcano's user guide."""

from __future__ import annotations

import pytest

from topology_controller.config import DiscoveryConfigError, parse
from topology_controller.discovery import SOURCE_LABEL, clean, discover, manifest

# Volcano's documented configuration (docs/user-guide/how_to_use_hypernode_auto_discovery.md).
CONF = """
networkTopologyDiscovery:
  - source: ufm
    enabled: true
    config: {endpoint: https://ufm-server:8080}
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        topologyA2:
          - nodeLabel: "volcano.sh/tor"
          - nodeLabel: "kubernetes.io/hostname"
        topologyA3:
          - nodeLabel: "volcano.sh/hypercluster"
          - nodeLabel: "volcano.sh/hypernode"
          - nodeLabel: "kubernetes.io/hostname"
"""


def a3_nodes() -> list[tuple[str, dict[str, str]]]:
    """The guide's eight nodes: s0..s3 of two nodes each, s0/s1 under s4, s2/s3 under s5."""
    return [
        (
            f"node{i}",
            {
                "kubernetes.io/hostname": f"192.168.1.{10 + i}",
                "volcano.sh/hypernode": f"s{i // 2}",
                "volcano.sh/hypercluster": f"s{4 + i // 4}",
            },
        )
        for i in range(8)
    ]


def test_the_documented_configuration_reads_tiers_from_the_leaf_upward() -> None:
    config = parse(CONF)
    assert config is not None
    assert config.tiers == {
        "topologyA2": ("volcano.sh/tor",),
        "topologyA3": ("volcano.sh/hypernode", "volcano.sh/hypercluster"),
    }


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ("networkTopologyDiscovery: 3", "networkTopologyDiscovery: expected a list"),
        (
            "networkTopologyDiscovery: [{source: label, enabled: true, config: {}}]",
            "networkTopologyDiscovery[0].config.networkTopologyTypes: Required value",
        ),
        (
            "networkTopologyDiscovery: [{source: label, enabled: true, config: "
            "{networkTopologyTypes: {t: [{nodeLabel: a}, {nodeLabel: a}]}}}]",
            "networkTopologyTypes.t: there are duplicate labels",
        ),
        (
            "networkTopologyDiscovery: [{source: label, enabled: true, config: "
            "{networkTopologyTypes: {averyveryverylongtypename: [{nodeLabel: a}]}}}]",
            "name longer than 20 characters",
        ),
    ],
)
def test_a_bad_configuration_names_the_field(conf: str, words: str) -> None:
    with pytest.raises(DiscoveryConfigError) as info:
        parse(conf, "conf.yaml")
    assert str(info.value).startswith("conf.yaml: ")
    assert words in str(info.value)


def test_no_enabled_label_source_means_discovery_is_off() -> None:
    assert parse("networkTopologyDiscovery: [{source: label, enabled: false}]") is None
    assert parse("") is None


def test_the_guides_nodes_make_its_tree() -> None:
    config = parse(CONF)
    assert config is not None
    tree = discover(config.tiers, a3_nodes(), {})
    by_label = {(d.tier, next(iter(d.labels.values()))): (n, d) for n, d in tree.items()}
    assert sorted(by_label) == [(1, "s0"), (1, "s1"), (1, "s2"), (1, "s3"), (2, "s4"), (2, "s5")]
    s0, d0 = by_label[(1, "s0")]
    assert s0.startswith("hypernode-topologya3-tier1-")
    assert d0.members == {"node0", "node1"} and d0.tier_name == "volcano.sh/hypernode"
    s4, d4 = by_label[(2, "s4")]
    assert s4.startswith("hypernode-topologya3-tier2-")
    assert d4.members == {by_label[(1, "s0")][0], by_label[(1, "s1")][0]}
    assert d4.nodes == {f"node{i}" for i in range(4)}
    obj = manifest(s4, d4)
    assert obj["metadata"]["labels"] == {  # type: ignore[index]
        SOURCE_LABEL: "label",
        "volcano.sh/hypercluster": "s4",
    }
    assert [m["type"] for m in obj["spec"]["members"]] == ["HyperNode", "HyperNode"]  # type: ignore[index]


def test_existing_hypernodes_keep_their_names_and_new_values_get_new_ones() -> None:
    config = parse(CONF)
    assert config is not None
    first = discover(config.tiers, a3_nodes(), {})
    existing = {name: manifest(name, d)["metadata"]["labels"] for name, d in first.items()}
    nodes = a3_nodes()
    nodes[7][1]["volcano.sh/hypernode"] = "s9"  # node7 moves to a new tier-1 domain
    again = discover(config.tiers, nodes, existing)
    assert set(first) < set(again)
    (new,) = set(again) - set(first)
    assert new.startswith("hypernode-topologya3-tier1-") and again[new].labels == {
        "volcano.sh/hypernode": "s9"
    }


def test_deciding_again_before_the_creates_are_seen_asks_for_the_same_names() -> None:
    """A pass whose informer has not seen the last pass's creates yet names every HyperNode as
    that pass did (the create answers 409): no label gets a second HyperNode."""
    config = parse(CONF)
    assert config is not None
    first = discover(config.tiers, a3_nodes(), {})
    assert discover(config.tiers, a3_nodes(), {}) == first
    assert len({n.rsplit("-", 1)[1] for n in first}) == len(first)  # distinct per label


def test_a_node_without_the_lower_tier_label_stops_there() -> None:
    config = parse(CONF)
    assert config is not None
    nodes = [("n", {"volcano.sh/hypercluster": "s4"}), ("m", {"volcano.sh/tor": "t1"})]
    tree = discover(config.tiers, nodes, {})
    assert [(d.tier, d.labels, d.members) for d in tree.values()] == [
        (1, {"volcano.sh/tor": "t1"}, {"m"})
    ]
    assert next(iter(tree)).startswith("hypernode-topologya2-tier1-")


def test_type_names_are_cleaned_as_volcano_does() -> None:
    assert clean("Topo_A3") == "topo-a3"
    assert clean("gpu.v1-X") == "gpu.v1-x"
