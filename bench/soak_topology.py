"""The soak's topology-constrained work (issue 50): the HyperNode tree over the soak's nodes and
the networkTopology and subgroups given to a share of its gangs, sized to fit a domain.

- The tree: a tier-1 HyperNode per node (`soak-leaf-<i>`: one node, 32 cpu) under tier-2
  HyperNodes of two leaves each (`soak-tor-<j>`: 64 cpu); the cluster itself is tier 3.
- A PodGroup gang or a Volcano Job may get `networkTopology` hard (tier 1 when all its members
  ask at most half a node, tier 2 when at most half of two: room a busy cluster frees) or soft.
- A Job may be partitioned instead: one task of 2 partitions (`partitionPolicy`, both needed),
  each placed within a HyperNode of its own tier, the job within a tier-2 one or anywhere.
- A PodGroup gang of 4 may have two subgroups of 2 (`subGroupPolicy` on label `soak-part`,
  both needed), each within one tier-1 HyperNode, as Kubeflow Trainer's PodGroups are made.

Drawn from a generator of its own per submission (`rng_for`), so turning topology off leaves
the rest of a seed's schedule as it was."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from plugins.framework.config import DEFAULT_SCHEDULER_CONF

# The extender's conf where a networkTopology is honoured: Volcano's default plus the plugin.
TOPOLOGY_CONF = DEFAULT_SCHEDULER_CONF.rstrip() + "\n  - name: network-topology-aware\n"

SUBGROUP_LABEL = "soak-part"
TOR_NODES = 2  # nodes per tier-2 HyperNode
JOB_TTL = 30  # as bench.soak_workload's
SIM_DURATION = "vulcan.sh/sim-duration"
SIM_EXIT_CODE = "vulcan.sh/sim-exit-code"


def rng_for(seed: int, counter: int) -> random.Random:
    return random.Random(seed * 2_000_029 + counter)


def hypernodes(node_names: list[str]) -> list[dict[str, Any]]:
    """The tree over `node_names` (sorted): a leaf per node, a ToR per two leaves."""
    leaves = [f"soak-leaf-{i}" for i in range(len(node_names))]
    out = [
        hypernode_manifest(leaf, 1, [node]) for leaf, node in zip(leaves, node_names, strict=True)
    ]
    for j in range(0, len(leaves), TOR_NODES):
        out.append(
            hypernode_manifest(
                f"soak-tor-{j // TOR_NODES}", 2, leaves[j : j + TOR_NODES], kind="HyperNode"
            )
        )
    return out


def hypernode_manifest(
    name: str, tier: int, members: Sequence[str], kind: str = "Node"
) -> dict[str, Any]:
    """A HyperNode of `tier` whose members are these nodes (or, `kind` HyperNode, these
    HyperNodes) by exact name."""
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def topology_for(rng: random.Random, cpu_total: int, node_cpu: int) -> dict[str, Any] | None:
    """A networkTopology for a gang whose members ask `cpu_total` cpu in all (or None: most
    gangs have none): hard at a tier whose HyperNodes it fills at most half, or soft."""
    roll = rng.random()
    if roll >= 0.45:
        return None
    if roll < 0.12:
        return {"mode": "soft"}
    if cpu_total <= node_cpu // 2 and roll < 0.3:
        return {"mode": "hard", "highestTierAllowed": 1}
    if cpu_total <= node_cpu * TOR_NODES // 2:
        return {"mode": "hard", "highestTierAllowed": 2}
    return {"mode": "soft"}


def with_subgroups(gang: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """A gang of exactly 4 members (minMember 4) given two subgroups of 2, sometimes: each a
    gang of its own within one tier-1 HyperNode."""
    group, *pods = gang
    if len(pods) != 4 or group["spec"]["minMember"] != 4 or rng.random() >= 0.5:
        return gang
    group["spec"]["subGroupPolicy"] = [
        {
            "name": "part",
            "subGroupSize": 2,
            "minSubGroups": 2,
            "matchLabelKeys": [SUBGROUP_LABEL],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        }
    ]
    for index, pod in enumerate(pods):
        pod["metadata"]["labels"][SUBGROUP_LABEL] = str(index // 2)
    return gang


def partitioned_job(rng: random.Random, name: str, queue: str, namespace: str) -> dict[str, Any]:
    """A Volcano Job of one task in 2 partitions of 2-3 (both needed), each within a HyperNode
    of tier 1 or 2; the job within a tier-2 one, or anywhere."""
    size = rng.randint(2, 3)
    cpu = rng.choice((1, 2, 4))
    requests = {"cpu": str(cpu), "memory": "1Gi"}
    partition_tier = 1 if rng.random() < 0.6 else 2
    task = {
        "name": "w",
        "replicas": 2 * size,
        "partitionPolicy": {
            "totalPartitions": 2,
            "partitionSize": size,
            "minPartitions": 2,
            "networkTopology": {"mode": "hard", "highestTierAllowed": partition_tier},
        },
        "template": {
            "metadata": {
                "annotations": {SIM_DURATION: f"{rng.randint(5, 20)}s", SIM_EXIT_CODE: "0"}
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": requests, "limits": requests},
                    }
                ],
            },
        },
    }
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": queue,
        "minAvailable": 2 * size,
        "maxRetry": 2,
        "ttlSecondsAfterFinished": JOB_TTL,
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "tasks": [task],
    }
    if partition_tier == 1 and rng.random() < 0.5:
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
