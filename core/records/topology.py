"""The HyperNode record (`topology.volcano.sh/v1alpha1`): the whole spec, decoded once (a
HyperNode that does not decode is kept as None: placement and the status writer skip it, as
admission would have refused it)."""

from __future__ import annotations

from typing import Any

from core.api.topology import HyperNode

__all__ = ["HyperNodeRecord"]


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
