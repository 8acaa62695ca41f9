"""Kubernetes resource quantities, resource vectors and pod requests.

Three layers, each mirroring the Go code the real cluster runs:

1. `Quantity` / `parse_quantity`: k8s.io/apimachinery/pkg/api/resource (quantity.go, suffix.go,
   amount.go). Values are kept exactly as (coefficient, power-of-ten exponent) integers; the int64
   accessors `value()` / `milli_value()` round away from zero and saturate like Go's.
2. `ResourceVector`: the scheduler's view of a ResourceList as integers (cpu in millicores,
   everything else via `value()`), with Volcano's comparison rules.
3. `pod_requests` / `pod_nonzero_requests`: k8s.io/component-helpers/resource `PodRequests`, as
   kube-scheduler's NodeResourcesFit filter and scorers compute it.

The layers live in their own modules, each importing only the ones before it:
`core.resources_quantity` (the `Quantity` type), `core.resources_parse` (`parse_quantity`),
`core.resources_format` (resource names and canonical strings), `core.resources_vector`
(`ResourceVector`) and `core.resources_pods` (pod requests). This module is their front: import
from here.

Stdlib only; nothing here does I/O.
"""

from __future__ import annotations

from core.resources_format import (
    CPU,
    EPHEMERAL_STORAGE,
    HUGEPAGES_PREFIX,
    MEMORY,
    PODS,
    format_bytes,
    format_cpu,
    format_quantity,
    format_shortfall,
    is_byte_resource,
)
from core.resources_parse import cpu_milli, parse_quantity, to_int
from core.resources_pods import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    pod_nonzero_requests,
    pod_requests,
    pod_resources_key,
    without_group,
)
from core.resources_quantity import INT64_MAX, INT64_MIN, Quantity, QuantityError, QuantityFormat
from core.resources_vector import (
    MissingDimension,
    ResourceVector,
    fits,
    insufficient_resources,
)

__all__ = [
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "HUGEPAGES_PREFIX",
    "INT64_MAX",
    "INT64_MIN",
    "MEMORY",
    "PODS",
    "MissingDimension",
    "Quantity",
    "QuantityError",
    "QuantityFormat",
    "ResourceVector",
    "cpu_milli",
    "fits",
    "format_bytes",
    "format_cpu",
    "format_quantity",
    "format_shortfall",
    "insufficient_resources",
    "is_byte_resource",
    "parse_quantity",
    "pod_nonzero_requests",
    "pod_requests",
    "pod_resources_key",
    "to_int",
    "without_group",
]
