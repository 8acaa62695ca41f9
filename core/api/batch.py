"""`batch.volcano.sh/v1alpha1` Job and `bus.volcano.sh/v1alpha1` Command.

Pod templates stay free-form dicts: we never model the whole PodSpec, and every field of it
survives a round trip.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from core.api import limits
from core.api.base import (
    DNS1123_SUBDOMAIN,
    FreeForm,
    KubeModel,
    KubeObject,
    OwnerReference,
    cel,
    defaulted,
)
from core.api.scheduling import NetworkTopologySpec

BATCH_GROUP = "batch.volcano.sh"
BATCH_VERSION = "v1alpha1"
BATCH_API_VERSION = f"{BATCH_GROUP}/{BATCH_VERSION}"
BUS_GROUP = "bus.volcano.sh"
BUS_VERSION = "v1alpha1"
BUS_API_VERSION = f"{BUS_GROUP}/{BUS_VERSION}"

# Every event the CRD enum admits; users may only use USER_EVENTS in policies.
ALL_EVENTS: tuple[str, ...] = (
    "*",
    "PodPending",
    "PodRunning",
    "PodFailed",
    "PodEvicted",
    "Unknown",
    "TaskCompleted",
    "OutOfSync",
    "CommandIssued",
    "JobUpdated",
    "TaskFailed",
)
USER_EVENTS: tuple[str, ...] = (
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "TaskFailed",
    "JobUpdated",
)
USER_ACTIONS: tuple[str, ...] = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
)
INTERNAL_ACTIONS: tuple[str, ...] = (
    "SyncJob",
    "EnqueueJob",
    "SyncQueue",
    "OpenQueue",
    "CloseQueue",
)
ALL_ACTIONS: tuple[str, ...] = USER_ACTIONS + INTERNAL_ACTIONS

JOB_PHASES: tuple[str, ...] = (
    "Pending",
    "Aborting",
    "Aborted",
    "Running",
    "Restarting",
    "Completing",
    "Completed",
    "Terminating",
    "Terminated",
    "Failed",
)
JobPhase = Literal[
    "Pending",
    "Aborting",
    "Aborted",
    "Running",
    "Restarting",
    "Completing",
    "Completed",
    "Terminating",
    "Terminated",
    "Failed",
]
# Controller plugins a Job may name in spec.plugins.
KNOWN_JOB_PLUGINS: tuple[str, ...] = (
    "env",
    "svc",
    "ssh",
    "mpi",
    "pytorch",
    "tensorflow",
    "ray",
    "hcclrank",
)
TOPOLOGY_POLICIES: tuple[str, ...] = ("none", "best-effort", "restricted", "single-numa-node")

Duration = str
"""A Go duration string such as `10s` or `1h2m3s` (checked in core.api.validation)."""


class LifecyclePolicy(KubeModel):
    action: str | None = None
    event: str | None = None
    events: list[str] | None = None
    exit_code: int | None = None
    timeout: Duration | None = None


class DependsOn(KubeModel):
    name: list[str] | None = None
    iteration: Literal["any", "all"] | None = None


class PartitionPolicy(KubeModel):
    total_partitions: int = Field(ge=1)
    partition_size: int = Field(ge=1)
    min_partitions: int = defaulted(0, ge=0)
    network_topology: NetworkTopologySpec | None = None


class TaskSpec(KubeModel):
    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.minAvailable) || !has(self.replicas) || "
                "self.minAvailable <= self.replicas",
                "'minAvailable' is greater than 'replicas' in task",
            )
        )
    )

    name: str | None = Field(default=None, max_length=limits.MAX_TASK_NAME)
    replicas: int = Field(default=0, json_schema_extra={"minimum": 0})
    min_available: int | None = Field(default=None, json_schema_extra={"minimum": 0})
    template: FreeForm = Field(default_factory=dict)
    policies: list[LifecyclePolicy] | None = None
    topology_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] | None = None
    max_retry: int | None = None
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicy | None = None


class VolumeSpec(KubeModel):
    mount_path: str
    volume_claim_name: str | None = Field(default=None, max_length=253)
    volume_claim: FreeForm | None = None


# Task names are unique (Volcano's webhook: "duplicated task name"; core.api.validation_job).
# Also a CEL rule on a Job's and a JobTemplate's `spec`, so installs without the webhooks refuse
# duplicates too: with MAX_TASKS and MAX_TASK_NAME kube-apiserver estimates the pairwise check at
# 541,829, 5% of its per-rule budget. Not on JobSpec itself: under a JobFlow's
# `patch.jobSpec` it would run once per flow (128 times), 6.9x over budget; there the JobFlow
# webhook checks it.
UNIQUE_TASK_NAMES = cel(
    (
        "!has(self.tasks) || self.tasks.all(t, !has(t.name) || "
        "self.tasks.exists_one(u, has(u.name) && u.name == t.name))",
        "duplicated task name found",
    ),
)


class JobSpec(KubeModel):
    scheduler_name: str | None = Field(default=None, max_length=63)
    min_available: int | None = Field(default=None, json_schema_extra={"minimum": 0})
    volumes: list[VolumeSpec] | None = None
    tasks: list[TaskSpec] | None = Field(
        default=None, max_length=limits.MAX_TASKS, json_schema_extra={"minItems": 1}
    )
    policies: list[LifecyclePolicy] | None = None
    plugins: dict[str, list[str]] | None = None
    running_estimate: Duration | None = None
    queue: str = defaulted("default", max_length=253, pattern=DNS1123_SUBDOMAIN)
    max_retry: int = defaulted(3, json_schema_extra={"minimum": 0})
    ttl_seconds_after_finished: int | None = Field(default=None, json_schema_extra={"minimum": 0})
    priority_class_name: str | None = None
    min_success: int | None = Field(default=None, ge=1)
    network_topology: NetworkTopologySpec | None = None


class JobState(KubeModel):
    phase: JobPhase | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None


class TaskState(KubeModel):
    phase: dict[str, int] | None = None


class JobCondition(KubeModel):
    status: JobPhase | None = None
    last_transition_time: str | None = None


class JobStatus(KubeModel):
    state: JobState | None = None
    min_available: int | None = None
    task_status_count: dict[str, TaskState] | None = None
    pending: int | None = None
    running: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    terminating: int | None = None
    unknown: int | None = None
    version: int | None = None
    retry_count: int | None = None
    running_duration: Duration | None = None
    controlled_resources: dict[str, str] | None = None
    conditions: list[JobCondition] | None = None


class Job(KubeObject):
    spec: JobSpec = Field(default_factory=JobSpec, json_schema_extra=UNIQUE_TASK_NAMES)
    status: JobStatus | None = None


class Command(KubeObject):
    """A one-shot request to a controller (`vcctl job suspend` etc.); no spec/status."""

    action: str | None = None
    target: OwnerReference | None = None
    reason: str | None = None
    message: str | None = None
