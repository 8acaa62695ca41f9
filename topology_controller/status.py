"""The hypernode-controller's status part, for every HyperNode (discovered or written by hand),
as Volcano's controller keeps `status.nodeCount`: here the number of nodes below the HyperNode
(through its member HyperNodes; Volcano counts the names its own selectors match). Members
that select nothing (allowed: nodes may join later) are reported with a Warning event
`MembersUnmatched` when that set changes."""

from __future__ import annotations

import logging
from typing import Any

from core.api.topology import HyperNode
from core.api.topology_members import child_hypernodes, direct_nodes
from core.api.validation_hypernode import unmatched_members
from core.controller.runtime import Builder, ObjectRef
from core.kube.client import HYPERNODES, NODES, ApiError, KubeClient
from core.kube.events import EventRecorder
from topology_controller.controller import NodeLabels

log = logging.getLogger("vulcan.controllers.hypernode")

HYPERNODE_STATUS = "hypernode-controller"


class HyperNodeRecord:
    __slots__ = ("hypernode", "key", "node_count", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key: str = meta["name"]
        self.rv: str = meta.get("resourceVersion", "")
        self.node_count = (obj.get("status") or {}).get("nodeCount")
        self.hypernode: HyperNode | None
        try:
            self.hypernode = HyperNode.model_validate(obj)
        except ValueError:
            self.hypernode = None


def nodes_below(
    name: str,
    hypernodes: dict[str, HyperNode],
    node_labels: dict[str, dict[str, str]],
    seen: frozenset[str] = frozenset(),
) -> set[str]:
    """Every node in `name`'s subtree (a cycle, refused by admission, is cut where it closes)."""
    hypernode = hypernodes.get(name)
    if hypernode is None or name in seen:
        return set()
    out = direct_nodes(hypernode, node_labels)
    for child in child_hypernodes(hypernode, hypernodes):
        out |= nodes_below(child, hypernodes, node_labels, seen | {name})
    return out


class HyperNodeStatusReconciler:
    name = HYPERNODE_STATUS

    def __init__(self, client: KubeClient, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder
        self._unmatched: dict[str, tuple[str, ...]] = {}

    def setup(self, watch: Builder[str]) -> None:
        self.hypernodes = watch.watch(
            HYPERNODES,
            HyperNodeRecord,
            # A HyperNode's count depends on its members' subtrees: any change may move parents.
            on_add=lambda r: list(self.hypernodes.items),
            on_update=lambda old, new: list(self.hypernodes.items),
            on_delete=self._deleted,
        )
        self.nodes = watch.watch(
            NODES,
            NodeLabels,
            on_add=lambda r: list(self.hypernodes.items),
            on_update=lambda old, new: (
                list(self.hypernodes.items) if old.labels != new.labels else None
            ),
            on_delete=lambda r: list(self.hypernodes.items),
        )

    def _deleted(self, record: HyperNodeRecord) -> list[str]:
        self._unmatched.pop(record.key, None)
        return list(self.hypernodes.items)

    def reference(self, key: str) -> ObjectRef | None:
        return HYPERNODES.reference(key)

    def describe(self, key: str) -> str:
        return f"hypernode {key}"

    def given_up(self, key: str, exc: BaseException) -> bool:
        return False

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def reconcile(self, key: str) -> float | None:
        record = self.hypernodes.items.get(key)
        if record is None or record.hypernode is None:
            return None
        hypernodes = {
            k: r.hypernode for k, r in self.hypernodes.items.items() if r.hypernode is not None
        }
        labels = {k: n.labels for k, n in self.nodes.items.items()}
        count = len(nodes_below(key, hypernodes, labels))
        if record.node_count != count:
            try:
                await self.client.patch(
                    HYPERNODES, key, {"status": {"nodeCount": count}}, subresource="status"
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise
        unmatched = tuple(unmatched_members(record.hypernode, labels, hypernodes))
        if unmatched and unmatched != self._unmatched.get(key):
            self.recorder.record(
                HYPERNODES.reference(key),
                "Warning",
                "MembersUnmatched",
                f"{', '.join(unmatched)} select no node or HyperNode yet",
            )
        self._unmatched[key] = unmatched
        return None
