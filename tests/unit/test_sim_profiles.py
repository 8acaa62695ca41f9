"""sim.kubelet.profiles: the `--node-profile` syntax and how profiles become node counts."""

from __future__ import annotations

import pytest

from sim.kubelet.keys import SIM_DURATION, SIM_EXIT_CODE, SIM_NODE_STATE
from sim.kubelet.profiles import (
    DEFAULT_PROFILE,
    NodeProfile,
    expand_profiles,
    parse_node_profile,
)


def test_keys_are_vulcan_keys() -> None:
    assert SIM_DURATION == "vulcan.sh/sim-duration"
    assert SIM_EXIT_CODE == "vulcan.sh/sim-exit-code"
    assert SIM_NODE_STATE == "vulcan.sh/sim-node-state"


def test_full_profile() -> None:
    profile = parse_node_profile(
        "cpu=32,memory=128Gi,nvidia.com/gpu=8,count=4,label.topology.kubernetes.io/zone=a"
    )
    assert profile == NodeProfile(
        count=4,
        capacity={
            "cpu": "32",
            "memory": "128Gi",
            "ephemeral-storage": "100Gi",
            "nvidia.com/gpu": "8",
            "pods": "110",
        },
        labels={"topology.kubernetes.io/zone": "a"},
    )
    assert profile.instance_type == "cpu32-mem128Gi-gpu8"


def test_missing_cpu_memory_storage_and_pods_take_the_defaults() -> None:
    profile = parse_node_profile("nvidia.com/gpu=2")
    assert profile.count is None
    assert profile.capacity == {
        "cpu": "32",
        "memory": "128Gi",
        "ephemeral-storage": "100Gi",
        "nvidia.com/gpu": "2",
        "pods": "110",
    }
    assert parse_node_profile("pods=250, cpu=500m,ephemeral-storage=20Gi").capacity == {
        "cpu": "500m",
        "memory": "128Gi",
        "ephemeral-storage": "20Gi",
        "pods": "250",
    }


def test_default_profile() -> None:
    assert DEFAULT_PROFILE.capacity == {
        "cpu": "32",
        "memory": "128Gi",
        "ephemeral-storage": "100Gi",
        "pods": "110",
    }
    assert DEFAULT_PROFILE.labels == {}
    assert DEFAULT_PROFILE.instance_type == "cpu32-mem128Gi"


def test_label_with_empty_value() -> None:
    assert parse_node_profile("label.example.com/spot=").labels == {"example.com/spot": ""}


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("", ["empty node profile"]),
        ("cpu=32,,memory=1Gi", ["empty item"]),
        ("cpu", ["'cpu'", "KEY=VALUE"]),
        ("=4", ["'=4'", "empty key"]),
        ("cpu=32,cpu=16", ["'cpu=16'", "given twice"]),
        ("cpu=lots", ["'cpu=lots'"]),
        ("memory=1Gb", ["'memory=1Gb'"]),
        ("cpu=-1", ["'cpu=-1'", "negative"]),
        ("count=zero", ["'count=zero'", "integer"]),
        ("count=0", ["'count=0'", "at least 1"]),
        ("Bad_Prefix/gpu=1", ["'Bad_Prefix/gpu=1'", "resource name"]),
        ("label.-zone=a", ["'label.-zone=a'", "label key"]),
        ("label.zone=a b", ["'label.zone=a b'", "label value"]),
        ("label.zone=" + "v" * 64, ["label value"]),
    ],
)
def test_bad_profiles_name_the_item_and_the_reason(text: str, fragments: list[str]) -> None:
    with pytest.raises(ValueError) as caught:
        parse_node_profile(text)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_expand_single_profile_takes_the_node_count() -> None:
    profile = parse_node_profile("cpu=8")
    assert expand_profiles([profile], 3) == [
        NodeProfile(count=3, capacity=profile.capacity, labels={})
    ]


def test_expand_without_profiles_uses_the_default() -> None:
    assert expand_profiles([], 2) == [NodeProfile(count=2)]


def test_expand_single_profile_without_count_needs_nodes() -> None:
    with pytest.raises(ValueError, match="needs the number of nodes"):
        expand_profiles([parse_node_profile("cpu=8")], None)
    with pytest.raises(ValueError, match="needs the number of nodes"):
        expand_profiles([], None)


def test_expand_counted_profiles() -> None:
    a = parse_node_profile("cpu=8,count=2")
    b = parse_node_profile("nvidia.com/gpu=8,count=3")
    assert expand_profiles([a, b], None) == [a, b]
    assert expand_profiles([a, b], 5) == [a, b]
    assert expand_profiles([a], 2) == [a]


def test_expand_counts_must_agree_with_nodes() -> None:
    a = parse_node_profile("cpu=8,count=2")
    b = parse_node_profile("nvidia.com/gpu=8,count=3")
    with pytest.raises(ValueError, match=r"\(4\).*sum 5"):
        expand_profiles([a, b], 4)
    with pytest.raises(ValueError, match=r"\(3\).*sum 2"):
        expand_profiles([a], 3)


def test_expand_several_profiles_each_need_a_count() -> None:
    a = parse_node_profile("cpu=8,count=2")
    b = parse_node_profile("nvidia.com/gpu=8")
    with pytest.raises(ValueError, match="profile 2 has none"):
        expand_profiles([a, b], 5)


def test_expand_rejects_no_nodes() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        expand_profiles([], 0)
