"""The PodGroup record: what the scheduler admits on and what the controllers keep current."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.api import keys
from core.records.common import NO_LABELS, OwnerRef, controller_of, owner_refs, resources

# ResourceQuota names that Volcano's controllers write into a PodGroup's minResources besides
# the resource names (a pod's quota usage: `count/pods`, `requests.cpu`, `limits.memory`,
# ...). Volcano's scheduler reads only resource names, and so does vulcan.
_QUOTA_ONLY_PREFIXES = ("requests.", "limits.", "count/")
_MARKERS = keys.MARKER_RESOURCE_GROUP + "/"  # routing markers, no capacity


def _scheduling_names(resource_list: Any) -> Any:
    if not isinstance(resource_list, Mapping):
        return resource_list
    return {
        k: v
        for k, v in resource_list.items()
        if not k.startswith(_QUOTA_ONLY_PREFIXES) and not k.startswith(_MARKERS)
    }


class PodGroupRecord:
    # PodGroups are few (one per job): the spec is kept whole for the controllers' diffs.
    __slots__ = (
        "annotations",
        "created",
        "job_owned",
        "key",
        "labels",
        "min_member",
        "min_resources",
        "min_task_member",
        "name",
        "namespace",
        "network_topology",
        "owner",
        "phase",
        "priority_class",
        "queue",
        "rv",
        "spec",
        "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        self.annotations: dict[str, str] = meta.get("annotations") or NO_LABELS
        self.labels: dict[str, str] = meta.get("labels") or NO_LABELS
        self.created: str = meta.get("creationTimestamp", "")
        self.spec: dict[str, Any] = spec
        self.min_member = int(spec.get("minMember") or 0)
        self.min_task_member: dict[str, int] = dict(spec.get("minTaskMember") or {})
        # The scheduler's vector of resource names (quota-only names dropped); the controllers
        # compare the raw list, `spec["minResources"]`.
        self.min_resources = resources(_scheduling_names(spec.get("minResources")))
        self.queue: str = spec.get("queue") or keys.DEFAULT_QUEUE
        self.priority_class: str = spec.get("priorityClassName") or ""
        self.network_topology: dict[str, Any] | None = spec.get("networkTopology")
        self.phase: str = (obj.get("status") or {}).get("phase") or "Pending"
        self.owner: OwnerRef | None = controller_of(owner_refs(meta))
        # Made by Volcano's job controller for a vcjob, whose pods exist only once it is Inqueue.
        self.job_owned = (
            self.owner is not None
            and self.owner.kind == "Job"
            and self.owner.api_version.startswith("batch.volcano.sh/")
        )
