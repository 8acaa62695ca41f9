"""`nodeinfo.volcano.sh/v1alpha1` Numatopology: one node's NUMA topology as Volcano's
resource-exporter reports it (volcano-sh/apis `pkg/apis/nodeinfo/v1alpha1/numatopo_types.go`),
cluster-scoped and named after its node. The `numa-aware` scheduler plugin reads it."""

from __future__ import annotations

from pydantic import Field

from core.api.base import KubeModel, KubeObject

NODEINFO_GROUP = "nodeinfo.volcano.sh"
NODEINFO_VERSION = "v1alpha1"
NODEINFO_API_VERSION = f"{NODEINFO_GROUP}/{NODEINFO_VERSION}"

# The keys of `spec.policies` (Volcano's PolicyName).
CPU_MANAGER_POLICY = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"


class ResourceInfo(KubeModel):
    """One resource across the node's NUMA cells: for cpu, `allocatable` is the cpuset still
    free ("0-3,8") and `capacity` how many there are."""

    allocatable: str | None = None
    capacity: int | None = None


class CPUInfo(KubeModel):
    numa: int | None = Field(default=None, ge=0)
    socket: int | None = Field(default=None, ge=0)
    core: int | None = Field(default=None, ge=0)


class ContainerAllocation(KubeModel):
    name: str | None = None
    allocations: dict[str, str] | None = None


class PodAllocation(KubeModel):
    uid: str | None = None
    name: str | None = None
    namespace: str | None = None
    container_allocations: list[ContainerAllocation] | None = None


class NumatopoSpec(KubeModel):
    policies: dict[str, str] | None = None
    res_reserved: dict[str, str] | None = None
    numares: dict[str, ResourceInfo] | None = None
    cpu_detail: dict[str, CPUInfo] | None = None
    pod_allocations: list[PodAllocation] | None = None


class Numatopology(KubeObject):
    spec: NumatopoSpec | None = None
