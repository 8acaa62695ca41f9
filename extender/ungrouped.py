"""Pods of vulcan's scheduler that the PodGroup controller has not grouped yet wait.

Volcano's scheduler never places a pod without a PodGroup: its cache files a pod under a job
only by the pod's `scheduling.k8s.io/group-name` annotation (pkg/scheduler/cache
`getOrCreateJob`: no group, no job, nothing to schedule), and its pg controller
(pkg/controllers/podgroup) gives every pod of its schedulerNames that has none a group
(`podgroup-<owner uid>`, minMember from the owner's `scheduling.volcano.sh/group-min-member`)
and the annotation. kube-scheduler, though, pops a pod the moment it is created: passed as a
plain pod, the first members of a Deployment gang were bound before the controller grouped
them (half a gang). So filter refuses such a pod on every node as unresolvable (no preemption
helps a pod that is only waiting for its annotation); the controller's patch is a pod update,
and kube-scheduler moves an unschedulable pod back to its active queue when the pod itself is
updated, so the pod is retried as a gang member right after it is grouped.

The rule reads only the pod in the request (kube-scheduler's view, current to the update that
re-queued it), never the cache or the API server: the hot path stays as cheap as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from core.api import keys
from core.records import pod_group_key
from core.served import ServedPods

REASON = "waiting for its PodGroup (the podgroup controller has not grouped this pod yet)"


def scheduler_names(values: Iterable[str] | None) -> tuple[str, ...]:
    """`--scheduler-name` values (repeatable, comma-separated lists); default `volcano`, the
    podgroup controller's default."""
    names: list[str] = []
    for value in values or (keys.DEFAULT_SCHEDULER_NAME,):
        for name in value.split(","):
            if name.strip() and name.strip() not in names:
                names.append(name.strip())
    return tuple(names) or (keys.DEFAULT_SCHEDULER_NAME,)


def served_pods(args: Any) -> ServedPods:
    """The pods the kube-scheduler profiles that call this extender send it, from the
    extender's flags (`--served-scheduler-name`, else `--scheduler-name`; `--filter-marker`)."""
    return ServedPods.of(
        scheduler_names(args.served_scheduler_name or args.scheduler_name), args.filter_marker
    )


def name_markers(names: Iterable[str]) -> tuple[bytes, ...]:
    """The quoted names as they appear in a request's JSON: a body containing none of them
    cannot carry a pod of these schedulers, and skips parsing (names are DNS labels, which
    JSON never escapes)."""
    return tuple(f'"{name}"'.encode() for name in names)


def awaits_group(
    namespace: str,
    metadata: Mapping[str, Any],
    spec: Mapping[str, Any],
    names: tuple[str, ...],
) -> bool:
    """Whether the podgroup controller will still put this pod in a group before it may be
    scheduled: its schedulerName is one of `names` (the controller's `--scheduler-name`s) and
    it names no group yet (the controller skips, as Volcano's does, a pod that names one,
    and a pod with Kubernetes' native gang fields is kube-scheduler's own business)."""
    if (spec.get("schedulerName") or keys.KUBE_DEFAULT_SCHEDULER) not in names:
        return False
    if spec.get("schedulingGroup") or spec.get("workloadRef"):
        return False
    return pod_group_key(namespace, metadata, spec) is None
