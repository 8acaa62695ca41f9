"""The pod webhook (`/pods/mutate`, CREATE): a member of a gang that waits for its queue is
created behind the queue-allocation gate, as the job controller creates a Volcano Job's pods.

kube-scheduler tries a pod the extender refuses again on every cluster event (an extender's
refusal has no queueing hint), so a backlog of waiting gangs keeps its queue full and delays the
members of admitted gangs behind them. A gated pod is not tried at all; the extender lifts the
gate with the admission stamp when the gang is admitted (`extender.gang_writer.admit_pod`), and
from members that come to an admitted gang later (`extender.member_release`).

Only pods vulcan schedules and whose PodGroup is not running yet (unknown, Pending or Inqueue:
enqueued is not yet placed) are gated; a member gated while its gang was being admitted loses
the gate with the gang's other late members. The webhook's configuration sends only pods that
name a PodGroup and ignores failures (`extender.webhook_configs`): a pod is never refused, nor
delayed long, because vulcan is down.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from core.api import keys
from core.records import PodGroupRecord, PodRecord

__all__ = ["gate_patch", "gated_pods"]

# PodGroup phases before its gang runs: a group in any other phase was placed.
WAITING_PHASES = frozenset({"", "Pending", "Inqueue"})


def gated_pods(
    served: Callable[[PodRecord], bool], bind_marker: str | None
) -> Callable[[PodRecord], bool]:
    """The pods a waiting gang's members are gated among: vulcan's (`served`) and, where the
    bind entry takes only pods with `bind_marker`, those carrying it. One without it is refused
    at filter with the fix in words (`core.api.markers.unmarked_member`), which it would never
    reach gated, its gang never admitted."""
    if not bind_marker:
        return served
    return lambda pod: served(pod) and bind_marker in pod.markers


def gate_patch(
    obj: dict[str, Any],
    namespace: str,
    served: Callable[[PodRecord], bool],
    podgroups: Mapping[str, PodGroupRecord],
) -> list[dict[str, Any]]:
    """The JSONPatch that adds the queue-allocation gate to the pod `obj` being created in
    `namespace`, or [] when it is not gated (not vulcan's, in no group, its group admitted,
    already gated)."""
    meta = obj.get("metadata")
    spec = obj.get("spec")
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return []
    # A pod named by generateName has no name yet; only its group and scheduler matter here.
    named = {
        **meta,
        "name": meta.get("name") or meta.get("generateName") or "",
        "namespace": namespace,
    }
    pod = PodRecord({**obj, "metadata": named})
    if pod.group is None or pod.node is not None or not served(pod):
        return []
    group = podgroups.get(pod.group)
    if group is not None and group.phase not in WAITING_PHASES:
        return []
    gates = spec.get("schedulingGates")
    gate = {"name": keys.QUEUE_ALLOCATION_GATE}
    if not isinstance(gates, list) or not gates:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}, _grouped(meta)]
    if any(isinstance(g, dict) and g.get("name") == keys.QUEUE_ALLOCATION_GATE for g in gates):
        return []
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}, _grouped(meta)]


def _grouped(meta: dict[str, Any]) -> dict[str, Any]:
    """The label that keeps the member out of the PodGroup controller's pod watch (every version
    of it would cross the wire once more, for a controller with nothing to do for it)."""
    labels = meta.get("labels")
    if not isinstance(labels, dict) or not labels:
        return {"op": "add", "path": "/metadata/labels", "value": {keys.GROUPED: "true"}}
    path = "/metadata/labels/" + keys.GROUPED.replace("~", "~0").replace("/", "~1")
    return {"op": "add", "path": path, "value": "true"}
