"""Whether a pod carries one of vulcan's routing markers (core.api.keys.MARKERS), read as
kube-scheduler reads an extender entry's `managedResources`: the name among the requests or the
limits of any container or init container (HTTPExtender.IsInterested)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def _resource_names(spec: Mapping[str, Any] | None) -> Iterator[str]:
    """Every resource name among the requests and limits of the pod's containers and init
    containers."""
    if not spec:
        return
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            for part in ("requests", "limits"):
                amounts = resources.get(part)
                if isinstance(amounts, Mapping):
                    yield from (name for name in amounts if isinstance(name, str))


def carries(spec: Mapping[str, Any] | None, name: str) -> bool:
    """Whether kube-scheduler sends this pod to an extender entry whose managedResources is
    `name`."""
    return any(found == name for found in _resource_names(spec))


_NONE: frozenset[str] = frozenset()


def carried(spec: Mapping[str, Any] | None, group: str) -> frozenset[str]:
    """The resource names of `group` (e.g. vulcan's domain) the pod carries: its markers."""
    prefix = f"{group}/"
    found = frozenset(name for name in _resource_names(spec) if name.startswith(prefix))
    return found if found else _NONE


def unmarked_member(
    group: str, min_member: int, pod: str, carries: bool, marker: str
) -> str | None:
    """Why a member of a gang that needs the bind barrier may not be placed: with the bind
    entry restricted to `marker`, a member without it would be bound by kube-scheduler itself
    the moment it is placed, and its gang could end up half bound. The extender refuses it on
    every node and does not admit its gang, until the pod is made again with the marker
    (limits are fixed at creation). None when the pod may go on (marked, or no barrier
    needed: minMember 1)."""
    if min_member <= 1 or carries:
        return None
    return (
        f"gang {group} (minMember {min_member}): pod {pod} lacks the bind "
        f"marker {marker}, so kube-scheduler would bind it without vulcan's gang barrier "
        f"(its bind extender entry takes only pods with that marker); create the pod again "
        f"with resources.limits {{{marker}: 1}} in its first container (vulcan's job "
        f"controller adds it to the pods of Volcano Jobs)"
    )
