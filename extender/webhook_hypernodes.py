"""Volcano's `/hypernodes/validate` (CREATE, UPDATE): the rules of
`core.api.validation_hypernode` against the HyperNodes the webhook view informs and the nodes
of the extender's cache. Members that select nothing are admitted with a warning (kubectl
prints it), since nodes and HyperNodes may be created after the HyperNode naming them."""

from __future__ import annotations

from typing import Any

from core.api.errors import FieldError
from core.api.topology import HyperNode
from core.api.validation import ClusterView, validate_hypernode
from core.api.validation_hypernode import unmatched_members


def review_hypernode(hypernode: HyperNode, view: ClusterView) -> tuple[list[FieldError], list[str]]:
    """(errors that refuse the write, warnings for an admitted one)."""
    errors = validate_hypernode(hypernode, view)
    if errors:
        return errors, []
    labels = view.node_labels if view.node_labels is not None else {}
    warnings = [
        f"{path}: selects no {'node' if _is_node(hypernode, path) else 'HyperNode'} yet"
        for path in unmatched_members(hypernode, labels, view.hypernodes)
    ]
    return [], warnings


def _is_node(hypernode: HyperNode, path: str) -> bool:
    index = int(path.rsplit("[", 1)[1].rstrip("]"))
    return (hypernode.spec.members or [])[index].type == "Node"


def others(hypernodes: dict[str, Any], name: str) -> dict[str, HyperNode]:
    """The informed HyperNodes except the one under review (its new spec replaces it)."""
    return {k: v for k, v in hypernodes.items() if k != name}
