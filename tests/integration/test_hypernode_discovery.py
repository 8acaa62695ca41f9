"""The hypernode-controller against the embedded API server, with Volcano's documented label
configuration: labelling nodes creates HyperNodes, relabelling changes them, unlabelling and
removing nodes deletes them; HyperNodes it did not make are left alone."""

from __future__ import annotations

from typing import Any

from core.kube.client import HYPERNODES, NODES, KubeClient
from tests.integration.controller_harness import events_about, eventually, running
from topology_controller.config import parse
from topology_controller.controllers import HYPERNODE_CONTROLLER
from topology_controller.discovery import SOURCE_LABEL

CONF = """
networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        topologyA3:
          - nodeLabel: "volcano.sh/hypercluster"
          - nodeLabel: "volcano.sh/hypernode"
          - nodeLabel: "kubernetes.io/hostname"
"""
TOR, CLUSTER = "volcano.sh/hypernode", "volcano.sh/hypercluster"


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}}


async def tree(client: KubeClient) -> dict[tuple[int, str], dict[str, Any]]:
    """(tier, label value) -> HyperNode, for the discovered ones."""
    items = (await client.list(HYPERNODES, labelSelector=f"{SOURCE_LABEL}=label"))["items"]
    out = {}
    for item in items:
        key = item["spec"]["tierName"]
        out[(item["spec"]["tier"], item["metadata"]["labels"][key])] = item
    return out


def members(hypernode: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["type"], m["selector"]["exactMatch"]["name"]) for m in hypernode["spec"]["members"]]


async def test_labelling_nodes_creates_changes_and_deletes_hypernodes() -> None:
    config = parse(CONF)
    async with running([HYPERNODE_CONTROLLER], discovery=config) as (client, _):
        manual = {
            "metadata": {"name": "manual"},
            "spec": {
                "tier": 1,
                "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": ".*"}}}],
            },
        }
        await client.create(HYPERNODES, manual)
        for i in range(4):
            labels = {TOR: f"s{i // 2}", CLUSTER: "s4"}
            await client.create(NODES, node(f"node{i}", labels))

        async def built() -> dict[tuple[int, str], dict[str, Any]] | None:
            found = await tree(client)
            ok = sorted(found) == [(1, "s0"), (1, "s1"), (2, "s4")]
            return (
                found if ok and found[(2, "s4")].get("status", {}).get("nodeCount") == 4 else None
            )

        found = await eventually(built)
        s0, s1, s4 = found[(1, "s0")], found[(1, "s1")], found[(2, "s4")]
        assert s0["metadata"]["name"].startswith("hypernode-topologya3-tier1-")
        assert s4["metadata"]["name"].startswith("hypernode-topologya3-tier2-")
        assert members(s0) == [("Node", "node0"), ("Node", "node1")]
        assert s0["spec"]["tierName"] == TOR
        assert members(s4) == sorted(
            [("HyperNode", s0["metadata"]["name"]), ("HyperNode", s1["metadata"]["name"])]
        )

        # node1 moves to tor s1: s0 loses it, s1 gains it, names stay.
        await client.patch(NODES, "node1", {"metadata": {"labels": {TOR: "s1"}}})

        async def moved() -> bool:
            now = await tree(client)
            return (
                members(now[(1, "s0")]) == [("Node", "node0")]
                and members(now[(1, "s1")]) == [("Node", n) for n in ("node1", "node2", "node3")]
                and now[(1, "s1")]["metadata"]["name"] == s1["metadata"]["name"]
            )

        await eventually(moved)

        # node0 loses its tor label and the other nodes leave: everything discovered goes.
        await client.patch(NODES, "node0", {"metadata": {"labels": {TOR: None}}})
        for i in (1, 2, 3):
            await client.delete(NODES, f"node{i}")

        async def emptied() -> bool:
            return await tree(client) == {}

        await eventually(emptied)
        assert (await client.get(HYPERNODES, "manual"))["spec"]["tier"] == 1


async def test_every_hypernode_gets_its_node_count_and_unmatched_members_are_reported() -> None:
    def exact(kind: str, name: str) -> dict[str, Any]:
        return {"type": kind, "selector": {"exactMatch": {"name": name}}}

    async with running([HYPERNODE_CONTROLLER]) as (client, _):
        await client.create(NODES, node("node-a", {}))
        tor = {
            "metadata": {"name": "tor"},
            "spec": {"tier": 1, "members": [exact("Node", "node-a"), exact("Node", "ghost")]},
        }
        spine = {
            "metadata": {"name": "spine"},
            "spec": {"tier": 2, "members": [exact("HyperNode", "tor")]},
        }
        await client.create(HYPERNODES, tor)
        await client.create(HYPERNODES, spine)

        async def counts() -> dict[str, int | None]:
            items = (await client.list(HYPERNODES))["items"]
            return {h["metadata"]["name"]: h.get("status", {}).get("nodeCount") for h in items}

        await eventually(lambda: _equal(counts(), {"tor": 1, "spine": 1}))
        warned = await eventually(lambda: events_about(client, "tor"))
        assert [(e["reason"], e["note"]) for e in warned] == [
            ("MembersUnmatched", "spec.members[1] select no node or HyperNode yet")
        ]
        await client.create(NODES, node("ghost", {}))
        await eventually(lambda: _equal(counts(), {"tor": 2, "spine": 2}))


async def _equal(value: Any, expected: Any) -> bool:
    return await value == expected
