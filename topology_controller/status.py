"""The hypernode-controller's status part, for every HyperNode (discovered or written by hand),
as Volcano's controller keeps `status.nodeCount`: here the number of nodes below the HyperNode
(through its member HyperNodes; Volcano counts the names its own selectors match). Members
that select nothing (allowed: nodes may join later) are reported with a Warning event
`MembersUnmatched` when that set changes."""

from __future__ import annotations

import logging

from core.api.topology_members import nodes_below
from core.api.validation_hypernode import unmatched_members
from core.controller.runtime import Builder, ObjectRef
from core.kube.client import HYPERNODES, NODES, ApiError, KubeClient
from core.kube.events import EventRecorder
from core.records.topology import HyperNodeRecord
from topology_controller.controller import NodeLabels

log = logging.getLogger("vulcan.controllers.hypernode")

HYPERNODE_STATUS = "hypernode-controller"


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
