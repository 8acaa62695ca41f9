"""The HyperNodes the cluster cache keeps (`core.cache.ClusterCache.topology`): the informed
records, and the tree built from them and the nodes' labels (`core.hypernode_tree`), built
again only when read after a HyperNode, a node's labels or the node set changed."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from core.hypernode_tree import EMPTY_TREE, HyperNodeTree, build_tree
from core.records import NodeRecord
from core.records.topology import HyperNodeRecord

__all__ = ["TopologyBook"]


class TopologyBook:
    def __init__(self, nodes: Mapping[str, NodeRecord], changed: Callable[[], None]) -> None:
        self.records: dict[str, HyperNodeRecord] = {}
        # False from `listing` until their informer has listed them (a cache fed by hand, as
        # `vulcan explain` does, has every HyperNode it will get).
        self.ready = True
        self._nodes = nodes
        self._changed = changed  # the cache's: moves the topology epoch, wakes the pass
        self._tree: HyperNodeTree | None = None

    def tree(self) -> HyperNodeTree:
        if self._tree is None:
            if not self.records:
                self._tree = EMPTY_TREE if self.ready else HyperNodeTree(ready=False)
            else:
                specs = {k: r.hypernode for k, r in self.records.items() if r.hypernode}
                labels = {name: node.labels for name, node in self._nodes.items()}
                self._tree = build_tree(specs, labels, ready=self.ready)
        return self._tree

    def nodes_changed(self) -> None:
        """A node came, went or was labelled anew: the tree's node sets may move."""
        if self.records:
            self._stale()

    def set(self, record: HyperNodeRecord) -> None:
        self.records[record.key] = record
        self._stale()

    def delete(self, record: HyperNodeRecord) -> None:
        self.records.pop(record.key, None)
        self._stale()

    def listing(self) -> None:
        self.ready = False
        self._stale()

    def synced(self) -> None:
        self.ready = True
        self._stale()

    def _stale(self) -> None:
        self._tree = None
        self._changed()
