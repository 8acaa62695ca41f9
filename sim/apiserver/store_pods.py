"""The pod subresources the embedded API server implements on top of its `Store`: binding (what
a scheduler POSTs to assign a pod to a node) and eviction (a delete guarded by
PodDisruptionBudgets).

Separate from the store because they are REST endpoints of one resource written in terms of
the store's operations, not part of the generic storage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sim.apiserver import errors
from sim.apiserver.objects import pod_is_terminal
from sim.apiserver.registry import ResourceType
from sim.apiserver.store_collection import MODIFIED
from sim.apiserver.store_core import check_uid, now_rfc3339

if TYPE_CHECKING:
    from sim.apiserver.store import Store

# ------------------------------------------------------------------------ pod subresources


def bind_pod(
    store: Store, rtype: ResourceType, namespace: str, name: str, binding: dict[str, Any]
) -> None:
    """POST pods/NAME/binding: assign the pod to a node, as the real Binding REST does: UID
    precondition, 409 when already assigned, the Binding's annotations copied onto the pod and
    the PodScheduled condition set."""
    if not isinstance(binding, dict):
        raise errors.bad_request("the body of the request was not a JSON object")
    target = binding.get("target") or {}
    node = target.get("name") if isinstance(target, dict) else None
    if not node:
        raise errors.invalid(
            "Binding",
            name,
            "",
            [{"reason": "FieldValueRequired", "field": "target.name", "message": "Required value"}],
        )
    stored = store.get(rtype, namespace, name)
    meta = binding.get("metadata") or {}
    pod = stored.decode()
    check_uid(rtype, name, meta.get("uid"), stored)
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.conflict(
            rtype.plural, name, rtype.group, "pod is being deleted, cannot be assigned to a host"
        )
    current = (pod.get("spec") or {}).get("nodeName")
    if current:
        raise errors.conflict(
            rtype.plural, name, rtype.group, f'pod {name} is already assigned to node "{current}"'
        )
    pod.setdefault("spec", {})["nodeName"] = node
    annotations = meta.get("annotations")
    if annotations:
        pod["metadata"]["annotations"] = {
            **(pod["metadata"].get("annotations") or {}),
            **annotations,
        }
    status = pod.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
    )
    status["conditions"] = conditions
    store._put(rtype, pod, MODIFIED, stored)


def evict_pod(
    store: Store,
    rtype: ResourceType,
    namespace: str,
    name: str,
    eviction: dict[str, Any],
    pdb_allows: Callable[[dict[str, Any]], str | None],
) -> None:
    """POST pods/NAME/eviction: refused with 429 when a PodDisruptionBudget forbids it, else
    the pod is deleted with the eviction's delete options."""
    stored = store.get(rtype, namespace, name)
    pod = stored.decode()
    if not pod_is_terminal(pod):
        blocked_by = pdb_allows(pod)
        if blocked_by is not None:
            raise errors.ApiError(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                causes=[
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {blocked_by} needs more healthy pods",
                    }
                ],
            )
    options = (eviction or {}).get("deleteOptions") or {}
    preconditions = options.get("preconditions") or {}
    if not pod_is_terminal(pod) and not preconditions.get("resourceVersion"):
        # As kube-apiserver does (PodDisruptionConditions, GA since 1.31): the pod says why
        # it goes before it is deleted, so whoever watches it can tell an eviction.
        status = pod.setdefault("status", {})
        conditions = [
            c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"
        ]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
                "lastTransitionTime": now_rfc3339(),
            }
        )
        status["conditions"] = conditions
        store._put(rtype, pod, MODIFIED, stored)
    store.delete(
        rtype,
        namespace,
        name,
        grace_period=options.get("gracePeriodSeconds"),
        preconditions=options.get("preconditions"),
    )
