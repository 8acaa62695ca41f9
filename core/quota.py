"""A pod's ResourceQuota usage, the per-pod vector Volcano multiplies into `minResources`.

Kubernetes' quota evaluator for pods counts: `count/pods` and `pods`;
`cpu`, `memory`, `ephemeral-storage` and `hugepages-*` requests under both the bare name and
`requests.<name>`; their limits (cpu, memory, ephemeral-storage) as `limits.<name>`; extended
resources as `requests.<name>`, which Volcano also copies to the bare name. A finished pod only
counts as `count/pods`. So a pod requesting (= limiting) cpu 1, memory 1000Mi and one
nvidia.com/gpu yields exactly: count/pods, pods, cpu, requests.cpu, limits.cpu, memory,
requests.memory, limits.memory, nvidia.com/gpu, requests.nvidia.com/gpu.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    HUGEPAGES_PREFIX,
    MEMORY,
    ResourceVector,
    format_quantity,
    pod_requests,
    pod_resources_key,
)

COUNT_PODS = "count/pods"
PODS = "pods"
REQUESTS = "requests."
LIMITS = "limits."
_COMPUTE = (CPU, MEMORY, EPHEMERAL_STORAGE)
_SIDECAR = "Always"

_FINISHED: dict[str, int] = {COUNT_PODS: 1}


def is_extended_resource(name: str) -> bool:
    """Kubernetes' IsExtendedResourceName: domain-qualified, not `kubernetes.io/`, not a quota
    `requests.` name."""
    native = "/" not in name or "kubernetes.io/" in name
    return not native and not name.startswith(REQUESTS)


def _limits(spec: Mapping[str, Any]) -> ResourceVector:
    """The pod's effective limits, aggregated as Kubernetes' PodLimits does: containers and
    sidecars summed, each plain init container (plus the sidecars started before it) as a
    floor, overhead added to the resources that have a limit."""

    def of(container: Any) -> ResourceVector:
        return ResourceVector.from_resource_list((container.get("resources") or {}).get("limits"))

    total = ResourceVector()
    for container in spec.get("containers") or ():
        total += of(container)
    sidecars = ResourceVector()
    floor = ResourceVector()
    for container in spec.get("initContainers") or ():
        if container.get("restartPolicy") == _SIDECAR:
            total += of(container)
            sidecars += of(container)
            floor = floor.elementwise_max(sidecars)
        else:
            floor = floor.elementwise_max(of(container) + sidecars)
    total = total.elementwise_max(floor)
    overhead = ResourceVector.from_resource_list(spec.get("overhead"))
    return total + ResourceVector({n: a for n, a in overhead.items() if n in total})


# The pods of a workload have the same resources, and every watch event of a pod decodes it
# again: answers are remembered by what they are computed from (and shared between pods).
_USAGE_MEMO: dict[bytes, dict[str, int]] = {}
_USAGE_MEMO_SIZE = 4096


def pod_quota_usage(spec: Mapping[str, Any], *, terminal: bool = False) -> dict[str, int]:
    """Quota name -> amount (cpu in millicores, bytes, counts). Unparseable quantities count
    as nothing: the API server has validated stored pods, so this only guards odd input.
    The mapping returned is shared between equal pods: read it, never change it."""
    if terminal:
        return _FINISHED
    key = pod_resources_key(spec, ("quota",))
    if key is not None:
        known = _USAGE_MEMO.get(key)
        if known is not None:
            return known
    usage = _compute_usage(spec)
    if key is not None:
        if len(_USAGE_MEMO) >= _USAGE_MEMO_SIZE:
            _USAGE_MEMO.clear()
        _USAGE_MEMO[key] = usage
    return usage


def _compute_usage(spec: Mapping[str, Any]) -> dict[str, int]:
    usage = {COUNT_PODS: 1, PODS: 1}
    try:
        requests = pod_requests(spec, count_pod=False)
        limits = _limits(spec)
    except (ValueError, TypeError):
        return usage
    for name, amount in requests.items():
        if name in _COMPUTE or name.startswith(HUGEPAGES_PREFIX):
            usage[name] = amount
            usage[REQUESTS + name] = amount
        elif is_extended_resource(name):
            usage[REQUESTS + name] = amount
            usage[name] = amount  # Volcano's copy: the scheduler reads the bare name
    for name in _COMPUTE:
        if name in limits:
            usage[LIMITS + name] = limits.get(name)
    return usage


def _base(name: str) -> str:
    for prefix in (REQUESTS, LIMITS):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def min_resources(usage: Mapping[str, int], members: int) -> dict[str, str]:
    """`usage` x `members` as a ResourceList, each quantity in its resource's canonical form
    (`requests.memory` like `memory`)."""
    return {
        name: format_quantity(_base(name), amount * members)
        for name, amount in sorted(usage.items())
    }
