"""Resource names as Kubernetes spells them (cpu, memory, pods, ...) and the canonical strings
for the scheduler's integer amounts of them (`format_quantity`, `format_cpu`, `format_bytes`,
`format_shortfall`).

Separate from `ResourceVector` (`core.resources_vector`) and the pod request sums
(`core.resources_pods`), which both use these names; everything public here is re-exported by
`core.resources`, the module to import from.
"""

from __future__ import annotations

import functools

from core.resources_quantity import Quantity, QuantityFormat

# ------------------------------------------------------------------------------ resource names

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
HUGEPAGES_PREFIX = "hugepages-"
_BYTE_RESOURCES = frozenset({MEMORY, EPHEMERAL_STORAGE, "storage"})


# --------------------------------------------------------------------------------- formatting


def format_cpu(milli: int) -> str:
    """Canonical string for millicores: 1500 -> "1500m", 2000 -> "2", 1_000_000 -> "1k"."""
    return str(Quantity(milli, -3, QuantityFormat.DECIMAL_SI))


def format_bytes(n: int) -> str:
    """Canonical BinarySI string for a byte count, as Go prints it.

    A multiple of 1024 gets a binary suffix ("2Gi", "1536Mi"); other values are plain integers
    ("1500"), except that Go prints values below 1024 in DecimalSI, so 1000 -> "1k".
    """
    return str(Quantity(n, 0, QuantityFormat.BINARY_SI))


def is_byte_resource(name: str) -> bool:
    """Resources measured in bytes, shown with binary suffixes."""
    return name in _BYTE_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


@functools.lru_cache(maxsize=8192)
def format_quantity(name: str, amount: int) -> str:
    """Canonical string for a `ResourceVector` amount of resource `name` (round-trip safe).
    Remembered: reasons word the same amounts over and over, and a Quantity is slow to make."""
    if name == CPU:
        return format_cpu(amount)
    if is_byte_resource(name):
        return format_bytes(amount)
    return str(Quantity(amount, 0, QuantityFormat.DECIMAL_SI))


def format_shortfall(name: str, need: int, free: int) -> str:
    """A scheduling reason: "not enough nvidia.com/gpu (need 4, free 2)"."""
    return (
        f"not enough {name} (need {format_quantity(name, need)}, "
        f"free {format_quantity(name, free)})"
    )
