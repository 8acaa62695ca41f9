"""`scheduling.volcano.sh/v1beta1` PodGroup and Queue."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from core.api.base import (
    DNS1123_SUBDOMAIN,
    FreeForm,
    KubeModel,
    KubeObject,
    ResourceList,
    cel,
    defaulted,
)

SCHEDULING_GROUP = "scheduling.volcano.sh"
SCHEDULING_VERSION = "v1beta1"
SCHEDULING_API_VERSION = f"{SCHEDULING_GROUP}/{SCHEDULING_VERSION}"

PodGroupPhase = Literal["Pending", "Running", "Unknown", "Inqueue", "Completed"]
POD_GROUP_PHASES: tuple[str, ...] = ("Pending", "Running", "Unknown", "Inqueue", "Completed")
QueueState = Literal["Open", "Closed", "Closing", "Unknown"]

# PodGroup condition types and reasons Volcano writes.
CONDITION_UNSCHEDULABLE = "Unschedulable"
CONDITION_SCHEDULED = "Scheduled"
REASON_POD_FAILED = "PodFailed"
REASON_POD_DELETED = "PodDeleted"
REASON_NOT_ENOUGH_RESOURCES = "NotEnoughResources"
REASON_NOT_ENOUGH_TASKS = "NotEnoughTasks"
REASON_NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
POD_GROUP_READY = "pod group is ready"
POD_GROUP_NOT_READY = "pod group is not ready"


class NetworkTopologySpec(KubeModel):
    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!(has(self.highestTierAllowed) && has(self.highestTierName))",
                "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
                "simultaneously",
            )
        )
    )

    mode: Literal["hard", "soft"] = defaulted("hard")
    highest_tier_allowed: int | None = Field(default=None, ge=0)
    highest_tier_name: str | None = None


class SubGroupPolicy(KubeModel):
    name: str | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: int = defaulted(1, ge=1)
    min_sub_groups: int = defaulted(0, ge=0)
    label_selector: FreeForm | None = None
    match_label_keys: list[str] | None = None


class PodGroupSpec(KubeModel):
    min_member: int = Field(default=0, ge=0)
    min_task_member: dict[str, int] | None = None
    queue: str = defaulted("default", max_length=253, pattern=DNS1123_SUBDOMAIN)
    priority_class_name: str | None = Field(default=None, max_length=253)
    min_resources: ResourceList | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicy] | None = None


class PodGroupCondition(KubeModel):
    type: str | None = None
    status: Literal["True", "False", "Unknown"] | None = None
    transition_id: str | None = Field(default=None, alias="transitionID")
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class PodGroupStatus(KubeModel):
    phase: PodGroupPhase | None = None
    conditions: list[PodGroupCondition] | None = None
    running: int | None = Field(default=None, ge=0)
    succeeded: int | None = Field(default=None, ge=0)
    failed: int | None = Field(default=None, ge=0)


class PodGroup(KubeObject):
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus | None = None


class Guarantee(KubeModel):
    resource: ResourceList | None = None


class NodeGroupAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: list[str] | None = None
    preferred_during_scheduling_ignored_during_execution: list[str] | None = None


class QueueAffinity(KubeModel):
    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAffinity | None = None


class ExtendCluster(KubeModel):
    name: str | None = None
    weight: int | None = None
    capacity: ResourceList | None = None


class QueueSpec(KubeModel):
    # The model admits 0 because Volcano's mutating webhook turns 0 into 1 before the schema's
    # minimum of 1 is checked; the CRD keeps Volcano's 1..65535.
    weight: int = defaulted(1, ge=0, le=65535, json_schema_extra={"minimum": 1})
    capability: ResourceList | None = None
    deserved: ResourceList | None = None
    guarantee: Guarantee | None = None
    reclaimable: bool | None = None
    parent: str | None = Field(default=None, max_length=253, pattern=DNS1123_SUBDOMAIN)
    priority: int | None = Field(default=None, ge=0)
    dequeue_strategy: Literal["fifo", "traverse"] = defaulted("traverse")
    affinity: QueueAffinity | None = None
    type: str | None = Field(default=None, max_length=253)
    extend_clusters: list[ExtendCluster] | None = None


class Reservation(KubeModel):
    nodes: list[str] | None = None
    resource: ResourceList | None = None


class QueueStatus(KubeModel):
    state: QueueState | None = None
    pending: int | None = None
    running: int | None = None
    inqueue: int | None = None
    unknown: int | None = None
    completed: int | None = None
    reservation: Reservation | None = None
    allocated: ResourceList | None = None


class Queue(KubeObject):
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus | None = None

    @property
    def is_reclaimable(self) -> bool:
        # Volcano's mutating webhook sets true when nil and the scheduler treats nil as true.
        return self.spec.reclaimable is not False
