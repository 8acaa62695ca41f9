"""What node scoring reads of one candidate node (its own module: the framework and each
scoring plugin use it, and the framework builds the plugins)."""

from __future__ import annotations

from dataclasses import dataclass

from core.resources import ResourceVector


@dataclass(slots=True, frozen=True)
class NodeState:
    """What scoring needs to know about one candidate node.

    `requested` is everything already on or reserved for the node (the extender's cache plus its
    reservations), NOT including the pod being scored: plugins add the pod's request themselves.
    """

    name: str
    allocatable: ResourceVector
    requested: ResourceVector
