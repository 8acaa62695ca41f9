"""plugins: binpack and nodeorder scores against hand-computed values, and their combination.

Expected values are worked out in the comments from Volcano's binpack formula and
kube-scheduler's integer LeastAllocated / MostAllocated / BalancedAllocation arithmetic.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from core.resources import ResourceVector
from plugins.builtin.binpack import BinpackPlugin
from plugins.builtin.nodeorder import NodeOrderPlugin
from plugins.framework import registry
from plugins.framework.config import ConfigError, default_config, parse_scheduler_config
from plugins.framework.node_order import Framework, NodeState

GI = 2**30
GPU = "nvidia.com/gpu"


def vec(cpu: int = 0, memory_gi: int = 0, **extra: int) -> ResourceVector:
    amounts = {"cpu": cpu, "memory": memory_gi * GI}
    amounts.update({GPU if name == "gpu" else name: value for name, value in extra.items()})
    return ResourceVector(amounts)


def node(name: str, allocatable: ResourceVector, requested: ResourceVector) -> NodeState:
    return NodeState(name=name, allocatable=allocatable, requested=requested)


def framework(yaml_tiers: str) -> Framework:
    return Framework(parse_scheduler_config(f"actions: allocate\ntiers:\n{yaml_tiers}"))


# A 4-core / 8 GiB node, empty, half used and three-quarters used; a 1 core / 1 GiB pod.
ALLOC = vec(4000, 8, pods=110)
EMPTY = node("empty", ALLOC, vec(0, 0))
QUARTER = node("quarter", ALLOC, vec(1000, 2, pods=3))
HALF = node("half", ALLOC, vec(2000, 4, pods=5))
THREE_QUARTERS = node("three-quarters", ALLOC, vec(3000, 6, pods=7))
POD = vec(1000, 1, pods=1)


# ---------------------------------------------------------------------------------- binpack


def test_binpack_prefers_the_fuller_node() -> None:
    plugin = BinpackPlugin({})
    # half: cpu (2000+1000)/4000 = 0.75, memory (4+1)/8 = 0.625 -> mean 0.6875 -> 68.75
    assert plugin.score(POD, HALF) == pytest.approx(68.75)
    # empty: cpu 0.25, memory 0.125 -> 0.1875 -> 18.75
    assert plugin.score(POD, EMPTY) == pytest.approx(18.75)
    # "pods" is requested (1) but never a binpack resource, even when listed.
    listed = BinpackPlugin({"binpack.resources": "pods"})
    assert listed.score(POD, HALF) == pytest.approx(68.75)


def test_binpack_is_zero_when_a_weighted_resource_does_not_fit() -> None:
    plugin = BinpackPlugin({})
    assert plugin.score(POD, node("cpu-full", ALLOC, vec(3500, 1))) == 0.0
    # Exactly full still fits: cpu 1000/4000, memory 8/8 -> (0.25 + 1.0) / 2
    assert plugin.score(POD, node("memory-full", ALLOC, vec(0, 7))) == pytest.approx(62.5)
    assert plugin.score(vec(1000, 2), node("memory-over", ALLOC, vec(0, 7))) == 0.0


def test_binpack_custom_weights_and_extra_resources() -> None:
    plugin = BinpackPlugin(
        {
            "binpack.weight": "10",
            "binpack.cpu": 2,
            "binpack.resources": "nvidia.com/gpu, example.com/foo",
            "binpack.resources.nvidia.com/gpu": 3,
        }
    )
    assert plugin.resource_weights == {GPU: 3, "example.com/foo": 1, "cpu": 2, "memory": 1}
    gpu_node = node("gpu", vec(8000, 32, gpu=4), vec(4000, 8, gpu=1))
    # cpu 2 x (4000+2000)/8000 = 1.5; memory 1 x (8+8)/32 = 0.5; gpu 3 x (1+1)/4 = 1.5
    # -> 3.5 / 6 x 100 x 10
    assert plugin.score(vec(2000, 8, gpu=1), gpu_node) == pytest.approx(3.5 / 6 * 1000)
    # Without a GPU request the GPU weight does not count: (1.5 + 0.5) / 3 x 1000.
    assert plugin.score(vec(2000, 8), gpu_node) == pytest.approx(2.0 / 3 * 1000)
    # A node without GPUs: the GPU adds 0 but its weight still counts: 2.0 / 6 x 1000.
    cpu_node = node("cpu", vec(8000, 32), vec(4000, 8))
    assert plugin.score(vec(2000, 8, gpu=1), cpu_node) == pytest.approx(2.0 / 6 * 1000)


def test_binpack_weight_zero_contributes_nothing() -> None:
    off = BinpackPlugin({"binpack.weight": 0})
    assert not off.active
    assert off.score(POD, HALF) == 0.0
    only_nodeorder = framework("- plugins:\n  - name: nodeorder\n")
    both = framework(
        "- plugins:\n  - name: nodeorder\n  - name: binpack\n    arguments: {binpack.weight: 0}\n"
    )
    assert [p.name for p in both.score_plugins] == ["nodeorder"]
    assert both.score(POD, [EMPTY, HALF]) == only_nodeorder.score(POD, [EMPTY, HALF])
    # A zero resource weight drops that resource from both sums: memory alone, 5/8 -> 62.5.
    assert BinpackPlugin({"binpack.cpu": 0}).score(POD, HALF) == pytest.approx(62.5)


def test_binpack_negative_weights() -> None:
    # Negative resource weights reset to 1 ...
    assert BinpackPlugin({"binpack.cpu": -5, "binpack.memory": "-1"}).score(
        POD, HALF
    ) == pytest.approx(68.75)
    # ... but a negative binpack.weight is kept, as in Volcano (it spreads instead of packing).
    assert BinpackPlugin({"binpack.weight": -1}).score(POD, HALF) == pytest.approx(-68.75)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"binpack.wieght": 1}, 'unknown binpack argument "binpack.wieght"'),
        ({"binpack.resources.nvidia.com/gpu": 2}, '"nvidia.com/gpu" is not listed'),
        ({"binpack.resources": ["nvidia.com/gpu"]}, "expected a comma-separated string"),
        ({"binpack.cpu": 1.5}, 'arguments["binpack.cpu"]: expected an integer'),
    ],
)
def test_binpack_argument_errors(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BinpackPlugin(arguments)
    assert message in str(caught.value)


# -------------------------------------------------------------------------------- nodeorder


def test_least_requested_prefers_the_emptier_node() -> None:
    plugin = NodeOrderPlugin({"balancedresource.weight": 0})
    # quarter: cpu (4000-2000)x100/4000 = 50; memory (8-3)x100/8 = 62.5 -> 62;
    #          (50x50 + 62x50) / 100 = 56
    assert plugin.score(POD, QUARTER) == 56.0
    # three-quarters: cpu (4000-4000) -> 0; memory (8-7)x100/8 = 12.5 -> 12; 600 / 100 = 6
    assert plugin.score(POD, THREE_QUARTERS) == 6.0
    # empty: cpu 75; memory 87.5 -> 87; (75 + 87) / 2 = 81
    assert plugin.score(POD, EMPTY) == 81.0
    # Requested beyond allocatable scores 0 for that resource (memory 87 alone -> 43).
    assert plugin.score(POD, node("over", ALLOC, vec(5000, 0))) == 43.0
    # A resource the node does not report is left out of the mean (weight not counted).
    assert plugin.score(POD, node("no-cpu", vec(0, 8), vec(0, 2))) == 62.0


def test_most_requested_prefers_the_fuller_node() -> None:
    plugin = NodeOrderPlugin(
        {"leastrequested.weight": 0, "balancedresource.weight": 0, "mostrequested.weight": 2}
    )
    # quarter: cpu 2000x100/4000 = 50; memory 3x100/8 = 37.5 -> 37; (50+37)/2 = 43; x2
    assert plugin.score(POD, QUARTER) == 86.0
    # three-quarters: cpu 100; memory 87.5 -> 87; 187/2 = 93; x2
    assert plugin.score(POD, THREE_QUARTERS) == 186.0
    # Over-committed resources are capped at 100.
    assert plugin.score(POD, node("over", ALLOC, vec(9000, 7))) == 200.0


def test_balanced_allocation_exact_values() -> None:
    plugin = NodeOrderPlugin({"leastrequested.weight": 0})
    # quarter: fractions 0.5 and 0.375 -> std 0.0625 -> 93.75 -> 93
    assert plugin.score(POD, QUARTER) == 93.0
    gpu_node = node("gpu", vec(4000, 8, gpu=4), vec(1000, 1, gpu=2))
    # With a GPU request: fractions 0.5, 0.25, 0.75 -> mean 0.5, variance 0.125/3,
    # std 0.2041 -> 79.59 -> 79
    assert plugin.score(vec(1000, 1, gpu=1), gpu_node) == 79.0
    # Without one the GPU is not part of the balance: 0.5, 0.25 -> std 0.125 -> 87.5 -> 87
    assert plugin.score(vec(1000, 1), gpu_node) == 87.0
    # A node without GPUs leaves the GPU out even when requested.
    assert plugin.score(vec(1000, 1, gpu=1), node("cpu", vec(4000, 8), vec(1000, 1))) == 87.0
    # Fractions are capped at 1: cpu 6000/4000 -> 1.0, memory 0.5 -> std 0.25 -> 75
    assert plugin.score(vec(5000, 1), node("over", ALLOC, vec(1000, 3))) == 75.0
    # A pod requesting none of cpu/memory/gpu is not balance-scored (k/k#129138).
    assert plugin.score(ResourceVector({"pods": 1}), QUARTER) == 0.0


def test_balanced_allocation_on_nodes_missing_a_resource() -> None:
    plugin = NodeOrderPlugin({"leastrequested.weight": 0})
    # No memory reported: cpu 0.5 and gpu 0.75 -> std 0.125 -> 87.5 -> 87
    no_memory = node("no-memory", ResourceVector({"cpu": 4000, GPU: 4}), vec(1000, 0, gpu=2))
    assert plugin.score(vec(1000, 1, gpu=1), no_memory) == 87.0
    # A single resource has no spread: 100.
    assert plugin.score(POD, node("cpu-only", ResourceVector({"cpu": 4000}), vec(0, 0))) == 100.0


def _reference_nodeorder(request: ResourceVector, state: NodeState, weights: tuple) -> float:
    """kube-scheduler's scorers written the plain way, to check the optimised hot path."""
    least_weight, most_weight, balanced_weight = weights
    rows = []  # (allocatable, requested after placing the pod, pod request)
    for resource in ("cpu", "memory", GPU):
        want = request.get(resource)
        capacity = state.allocatable.get(resource)
        if capacity > 0 and (resource != GPU or want > 0):
            rows.append((resource, capacity, state.requested.get(resource) + want))
    # LeastAllocated (cpu 50, memory 50) and MostAllocated (1, 1) use cpu and memory only.
    least = most = least_sum = most_sum = 0
    for resource, capacity, after in rows:
        if resource != GPU:
            least += (max(capacity - after, 0) * 100 // capacity) * 50
            most += (min(after, capacity) * 100 // capacity) * 1
            least_sum += 50
            most_sum += 1
    total = 0.0
    if least_sum:
        total += (least // least_sum) * least_weight + (most // most_sum) * most_weight
    wants = [request.get(r) for r in ("cpu", "memory", GPU)]
    if balanced_weight and any(wants):
        fractions = [min(after / capacity, 1.0) for _, capacity, after in rows]
        std = 0.0
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = sum(fractions) / len(fractions)
            std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
        total += int((1 - std) * 100) * balanced_weight
    return total


@pytest.mark.parametrize("weights", [(1, 0, 1), (0, 3, 0), (2, 1, 5)])
def test_nodeorder_matches_a_plain_reference(weights: tuple[int, int, int]) -> None:
    rng = random.Random(7)
    plugin = NodeOrderPlugin(
        {
            "leastrequested.weight": weights[0],
            "mostrequested.weight": weights[1],
            "balancedresource.weight": weights[2],
        }
    )
    for _ in range(2000):
        allocatable = ResourceVector(
            {
                "cpu": rng.choice([0, 1000, 4000, 96000]),
                "memory": rng.choice([0, GI, 16 * GI, 768 * GI]),
                GPU: rng.choice([0, 0, 1, 8]),
            }
        )
        requested = ResourceVector(
            {
                "cpu": rng.randrange(0, 100000),
                "memory": rng.randrange(0, 800 * GI),
                GPU: rng.randrange(0, 9),
            }
        )
        request = ResourceVector(
            {
                "cpu": rng.choice([0, 100, 1000, 8000]),
                "memory": rng.choice([0, 2**20, GI]),
                GPU: rng.choice([0, 0, 1, 4]),
            }
        )
        state = node("n", allocatable, requested)
        assert plugin.score(request, state) == _reference_nodeorder(request, state, weights)


def test_nodeorder_defaults_add_least_requested_and_balanced() -> None:
    plugin = NodeOrderPlugin({})
    assert (plugin.least_requested_weight, plugin.most_requested_weight) == (1, 0)
    assert plugin.balanced_resource_weight == 1
    # The other weights are parsed and kept but scored by kube-scheduler itself.
    assert plugin.node_affinity_weight == 2
    assert plugin.pod_affinity_weight == 2
    assert plugin.taint_toleration_weight == 3
    assert plugin.image_locality_weight == 1
    assert plugin.pod_topology_spread_weight == 2
    assert plugin.score(POD, QUARTER) == 56.0 + 93.0
    custom = NodeOrderPlugin({"nodeaffinity.weight": "5", "tainttoleration.weight": 0})
    assert (custom.node_affinity_weight, custom.taint_toleration_weight) == (5, 0)
    assert custom.score(POD, QUARTER) == 56.0 + 93.0
    assert not NodeOrderPlugin({"leastrequested.weight": 0, "balancedresource.weight": 0}).active
    with pytest.raises(ConfigError, match=r'unknown nodeorder argument "leastrequest\.weight"'):
        NodeOrderPlugin({"leastrequest.weight": 1})


# -------------------------------------------------------------------------------- framework


def test_framework_sums_scores_across_tiers() -> None:
    fw = framework(
        "- plugins:\n  - name: gang\n  - name: binpack\n- plugins:\n  - name: nodeorder\n"
    )
    assert [p.name for p in fw.score_plugins] == ["binpack", "nodeorder"]
    assert fw.unimplemented == ["gang"]
    nodes = [QUARTER, THREE_QUARTERS]
    # quarter: binpack cpu 0.5, memory 0.375 -> 43.75; nodeorder 56 + 93
    # three-quarters: binpack cpu 1.0, memory 0.875 -> 93.75; nodeorder 6 + 93
    assert fw.score(POD, nodes) == pytest.approx([43.75 + 149.0, 93.75 + 99.0])
    for index, state in enumerate(nodes):
        assert fw.score(POD, nodes)[index] == pytest.approx(
            sum(plugin.score(POD, state) for plugin in fw.score_plugins)
        )


def test_framework_honours_enable_node_order() -> None:
    fw = framework(
        "- plugins:\n  - name: binpack\n    enableNodeOrder: false\n  - name: nodeorder\n"
    )
    assert [p.name for p in fw.score_plugins] == ["nodeorder"]
    assert fw.score(POD, [QUARTER]) == [149.0]


def test_framework_plugin_listed_twice_counts_twice_with_the_last_arguments() -> None:
    # Volcano keys plugin instances by name (last entry wins) but walks every tier entry.
    fw = framework(
        "- plugins:\n  - name: binpack\n- plugins:\n  - name: binpack\n"
        "    arguments: {binpack.weight: 2}\n"
    )
    assert fw.score(POD, [QUARTER]) == pytest.approx([2 * 2 * 43.75])


def test_framework_without_score_plugins_scores_zero() -> None:
    fw = framework("- plugins:\n  - name: gang\n  - name: proportion\n")
    assert fw.score_plugins == []
    assert fw.score(POD, [EMPTY, HALF]) == [0.0, 0.0]
    assert fw.extender_scores(POD, [EMPTY, HALF]) == [0, 0]


def test_framework_uses_a_plain_score_plugin_through_the_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class CpuFree:
        name = "cpufree"

        def __init__(self, arguments: dict[str, Any]) -> None:
            self.factor = int(arguments.get("factor", 1))

        def score(self, request: ResourceVector, node: NodeState) -> float:
            return float(node.allocatable.cpu - node.requested.cpu) * self.factor

    monkeypatch.setitem(registry.PLUGINS, "tdm", CpuFree)
    fw = framework("- plugins:\n  - name: tdm\n    arguments: {factor: 2}\n")
    assert fw.score(POD, [QUARTER, HALF]) == [6000.0, 4000.0]
    assert fw.extender_scores(POD, [QUARTER, HALF]) == [10, 7]


# ------------------------------------------------------------------------- extender scores


def test_extender_scores_are_ints_relative_to_the_best() -> None:
    fw = framework("- plugins:\n  - name: nodeorder\n    arguments: {balancedresource.weight: 0}\n")
    nodes = [QUARTER, THREE_QUARTERS, EMPTY]
    assert fw.score(POD, nodes) == [56.0, 6.0, 81.0]
    # 10 x 56/81 = 6.9 -> 7; 10 x 6/81 = 0.74 -> 1; the best gets 10.
    scores = fw.extender_scores(POD, nodes)
    assert scores == [7, 1, 10]
    assert all(type(score) is int for score in scores)


def test_extender_scores_round_halves_up() -> None:
    fw = framework("- plugins:\n  - name: binpack\n")
    cpu_only = vec(1000, 0)
    full = node("full", vec(1000, 8), vec(0, 0))  # cpu 1000/1000 -> 100
    roomy = node("roomy", vec(4000, 8), vec(0, 0))  # cpu 1000/4000 -> 25
    assert fw.score(cpu_only, [full, roomy]) == [100.0, 25.0]
    assert fw.extender_scores(cpu_only, [full, roomy]) == [10, 3]  # 2.5 -> 3


def test_extender_scores_all_zero_and_negative_stay_zero() -> None:
    binpack = framework("- plugins:\n  - name: binpack\n")
    too_big = vec(16000, 1)
    nothing_fits = binpack.extender_scores(too_big, [EMPTY, HALF])
    assert nothing_fits == [0, 0]
    assert all(type(score) is int for score in nothing_fits)
    spreading = framework("- plugins:\n  - name: binpack\n    arguments: {binpack.weight: -1}\n")
    assert spreading.score(POD, [EMPTY, HALF]) == pytest.approx([-18.75, -68.75])
    assert spreading.extender_scores(POD, [EMPTY, HALF]) == [0, 0]
    assert binpack.extender_scores(POD, []) == []


def test_default_configuration_scores() -> None:
    default = Framework(default_config())
    assert [p.name for p in default.score_plugins] == ["nodeorder", "binpack"]
    lopsided = node("lopsided", ALLOC, vec(3000, 1))
    # empty: least 81 + balanced (0.25 vs 0.125 -> std 0.0625 -> 93) + binpack 18.75
    # half: least (25x50 + 37x50)/100 = 31 + balanced (0.75 vs 0.625 -> 93) + binpack 68.75
    # lopsided: least (0 + 75)/2 = 37 + balanced (1.0 vs 0.25 -> std 0.375 -> 62) + binpack 62.5
    # With equal weights binpack and least-requested cancel out (up to integer truncation), so
    # Volcano's default ordering is decided by the balance of the node.
    assert default.score(POD, [EMPTY, HALF, lopsided]) == pytest.approx([192.75, 192.75, 161.5])
    # 10 x 161.5 / 192.75 = 8.38 -> 8
    assert default.extender_scores(POD, [EMPTY, HALF, lopsided]) == [10, 10, 8]
