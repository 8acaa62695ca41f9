"""Whether a pod carries one of vulcan's routing markers (core.api.keys.MARKERS), read as
kube-scheduler reads an extender entry's `managedResources`: the name among the requests or the
limits of any container or init container (HTTPExtender.IsInterested)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def carries(spec: Mapping[str, Any] | None, name: str) -> bool:
    """Whether kube-scheduler sends this pod to an extender entry whose managedResources is
    `name`."""
    if not spec:
        return False
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            for part in ("requests", "limits"):
                amounts = resources.get(part)
                if isinstance(amounts, Mapping) and name in amounts:
                    return True
    return False
