"""The fit rule both filter paths (vectorised and per-node Python) apply, and how they word a
node that does not fit."""

from __future__ import annotations

from core.resources import ResourceVector


def wanted_dimensions(request: ResourceVector) -> list[tuple[str, int]]:
    """Volcano's rule: only the dimensions a pod requests (> 0) are compared."""
    return [(dim, amount) for dim, amount in request.view().items() if amount > 0]


def insufficient(short: list[str]) -> str:
    """kube-scheduler's wording (`Insufficient cpu, Insufficient memory`), so identical reasons
    aggregate in its FailedScheduling events."""
    return ", ".join(f"Insufficient {dim}" for dim in short)
