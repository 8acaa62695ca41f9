"""The soak's workload: a random but reproducible schedule of actions from a seed.

Everything is drawn from one `random.Random(seed)` before the soak starts, so a seed names the
same sequence of submissions and disruptions every time (what the cluster makes of them still
depends on timing). The mix:

- setup: 3-5 queues (weights 1-4, some with a cpu capability, Volcano's queue `priority`), and
  two PriorityClasses (soak-high, soak-low), in namespace `soak`;
- Volcano Jobs of 1-3 tasks (some chained by `dependsOn`, some elastic: `minAvailable` below
  the replicas), with policies (PodEvicted/PodFailed -> RestartJob, TaskCompleted ->
  CompleteJob), some tasks failing (`vulcan.sh/sim-exit-code`), run times from
  `vulcan.sh/sim-duration`;
- PodGroup gangs of plain annotated pods; plain pods of no gang (schedulerName volcano);
- with topology (on by default): a HyperNode tree over the nodes (made at the start) and
  networkTopology, partitioned Jobs and PodGroup subgroups on a share of the gangs
  (`bench.soak_topology`, drawn from generators of their own: the rest stays as it was);
- disruptions: deleting a job or a gang, deleting one member of a job (its controller makes it
  again), suspending a job and resuming it (bus.volcano.sh Commands, as vcctl makes them), and
  a node going NotReady and coming back (one in each five minutes).

Two shapes: `heavy` (the default: a submission every 0.3-1.5 s, far more than the cluster
holds) and `light` (an under-subscribed cluster: a submission every 4-12 s, with a burst of
5-12 submissions 0.05-0.3 s apart now and then, so the idle paths and the wake from idle are
exercised).

Deployments (1-3 long-running replicas, deleted 10-60 s later) are part of the mix only when
the embedded cluster runs a Deployment controller (`sim.controllers`); without one a
Deployment would never get pods, and a plain pod is submitted in its place."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from bench import soak_topology

NAMESPACE = "soak"
PRIORITY_CLASSES = (("soak-high", 1000), ("soak-low", 10))
SIM_DURATION = "vulcan.sh/sim-duration"
SIM_EXIT_CODE = "vulcan.sh/sim-exit-code"
GROUP_NAME = "scheduling.k8s.io/group-name"
JOB_TTL = 30  # seconds a finished Volcano Job stays (ttlSecondsAfterFinished)
NODE_FAILURE_EVERY = 300.0  # seconds of soak per node failure (at least one)


@dataclass(slots=True)
class Action:
    at: float  # seconds after the soak started
    kind: str  # setup | job | gang | pod | delete-job | delete-gang | delete-member | suspend
    # | resume | node-fail | node-recover
    name: str = ""  # the object it is about (namespace/name, or a node's index)
    objects: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class Shape:
    """The cluster the workload is sized for."""

    nodes: int = 4
    node_cpu: int = 32
    node_failure: bool = True
    deployments: bool = False  # the cluster runs a Deployment controller
    load: str = "heavy"  # or "light" (the module docstring)
    topology: bool = True  # HyperNodes and topology-constrained gangs (bench.soak_topology)


def _container(cpu: int, memory_gi: int) -> dict[str, Any]:
    requests = {"cpu": str(cpu), "memory": f"{memory_gi}Gi"}
    return {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": requests, "limits": requests},
    }


def queues(rng: random.Random, shape: Shape) -> list[dict[str, Any]]:
    total = shape.nodes * shape.node_cpu
    out = []
    for index in range(rng.randint(3, 5)):
        spec: dict[str, Any] = {"weight": rng.randint(1, 4), "reclaimable": True}
        if index < 2 or rng.random() < 0.5:  # at least two capped queues
            spec["capability"] = {"cpu": str(rng.choice((total // 4, total // 3, total // 2)))}
        if rng.random() < 0.5:
            spec["priority"] = rng.choice((1, 10, 100))
        out.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": f"soak-q{index}"},
                "spec": spec,
            }
        )
    return out


def priority_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": "soak workload priority",
        }
        for name, value in PRIORITY_CLASSES
    ]


def vcjob(rng: random.Random, name: str, queue: str) -> dict[str, Any]:
    tasks = []
    chained = rng.random() < 0.25
    for index in range(rng.randint(1, 3)):
        replicas = rng.randint(1, 4)
        failing = rng.random() < 0.15
        notes = {SIM_DURATION: f"{rng.randint(5, 20)}s", SIM_EXIT_CODE: "1" if failing else "0"}
        task: dict[str, Any] = {
            "name": f"t{index}",
            "replicas": replicas,
            "template": {
                "metadata": {"annotations": notes},
                "spec": {
                    # OnFailure only for pods that succeed: a failing one would crash-loop
                    # for the whole soak.
                    "restartPolicy": "Never" if failing or rng.random() < 0.7 else "OnFailure",
                    "containers": [_container(rng.choice((1, 2, 4, 8)), rng.choice((1, 2, 4)))],
                },
            },
        }
        if chained and index > 0:
            task["dependsOn"] = {"name": [f"t{index - 1}"]}
        tasks.append(task)
    replicas = sum(t["replicas"] for t in tasks)
    if chained:
        minimum = tasks[0]["replicas"]
    elif rng.random() < 0.35 and replicas > 1:
        minimum = rng.randint(1, replicas - 1)  # elastic
    else:
        minimum = replicas
    policies = []
    if rng.random() < 0.8:
        policies.append({"event": "PodEvicted", "action": "RestartJob"})
    if rng.random() < 0.6:
        policies.append({"event": "PodFailed", "action": "RestartJob"})
    if rng.random() < 0.1:
        policies.append({"event": "TaskCompleted", "action": "CompleteJob"})
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": queue,
        "minAvailable": minimum,
        "maxRetry": rng.randint(1, 3),
        # Finished jobs go away (Volcano's TTL), so a long soak does not pile them up.
        "ttlSecondsAfterFinished": JOB_TTL,
        "tasks": tasks,
    }
    if policies:
        spec["policies"] = policies
    if (pc := rng.choice((None, *(n for n, _ in PRIORITY_CLASSES)))) is not None:
        spec["priorityClassName"] = pc
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def gang(rng: random.Random, name: str, queue: str) -> list[dict[str, Any]]:
    minimum = rng.randint(2, 5)
    count = minimum + (rng.randint(0, 2) if rng.random() < 0.3 else 0)
    cpu, memory = rng.choice((1, 2, 4, 6)), rng.choice((1, 2))
    priority = rng.choice((None, *(n for n, _ in PRIORITY_CLASSES)))
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "minMember": minimum,
            "queue": queue,
            "minResources": {"cpu": str(cpu * minimum), "memory": f"{memory * minimum}Gi"},
            **({"priorityClassName": priority} if priority else {}),
        },
    }
    duration = f"{rng.randint(5, 20)}s"
    pods = []
    for index in range(count):
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "containers": [_container(cpu, memory)],
        }
        if priority:
            spec["priorityClassName"] = priority
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{index}",
                    "namespace": NAMESPACE,
                    "labels": {"soak-gang": name},
                    "annotations": {GROUP_NAME: name, SIM_DURATION: duration},
                },
                "spec": spec,
            }
        )
    return [group, *pods]


def plain_pod(rng: random.Random, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "annotations": {SIM_DURATION: f"{rng.randint(2, 10)}s"},
        },
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "containers": [_container(rng.choice((1, 2)), 1)],
        },
    }


def deployment(rng: random.Random, name: str) -> dict[str, Any]:
    """A Deployment of 1-3 long-running replicas (scheduled by vulcan, no gang)."""
    labels = {"soak-deployment": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": rng.randint(1, 3),
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [_container(rng.choice((1, 2)), 1)],
                },
            },
        },
    }


def schedule(seed: int, duration: float, shape: Shape | None = None) -> list[Action]:
    """The whole soak, decided up front from `seed`, sorted by time."""
    shape = shape or Shape()
    rng = random.Random(seed)
    setup = priority_classes() + queues(rng, shape)
    queue_names = [q["metadata"]["name"] for q in setup if q["kind"] == "Queue"]
    actions = [Action(0.0, "setup", objects=setup)]
    if shape.topology:
        # Made by the actor from the nodes' names once the cluster is up.
        actions.append(Action(0.0, "hypernodes", "tree"))
    jobs: list[str] = []
    gangs: list[str] = []
    t = 1.0
    counter = 0
    # Submissions stop a little before the end so the last ones get a chance to run.
    last_submission = max(duration * 0.85, duration - 20.0)
    burst = 0  # submissions left in a light shape's burst
    while t < last_submission:
        counter += 1
        roll = rng.random()
        queue = rng.choice(queue_names)
        if roll < 0.45:
            name = f"job-{counter}"
            job = vcjob(rng, name, queue)  # drawn either way: same stream
            if shape.topology:
                job = _topology_job(soak_topology.rng_for(seed, counter), job, shape)
            actions.append(Action(t, "job", f"{NAMESPACE}/{name}", [job]))
            jobs.append(name)
        elif roll < 0.75:
            name = f"gang-{counter}"
            objects = gang(rng, name, queue)
            if shape.topology:
                objects = _topology_gang(soak_topology.rng_for(seed, counter), objects, shape)
            actions.append(Action(t, "gang", f"{NAMESPACE}/{name}", objects))
            gangs.append(name)
        elif roll < 0.82:
            pod = plain_pod(rng, f"pod-{counter}")  # drawn either way: same stream
            if shape.deployments and roll >= 0.79:
                # Where a Deployment controller runs, a Deployment instead (drawn from a
                # generator of its own, so the rest of the seed's schedule does not change).
                sub = random.Random(seed * 1_000_003 + counter)
                name = f"deploy-{counter}"
                key = f"{NAMESPACE}/{name}"
                actions.append(Action(t, "deployment", key, [deployment(sub, name)]))
                gone_at = min(t + sub.uniform(10.0, 60.0), duration - 1.0)
                actions.append(Action(gone_at, "delete-deployment", key))
            else:
                actions.append(Action(t, "pod", f"{NAMESPACE}/pod-{counter}", [pod]))
        elif roll < 0.87 and jobs:
            actions.append(Action(t, "delete-job", f"{NAMESPACE}/{rng.choice(jobs)}"))
        elif roll < 0.90 and gangs:
            actions.append(Action(t, "delete-gang", f"{NAMESPACE}/{rng.choice(gangs)}"))
        elif roll < 0.94 and jobs:
            actions.append(Action(t, "delete-member", f"{NAMESPACE}/{rng.choice(jobs)}"))
        elif jobs:
            name = rng.choice(jobs)
            actions.append(Action(t, "suspend", f"{NAMESPACE}/{name}"))
            resume_at = min(t + rng.uniform(3.0, 10.0), duration - 1.0)
            actions.append(Action(resume_at, "resume", f"{NAMESPACE}/{name}"))
        if shape.load == "light":
            if burst == 0 and rng.random() < 0.12:
                burst = rng.randint(5, 12)
            burst = max(burst - 1, 0)
            t += rng.uniform(0.05, 0.3) if burst else rng.uniform(4.0, 12.0)
        else:
            t += rng.uniform(0.3, 1.5)
    if shape.node_failure and shape.nodes > 1:
        # One node down for ~35 s in each stretch of NODE_FAILURE_EVERY (the first early).
        stretch = min(duration, NODE_FAILURE_EVERY)
        start = 0.0
        while start < duration - 10.0:
            index = rng.randrange(shape.nodes)
            fail_at = start + stretch * rng.uniform(0.15, 0.3)
            actions.append(Action(fail_at, "node-fail", str(index)))
            recover_at = min(fail_at + 35.0, duration - 2.0)
            actions.append(Action(recover_at, "node-recover", str(index)))
            start += NODE_FAILURE_EVERY
    actions.sort(key=lambda a: a.at)
    return actions


def _cpu(pod_spec: dict[str, Any]) -> int:
    return sum(int(c["resources"]["requests"]["cpu"]) for c in pod_spec["containers"])


def _topology_job(sub: random.Random, job: dict[str, Any], shape: Shape) -> dict[str, Any]:
    """`job` with a networkTopology, or a partitioned Job in its place, or `job` as it is."""
    spec = job["spec"]
    if sub.random() < 0.2:
        meta = job["metadata"]
        return soak_topology.partitioned_job(sub, meta["name"], spec["queue"], NAMESPACE)
    total = sum(t["replicas"] * _cpu(t["template"]["spec"]) for t in spec["tasks"])
    if (topology := soak_topology.topology_for(sub, total, shape.node_cpu)) is not None:
        spec["networkTopology"] = topology
    return job


def _topology_gang(
    sub: random.Random, objects: list[dict[str, Any]], shape: Shape
) -> list[dict[str, Any]]:
    """The gang with subgroups, or a networkTopology, or as it is."""
    group, *pods = objects
    objects = soak_topology.with_subgroups(objects, sub)
    if "subGroupPolicy" in group["spec"]:
        return objects
    total = sum(_cpu(p["spec"]) for p in pods)
    if (topology := soak_topology.topology_for(sub, total, shape.node_cpu)) is not None:
        group["spec"]["networkTopology"] = topology
    return objects
