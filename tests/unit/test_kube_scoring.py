"""plugins.framework.kube_scoring: the conf's node order as kube-scheduler's scoring, and what
vulcan's profile needs for a conf (issue 37).

The numeric test scores random nodes both ways: kube-scheduler's sum with the rendered weights
(LeastAllocated with the rendered resource weights, BalancedAllocation), and what the rendering
stands for, kube-scheduler's default LeastAllocated + BalancedAllocation plus the conf's node
order (vulcan's own Framework) at the fixed scale 100 / top. The two must be one positive
multiple of each other up to kube-scheduler's integer truncation."""

from __future__ import annotations

import random

import pytest

from core.resources import ResourceVector
from plugins.builtin.nodeorder import NodeOrderPlugin
from plugins.framework.config import default_config, parse_scheduler_config
from plugins.framework.kube_scoring import (
    KubeScoring,
    NotExpressible,
    plan_profile,
    render_node_order,
    scheduler_profile,
    without_prioritize,
)
from plugins.framework.node_order import Framework
from plugins.model.node_state import NodeState


def conf(*plugins: str) -> str:
    return "actions: allocate\ntiers:\n- plugins:\n" + "".join(
        f"  - {plugin}\n" for plugin in plugins
    )


# kube-scheduler up to 1.35 scores the balance after the pod, as Volcano does.
OLD_BALANCE = (1, 35)


def rendered(text: str, version: tuple[int, int] = OLD_BALANCE) -> KubeScoring | NotExpressible:
    return render_node_order(parse_scheduler_config(text), version)


def test_the_default_conf_renders_least_allocated_2_and_balance_3_up_to_kube_1_35() -> None:
    # leastrequested 1 + binpack 1 cancel; the balance counts 1 + 1/2 (the conf's share at its
    # top score 200) against LeastAllocated's 1: ×2 for integers, the other plugins with them.
    result = render_node_order(default_config(), OLD_BALANCE)
    assert isinstance(result, KubeScoring)
    assert result.weights == {
        "TaintToleration": 6,
        "NodeAffinity": 4,
        "NodeResourcesFit": 2,
        "PodTopologySpread": 4,
        "InterPodAffinity": 4,
        "NodeResourcesBalancedAllocation": 3,
        "ImageLocality": 2,
    }
    assert result.fit_resources == {"cpu": 1, "memory": 1}
    assert not result.exact


def test_from_kube_1_36_the_balance_term_is_not_expressible() -> None:
    # BalancedAllocation scores the change in balance there (k/k#135573).
    result = render_node_order(default_config(), (1, 36))
    assert isinstance(result, NotExpressible)
    assert "balancedresource.weight is 1" in result.reason
    assert "change in balance" in result.reason
    without = rendered(
        conf(
            "name: nodeorder\n    arguments:\n      leastrequested.weight: 2\n"
            "      balancedresource.weight: 0",
            "name: binpack",
        ),
        (1, 36),
    )
    assert isinstance(without, KubeScoring)


def test_with_the_gang_plugin_the_profile_needs_neither_prioritize_nor_scoring() -> None:
    plan = plan_profile(default_config())
    assert not plan.prioritize and plan.scoring is None
    assert "narrows each to the one node" in plan.why


def test_without_the_gang_plugin_the_plan_renders_or_keeps_prioritize() -> None:
    kept = plan_profile(parse_scheduler_config(conf("name: nodeorder")), (1, 36))
    assert kept.prioritize and kept.scoring is None
    assert "change in balance" in kept.why
    text = conf("name: nodeorder\n    arguments: {balancedresource.weight: 0}")
    dropped = plan_profile(parse_scheduler_config(text), (1, 36))
    assert not dropped.prioritize and dropped.scoring is not None
    assert dropped.scoring.weights["NodeResourcesFit"] == 2  # kube's 1 + the conf's 1 at scale 1
    assert dropped.scoring.weights["NodeResourcesBalancedAllocation"] == 1


def test_a_conf_whose_order_points_like_kube_defaults_is_exact() -> None:
    result = rendered(conf("name: nodeorder"))  # leastrequested 1, balancedresource 1
    assert isinstance(result, KubeScoring)
    assert result.exact
    assert result.weights["NodeResourcesFit"] == result.weights["NodeResourcesBalancedAllocation"]


def test_a_conf_without_node_order_keeps_kube_weights() -> None:
    result = rendered(conf("name: gang", "name: predicates"))
    assert isinstance(result, KubeScoring)
    assert result.exact
    assert result.weights["NodeResourcesFit"] == 1
    assert result.weights["TaintToleration"] == 3


@pytest.mark.parametrize(
    ("plugins", "words"),
    [
        (("name: binpack",), "packs on cpu"),
        (("name: nodeorder\n    arguments: {mostrequested.weight: 2}",), "packs on cpu"),
        (
            (
                "name: nodeorder",
                "name: binpack\n    arguments: {binpack.cpu: 3, binpack.memory: 1}",
            ),
            "packs on cpu",
        ),
        (("name: nodeorder\n    arguments: {leastrequested.weight: -1}",), "negative"),
        (
            (
                "name: nodeorder\n    arguments: {leastrequested.weight: 3}",
                "name: binpack\n    arguments: {binpack.resources: nvidia.com/gpu}",
            ),
            "nvidia.com/gpu",
        ),
    ],
)
def test_what_kube_scheduler_cannot_express_says_why(plugins: tuple[str, ...], words: str) -> None:
    result = rendered(conf(*plugins))
    assert isinstance(result, NotExpressible)
    assert words in result.reason


def test_unequal_binpack_weights_become_least_allocated_resource_weights() -> None:
    result = rendered(
        conf(
            "name: nodeorder\n    arguments: {leastrequested.weight: 2}",
            "name: binpack\n    arguments: {binpack.cpu: 3, binpack.memory: 1}",
        )
    )
    assert isinstance(result, KubeScoring)
    # binpack pulls cpu harder towards full nodes, so cpu spreads less than memory.
    assert result.fit_resources["cpu"] < result.fit_resources["memory"]


def _least_allocated(node: NodeState, request: ResourceVector, weights: dict[str, int]) -> int:
    """kube-scheduler's LeastAllocated with resource weights (integer arithmetic)."""
    total = weight_sum = 0
    for resource, weight in weights.items():
        capacity = node.allocatable.get(resource)
        used = node.requested.get(resource) + request.get(resource)
        if capacity == 0:
            continue
        if used <= capacity:
            total += (capacity - used) * 100 // capacity * weight
        weight_sum += weight
    return total // weight_sum


CONFS = [
    None,  # the default conf
    conf("name: nodeorder"),
    conf("name: nodeorder\n    arguments: {leastrequested.weight: 3}", "name: binpack"),
    conf(
        "name: nodeorder\n    arguments: {leastrequested.weight: 2, balancedresource.weight: 3}",
        "name: binpack\n    arguments: {binpack.cpu: 3, binpack.memory: 1}",
    ),
    conf("name: nodeorder\n    arguments: {leastrequested.weight: 4, mostrequested.weight: 1}"),
]


@pytest.mark.parametrize("text", CONFS)
def test_the_rendered_sum_is_the_default_scoring_plus_the_conf_at_its_top_scale(
    text: str | None,
) -> None:
    config = default_config() if text is None else parse_scheduler_config(text)
    framework = Framework(config)
    # The old balance formula: Volcano's and kube-scheduler's balance are the same function.
    result = render_node_order(framework, OLD_BALANCE)
    assert isinstance(result, KubeScoring)
    least = NodeOrderPlugin({"balancedresource.weight": 0})  # kube's LeastAllocated, weight 1
    balance = NodeOrderPlugin({"leastrequested.weight": 0})  # kube's BalancedAllocation
    top = sum(
        p.least_requested_weight + p.balanced_resource_weight
        for p in framework.score_plugins
        if isinstance(p, NodeOrderPlugin)
    )
    fit_weight = result.weights["NodeResourcesFit"]
    balance_weight = result.weights["NodeResourcesBalancedAllocation"]
    # The rendering's multiple of the stand-for sum: kube's default weights scaled alike.
    multiple = result.weights["TaintToleration"] / 3
    rng = random.Random(37)
    for _ in range(200):
        request = ResourceVector(
            {"cpu": rng.randint(1, 8) * 250, "memory": rng.randint(1, 32) << 28}
        )
        nodes = []
        for index in range(20):
            cpu, memory = rng.choice([(8000, 32 << 30), (16000, 64 << 30), (32000, 256 << 30)])
            used = {"cpu": rng.randint(0, cpu // 2), "memory": rng.randint(0, memory // 2)}
            nodes.append(NodeState(f"n{index}", ResourceVector({"cpu": cpu, "memory": memory}),
                                   ResourceVector(used)))  # fmt: skip
        conf_scores = framework.score(request, nodes)
        differences = []
        for node, conf_score in zip(nodes, conf_scores, strict=True):
            kube = fit_weight * _least_allocated(
                node, request, result.fit_resources
            ) + balance_weight * balance.score(request, node)
            stands_for = least.score(request, node) + balance.score(request, node)
            stands_for += conf_score / top if top else 0
            differences.append(kube - multiple * stands_for)
        # One constant for every node (the orders agree) up to integer truncation: each
        # truncated term is off by < 1 point times its weight.
        slack = 2 * (fit_weight + balance_weight) + multiple * 3
        assert max(differences) - min(differences) <= slack, (text, differences)


def test_the_profile_takes_the_scoring_and_the_extender_drops_prioritize() -> None:
    entry = {"urlPrefix": "http://x/v1", "filterVerb": "filter", "prioritizeVerb": "prioritize",
             "weight": 1, "nodeCacheCapable": True}  # fmt: skip
    text = conf("name: nodeorder\n    arguments: {balancedresource.weight: 0}")
    plan = plan_profile(parse_scheduler_config(text))
    profile, (extender,) = scheduler_profile({"schedulerName": "volcano"}, [entry], plan)
    assert profile["schedulerName"] == "volcano"
    assert profile["pluginConfig"][0]["args"]["scoringStrategy"]["type"] == "LeastAllocated"
    assert extender == without_prioritize(entry)
    assert "prioritizeVerb" not in extender and "weight" not in extender
    assert extender["filterVerb"] == "filter"
    gang = scheduler_profile({"schedulerName": "volcano"}, [entry], plan_profile(default_config()))
    assert gang == ({"schedulerName": "volcano"}, [without_prioritize(entry)])
    kept = plan_profile(parse_scheduler_config(conf("name: nodeorder")))
    assert scheduler_profile({"schedulerName": "volcano"}, [entry], kept) == (
        {"schedulerName": "volcano"},
        [entry],
    )
