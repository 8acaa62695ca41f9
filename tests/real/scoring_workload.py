"""The recorded workload of the placement test (test_scoring_placements_real.py), and the
generator that wrote it (tests/real/fixtures/scoring-workload.json):
`python -m tests.real.scoring_workload > tests/real/fixtures/scoring-workload.json`.

Nodes of 16 distinct shapes; two groups, then plain pods of mixed sizes, one pod at a time.
The extender's conf is tests/real/fixtures/scoring-conf.yaml.

kube-scheduler picks at random among equal top scores, so a recorded workload must leave it no
such choice: the generator follows both scorings on a model of the cluster (kube-scheduler's
LeastAllocated and BalancedAllocation (1.36: the change in balance) in its integer arithmetic,
vulcan's own node order and its 0..10 rescale) and draws each pod's size again until, in both,
one node leads the next by at least MARGIN points (one: the top is unique).

It also draws again when the two scorings' leaders differ: that happens only where vulcan's
rounding of its score to kube-scheduler's 0..10 extender range decides, or its rescale against
each pod's best candidate (the rendering fixes that scale). Where they decide, the rendered
scoring wins (plugins.framework.kube_scoring), so those pods cannot be part of a before/after
equality test; the fixture records how many draws each reason rejected (`model_rejected`). The model
only chooses the sizes: the test compares what the real kube-scheduler did with each
configuration.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.resources import ResourceVector
from plugins.framework.config import parse_scheduler_config
from plugins.framework.kube_scoring import KubeScoring, render_node_order
from plugins.framework.node_order import Framework
from plugins.model.node_state import NodeState

CONF = Path(__file__).parent / "fixtures" / "scoring-conf.yaml"
SEED = 37
PLAIN_PODS = 240
MARGIN = 1  # a unique top: totals are integers, and the model is exact (it matched all 240)
GIB = 1 << 30
MIB = 1 << 20
# (cpu cores, memory GiB): 16 distinct shapes, so no two nodes start equal.
SHAPES = [
    (4, 8), (4, 32), (6, 24), (8, 16), (8, 64), (10, 40), (12, 24), (12, 96),
    (16, 32), (16, 64), (20, 48), (24, 96), (24, 192), (32, 64), (32, 128), (40, 160),
]  # fmt: skip
# Two groups before the plain pods (name, members), their members' size drawn as a plain pod's
# (one size per group); the conf has no gang plugin, so each member is placed on its own.
GANGS = [("gang-a", 4), ("gang-b", 3)]


@dataclass
class ModelNode:
    name: str
    cpu: int  # millicores
    memory: int  # bytes
    used_cpu: int = 0
    used_memory: int = 0

    def state(self) -> NodeState:
        return NodeState(
            self.name,
            ResourceVector({"cpu": self.cpu, "memory": self.memory}),
            ResourceVector({"cpu": self.used_cpu, "memory": self.used_memory}),
        )

    def fits(self, cpu: int, memory: int) -> bool:
        return self.used_cpu + cpu <= self.cpu and self.used_memory + memory <= self.memory


def least_allocated(node: ModelNode, cpu: int, memory: int, weights: dict[str, int]) -> int:
    """NodeResourcesFit LeastAllocated, kube-scheduler's integer arithmetic."""
    total = 0
    for resource, capacity, requested in (
        ("cpu", node.cpu, node.used_cpu + cpu),
        ("memory", node.memory, node.used_memory + memory),
    ):
        if requested <= capacity:
            total += (capacity - requested) * 100 // capacity * weights[resource]
    return total // sum(weights.values())


def balance(node: ModelNode, cpu: int, memory: int) -> int:
    """(1 − std of the two fractions) × 100, truncated, with the pod's request added."""
    cpu_fraction = min((node.used_cpu + cpu) / node.cpu, 1.0)
    memory_fraction = min((node.used_memory + memory) / node.memory, 1.0)
    return int((1 - abs((cpu_fraction - memory_fraction) / 2)) * 100)


def balanced(node: ModelNode, cpu: int, memory: int) -> int:
    """NodeResourcesBalancedAllocation of kube-scheduler 1.36 (k/k#135573): the change in
    balance, 50 + (50 + after − before) / 2."""
    return 50 + (50 + balance(node, cpu, memory) - balance(node, 0, 0)) // 2


def scores(
    nodes: list[ModelNode], cpu: int, memory: int, framework: Framework, rendered: KubeScoring
) -> tuple[dict[str, int], dict[str, int]]:
    """Each feasible node's total under the extender's prioritize (before) and the rendered
    profile (after); kube-scheduler's other score plugins add the same to every node here."""
    feasible = [n for n in nodes if n.fits(cpu, memory)]
    request = ResourceVector({"cpu": cpu, "memory": memory})
    extender = Framework.normalize(framework.score(request, [n.state() for n in feasible]))
    even = {"cpu": 1, "memory": 1}
    before = {
        n.name: least_allocated(n, cpu, memory, even) + balanced(n, cpu, memory) + 10 * e
        for n, e in zip(feasible, extender, strict=True)
    }
    fit = rendered.weights["NodeResourcesFit"]
    balance = rendered.weights["NodeResourcesBalancedAllocation"]
    after = {
        n.name: fit * least_allocated(n, cpu, memory, rendered.fit_resources)
        + balance * balanced(n, cpu, memory)
        for n in feasible
    }
    return before, after


def leader(totals: dict[str, int]) -> tuple[str, int]:
    """The top node and its lead over the next (a lone node leads by any margin)."""
    ranked = sorted(totals.items(), key=lambda item: -item[1])
    lead = ranked[0][1] - ranked[1][1] if len(ranked) > 1 else MARGIN
    return ranked[0][0], lead


def generate(seed: int = SEED) -> dict[str, Any]:
    rng = random.Random(seed)
    framework = Framework(parse_scheduler_config(CONF.read_text()))
    rendered = render_node_order(framework)
    assert isinstance(rendered, KubeScoring)
    nodes = [ModelNode(f"shape-{i:02d}", c * 1000, m * GIB) for i, (c, m) in enumerate(SHAPES)]
    pods: list[dict[str, Any]] = []
    rejected = {"no node fits": 0, "near tie": 0, "rounding decides": 0}

    def draw() -> tuple[int, int]:
        size = rng.choice(("small", "medium", "large"))
        if size == "small":
            return rng.randint(1, 5) * 100, rng.randint(2, 16) * 128 * MIB
        if size == "medium":
            return rng.randint(4, 12) * 100, rng.randint(8, 40) * 128 * MIB
        return rng.randint(8, 20) * 100, rng.randint(16, 80) * 128 * MIB

    def decided(cpu: int, memory: int) -> str | None:
        """The node both scorings pick by at least MARGIN, else None (the reason counted)."""
        before, after = scores(nodes, cpu, memory, framework, rendered)
        if not before:
            rejected["no node fits"] += 1
            return None
        (first, lead_before), (second, lead_after) = leader(before), leader(after)
        if lead_before < MARGIN or lead_after < MARGIN:
            rejected["near tie"] += 1
            return None
        if first != second:
            rejected["rounding decides"] += 1
            return None
        return first

    def place(name: str, cpu: int, memory: int) -> None:
        node = next(n for n in nodes if n.name == name)
        node.used_cpu += cpu
        node.used_memory += memory

    gangs = []
    for name, members in GANGS:
        for _ in range(50000):
            cpu, memory = draw()
            saved = [(n.used_cpu, n.used_memory) for n in nodes]
            for _member in range(members):
                chosen = decided(cpu, memory)
                if chosen is None:
                    break
                place(chosen, cpu, memory)
            else:
                break
            for node, (used_cpu, used_memory) in zip(nodes, saved, strict=True):
                node.used_cpu, node.used_memory = used_cpu, used_memory
        else:
            raise SystemExit(f"no size for {name} without a near-tie")
        gangs.append(
            {"name": name, "members": members, "cpu": f"{cpu}m", "memory": f"{memory // MIB}Mi"}
        )
    while len(pods) < PLAIN_PODS:
        for _ in range(500):
            cpu, memory = draw()
            chosen = decided(cpu, memory)
            if chosen is not None:
                break
        else:
            raise SystemExit(f"no pod size without a near-tie after pod {len(pods)}")
        place(chosen, cpu, memory)
        pods.append(
            {"name": f"pod-{len(pods):03d}", "cpu": f"{cpu}m", "memory": f"{memory // MIB}Mi"}
        )
    return {
        "seed": seed,
        "nodes": [{"cpu": str(c), "memory": f"{m}Gi"} for c, m in SHAPES],
        "pods": pods,
        "gangs": gangs,
        "model_rejected": rejected,
        "model_used": {n.name: [n.used_cpu, n.used_memory] for n in nodes},
    }


if __name__ == "__main__":
    json.dump(generate(), sys.stdout, indent=1)
    sys.stdout.write("\n")
