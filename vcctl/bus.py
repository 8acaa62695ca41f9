"""bus.volcano.sh/v1alpha1 Commands, made as Volcano's vcctl makes them
(`pkg/cli/util.CreateJobCommand`, `pkg/cli/queue/util.go`).

A Command names its target twice: as `target` and as the controller ownerReference, both
`metav1.NewControllerRef(obj, kind)` (controller and blockOwnerDeletion true), so a Command the
controller never consumed goes away with its target. Its name is generated:
`<target>-<action lowercased>-` plus the API server's suffix.
"""

from __future__ import annotations

from typing import Any

from core.kube.client import COMMANDS, KubeClient, Resource
from vcctl.kube import call
from vcctl.output import meta

# Volcano creates queue Commands in `default` (the Queue itself has no namespace).
QUEUE_COMMAND_NAMESPACE = "default"


def controller_ref(obj: dict[str, Any], resource: Resource) -> dict[str, Any]:
    """metav1.NewControllerRef(obj, gvk)."""
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": meta(obj).get("name", ""),
        "uid": meta(obj).get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def command_for(obj: dict[str, Any], resource: Resource, action: str) -> dict[str, Any]:
    ref = controller_ref(obj, resource)
    metadata: dict[str, Any] = {
        "generateName": f"{ref['name']}-{action.lower()}-",
        "ownerReferences": [ref],
    }
    if meta(obj).get("namespace"):
        metadata["namespace"] = meta(obj)["namespace"]
    return {
        "apiVersion": COMMANDS.api_version,
        "kind": COMMANDS.kind,
        "metadata": metadata,
        "target": dict(ref),
        "action": action,
    }


async def issue(
    client: KubeClient, obj: dict[str, Any], resource: Resource, action: str, namespace: str
) -> dict[str, Any]:
    """Create the Command for `action` on `obj` in `namespace`; returns the created object."""
    return await call(
        client, client.create(COMMANDS, command_for(obj, resource, action), namespace)
    )
