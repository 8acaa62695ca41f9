"""What `bench/real_throughput.py --workload gangs` creates (bench/real_gangs.py): plain pods,
or the same pods as gangs, Volcano Jobs (their pods made by vulcan's job controller) or PodGroups
with annotated pods, listed gang by gang in the order they are created."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from bench.real_cluster import GANG_PROFILE
from bench.sim_throughput import NAMESPACE, pod_body
from core.api import keys
from core.kube.client import PODGROUPS, PODS, VCJOBS


@dataclass(frozen=True)
class Layout:
    shape: str
    gangs: int
    size: int

    def describe(self) -> str:
        kind = "Volcano Jobs" if self.shape == "jobs" else "PodGroups"
        return f"{self.gangs} {kind} x {self.size} pods"


def _template(index: int) -> dict[str, Any]:
    return dict(orjson.loads(pod_body(index)))


def job_body(gang: int, size: int) -> bytes:
    spec = _template(0)["spec"]
    spec["schedulerName"] = GANG_PROFILE
    return orjson.dumps(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": f"gang-{gang:05d}", "namespace": NAMESPACE},
            "spec": {
                "schedulerName": GANG_PROFILE,
                "queue": keys.DEFAULT_QUEUE,
                "minAvailable": size,
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": size,
                        "template": {"metadata": {"labels": {"app": "bench"}}, "spec": spec},
                    }
                ],
            },
        }
    )


def podgroup_body(gang: int, size: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": f"gang-{gang:05d}", "namespace": NAMESPACE},
            "spec": {"minMember": size, "queue": keys.DEFAULT_QUEUE},
        }
    )


def member_body(gang: int, member: int, size: int) -> bytes:
    pod = _template(gang * size + member)
    pod["metadata"]["name"] = f"gang-{gang:05d}-{member:04d}"
    pod["metadata"]["annotations"] = {keys.GROUP_NAME: f"gang-{gang:05d}"}
    pod["spec"]["schedulerName"] = GANG_PROFILE
    return orjson.dumps(pod)


def creations(phase: str, shape: Layout, pods: int) -> list[tuple[str, bytes]]:
    """(path, body) of every object the load generator creates, gang by gang."""
    if phase == "plain":
        return [(PODS.path(NAMESPACE), pod_body(i)) for i in range(pods)]
    if shape.shape == "jobs":
        return [(VCJOBS.path(NAMESPACE), job_body(g, shape.size)) for g in range(shape.gangs)]
    made: list[tuple[str, bytes]] = []
    for g in range(shape.gangs):
        made.append((PODGROUPS.path(NAMESPACE), podgroup_body(g, shape.size)))
        made += [(PODS.path(NAMESPACE), member_body(g, m, shape.size)) for m in range(shape.size)]
    return made
