"""A pod's effective resource request: `pod_requests` / `pod_nonzero_requests`, mirroring
k8s.io/component-helpers/resource `PodRequests` as kube-scheduler's NodeResourcesFit filter and
scorers compute it (containers, init containers and sidecars, overhead, pod-level resources),
with a memo keyed by `pod_resources_key`.

Separate from `ResourceVector` (`core.resources_vector`), which it sums; everything public here
is re-exported by `core.resources`, the module to import from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from core.resources_format import CPU, HUGEPAGES_PREFIX, MEMORY, PODS
from core.resources_vector import ResourceVector

# ------------------------------------------------------------------------------ pod requests

# kube-scheduler's pkg/scheduler/util: scorers pretend a container that requests no cpu/memory
# asks for this much, so such pods are not seen as free ("0.1 core", "200 MB").
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_SIDECAR_RESTART_POLICY = "Always"
_POD_LEVEL_RESOURCES = frozenset({CPU, MEMORY})  # plus hugepages-*, see _is_pod_level_resource


def pod_requests(
    spec: Mapping[str, Any],
    *,
    count_pod: bool = True,
    default_requests_from_limits: bool = True,
    pod_level_resources: bool = True,
    ignored_group: str = "",
) -> ResourceVector:
    """A pod's effective request, as kube-scheduler's NodeResourcesFit filter computes it.

    `spec` is the pod's `spec` as raw API JSON. The result is
    max(sum(containers) + sum(sidecars), max over init containers i of (init_i + sidecars
    started before i)) + spec.overhead, where sidecars are init containers with
    `restartPolicy: Always` (component-helpers PodRequests, KEP-753). Without sidecars that is
    max(sum(containers), largest init container) + overhead.

    count_pod: add `pods: 1`, the pod slot the pod occupies on a node.
    default_requests_from_limits: a container with a limit but no request for a resource
        requests its limit; the API server applies this default to every Pod it stores, so it is
        a no-op for pods read from the API and makes pods built locally (e.g. from a Volcano job
        template) count the same.
    pod_level_resources: `spec.resources.requests` (PodLevelResources) replace the aggregate for
        cpu, memory and hugepages-*.
    ignored_group: extended resources `<group>/<name>` left out (NodeResourcesFit's
        `ignoredResourceGroups`), e.g. vulcan's routing markers.
    """
    total = _pod_requests(
        spec,
        count_pod=count_pod,
        from_limits=default_requests_from_limits,
        pod_level=pod_level_resources,
        non_missing=None,
    )
    return without_group(total, ignored_group) if ignored_group else total


def without_group(vector: ResourceVector, group: str) -> ResourceVector:
    """`vector` without the extended resources `<group>/...` (the same object when it has none,
    so memoised vectors stay shared)."""
    prefix = group + "/"
    amounts = vector.view()
    if not any(name.startswith(prefix) for name in amounts):
        return vector
    return ResourceVector._of(
        {name: amount for name, amount in amounts.items() if not name.startswith(prefix)}
    )


# kube-scheduler's NonMissingContainerRequests defaults (one object: the memo relies on it).
_NON_MISSING: Mapping[str, int] = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}


def pod_nonzero_requests(
    spec: Mapping[str, Any],
    *,
    count_pod: bool = True,
    default_requests_from_limits: bool = True,
    pod_level_resources: bool = True,
) -> ResourceVector:
    """`pod_requests` as kube-scheduler's scorers see it (NonMissingContainerRequests).

    Every container (and init container) that does not mention cpu / memory in its requests is
    counted as requesting 100m cpu / 200Mi memory. An explicit "0" stays 0, as in Go.
    """
    return _pod_requests(
        spec,
        count_pod=count_pod,
        from_limits=default_requests_from_limits,
        pod_level=pod_level_resources,
        non_missing=_NON_MISSING,
    )


# Pods of one workload ask the same, and every watch event of a pod (a status write) would
# parse its quantities again: answers are remembered by what they are computed from.
_REQUESTS_MEMO: dict[bytes, ResourceVector] = {}
_REQUESTS_MEMO_SIZE = 4096


def pod_resources_key(spec: Mapping[str, Any], flags: tuple[Any, ...] = ()) -> bytes | None:
    """A memo key for what a pod's resource sums are computed from (its containers' and init
    containers' resources, restart policies, overhead, pod-level resources), with `flags`
    saying which sum; None when the spec is not plain JSON (compute it without a memo)."""
    try:
        return orjson.dumps(
            (
                flags,
                [c.get("resources") for c in spec.get("containers") or ()],
                [
                    (c.get("resources"), c.get("restartPolicy"))
                    for c in spec.get("initContainers") or ()
                ],
                spec.get("overhead"),
                spec.get("resources"),
            )
        )
    except (AttributeError, TypeError, orjson.JSONEncodeError):
        return None  # not plain JSON: compute (and report errors) without the memo


def _pod_requests(
    spec: Mapping[str, Any],
    *,
    count_pod: bool,
    from_limits: bool,
    pod_level: bool,
    non_missing: Mapping[str, int] | None,
) -> ResourceVector:
    if not isinstance(spec, Mapping):
        raise TypeError("pod_requests needs the pod spec as a mapping")
    if "containers" not in spec and "spec" in spec:
        raise TypeError("pod_requests needs pod['spec'], not the whole pod")
    flags = (count_pod, from_limits, pod_level, non_missing is None)
    key = (
        pod_resources_key(spec, flags)
        if non_missing is None or non_missing is _NON_MISSING
        else None
    )
    if key is not None:
        known = _REQUESTS_MEMO.get(key)
        if known is not None:
            return known
    total = _compute_pod_requests(
        spec,
        count_pod=count_pod,
        from_limits=from_limits,
        pod_level=pod_level,
        non_missing=non_missing,
    )
    if key is not None:
        if len(_REQUESTS_MEMO) >= _REQUESTS_MEMO_SIZE:
            _REQUESTS_MEMO.clear()
        _REQUESTS_MEMO[key] = total
    return total


def _compute_pod_requests(
    spec: Mapping[str, Any],
    *,
    count_pod: bool,
    from_limits: bool,
    pod_level: bool,
    non_missing: Mapping[str, int] | None,
) -> ResourceVector:

    def requests_of(container: object, path: str) -> ResourceVector:
        return _container_requests(container, path, from_limits, non_missing)

    total = ResourceVector()
    for index, container in enumerate(spec.get("containers") or []):
        total += requests_of(container, f"spec.containers[{index}]")

    # KEP-753: sidecars run for the pod's whole life, so they add to the steady state and to
    # every init container that starts after them.
    sidecars = ResourceVector()
    init_peak = ResourceVector()
    for index, container in enumerate(spec.get("initContainers") or []):
        request = requests_of(container, f"spec.initContainers[{index}]")
        if container.get("restartPolicy") == _SIDECAR_RESTART_POLICY:
            total += request
            sidecars += request
            init_peak = init_peak.elementwise_max(sidecars)
        else:
            init_peak = init_peak.elementwise_max(request + sidecars)
    total = total.elementwise_max(init_peak)

    if pod_level:
        total = _apply_pod_level_requests(total, spec)
    total += ResourceVector.from_resource_list(spec.get("overhead"), where="spec.overhead")
    if count_pod:
        total += ResourceVector._of({PODS: 1})
    return total


def _container_requests(
    container: object, path: str, from_limits: bool, non_missing: Mapping[str, int] | None
) -> ResourceVector:
    if not isinstance(container, Mapping):
        raise TypeError(f"{path}: expected a container object")
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    amounts = ResourceVector.from_resource_list(
        requests, where=f"{path}.resources.requests"
    ).as_dict()
    if from_limits:
        limits = resources.get("limits") or {}
        limit_amounts = ResourceVector.from_resource_list(limits, where=f"{path}.resources.limits")
        for name, amount in limit_amounts.items():
            amounts.setdefault(name, amount)
    # Go's applyNonMissing: only a resource the container does not mention at all is defaulted.
    for name, amount in (non_missing or {}).items():
        amounts.setdefault(name, amount)
    return ResourceVector._of(amounts)


def _is_pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def _apply_pod_level_requests(total: ResourceVector, spec: Mapping[str, Any]) -> ResourceVector:
    requests = (spec.get("resources") or {}).get("requests") or {}
    pod_level = ResourceVector.from_resource_list(requests, where="spec.resources.requests")
    supported = {n: a for n, a in pod_level.items() if _is_pod_level_resource(n)}
    if not supported:
        return total
    return ResourceVector._of({**total.as_dict(), **supported})
