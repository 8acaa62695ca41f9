"""Which objects an explanation is about: from the object asked about down the chain
flow -> job -> PodGroup (-> pod). Pure: reads the collected API objects only.

A JobFlow is explained through the first of its jobs (in `spec.flows` order) that waits to be
scheduled; a Volcano Job through its PodGroup, named `<job>-<job UID>` by Volcano's job
controller (`<job>` for jobs made before Volcano 1.5); a pod through the
PodGroup it names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.records.pods import pod_group_key

if TYPE_CHECKING:
    from explain.collect import Collected

# Volcano Job phases in which the job waits for the scheduler.
WAITING_JOB_PHASES = frozenset({"", "Pending"})


@dataclass(frozen=True, slots=True)
class Focus:
    flow: dict[str, Any] | None = None
    job: dict[str, Any] | None = None
    podgroup: dict[str, Any] | None = None
    pod: dict[str, Any] | None = None
    podgroup_key: str | None = None  # named, even when the PodGroup does not exist


def meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def key_of(obj: dict[str, Any]) -> str:
    m = meta(obj)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"


def job_phase(job: dict[str, Any] | None) -> str:
    return ((job or {}).get("status") or {}).get("state", {}).get("phase") or ""


def flow_job_name(flow: dict[str, Any], step: str) -> str:
    """The vcjob a JobFlow step creates (Volcano's `<jobflow>-<flow name>`)."""
    return f"{meta(flow).get('name', '')}-{step}"


def flow_steps(flow: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in ((flow.get("spec") or {}).get("flows") or []) if isinstance(s, dict)]


def _find(objects: Iterable[dict[str, Any]], namespace: str, name: str) -> dict[str, Any] | None:
    for obj in objects:
        m = meta(obj)
        if m.get("name") == name and m.get("namespace", namespace) == namespace:
            return obj
    return None


def job_podgroup(
    job: dict[str, Any], podgroups: Iterable[dict[str, Any]]
) -> tuple[str, dict[str, Any] | None]:
    m = meta(job)
    namespace, name = m.get("namespace", ""), m.get("name", "")
    groups = list(podgroups)
    named = f"{name}-{m.get('uid', '')}"
    group = _find(groups, namespace, named) if m.get("uid") else None
    if group is None and (legacy := _find(groups, namespace, name)) is not None:
        return f"{namespace}/{name}", legacy
    return f"{namespace}/{named}", group


def flow_focus_job(flow: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The flow's first created job that waits to be scheduled, in `spec.flows` order."""
    namespace = meta(flow).get("namespace", "")
    for step in flow_steps(flow):
        job = _find(jobs, namespace, flow_job_name(flow, str(step.get("name", ""))))
        if job is not None and job_phase(job) in WAITING_JOB_PHASES:
            return job
    return None


def focus_of(found: Collected) -> Focus:
    target, namespace = found.target, found.namespace
    if found.kind == "podgroup":
        return Focus(podgroup=target, podgroup_key=f"{namespace}/{found.name}")
    if found.kind == "pod":
        group = pod_group_key(namespace, meta(target), target.get("spec") or {})
        podgroup = None
        if group is not None:
            podgroup = _find(found.podgroups, namespace, group.split("/", 1)[1])
        return Focus(pod=target, podgroup=podgroup, podgroup_key=group)
    flow = target if found.kind == "jobflow" else None
    job = target if found.kind == "job" else flow_focus_job(target, found.jobs)
    if job is None:
        return Focus(flow=flow)
    key, podgroup = job_podgroup(job, found.podgroups)
    return Focus(flow=flow, job=job, podgroup=podgroup, podgroup_key=key)
