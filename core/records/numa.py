"""The Numatopology record: what the numa-aware plugin reads of a node's NUMA topology (Volcano's
resource-exporter's object, named after its node): the kubelet's policies and, per NUMA cell,
its cpus and how many of them are free."""

from __future__ import annotations

import math
from typing import Any

from core.api.nodeinfo import CPU_MANAGER_POLICY, TOPOLOGY_MANAGER_POLICY
from core.numa import parse_cpuset
from core.resources_parse import parse_quantity


class NumaRecord:
    __slots__ = (
        "assigned",
        "capacity",
        "cells",
        "cpu_policy",
        "free",
        "key",
        "name",
        "rv",
        "topology_policy",
        "uid",
    )

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        self.name: str = meta["name"]
        self.key = self.name
        self.uid: str = meta.get("uid", "")
        self.rv: str = meta.get("resourceVersion", "")
        policies = spec.get("policies") or {}
        self.cpu_policy: str = str(policies.get(CPU_MANAGER_POLICY) or "")
        self.topology_policy: str = str(policies.get(TOPOLOGY_MANAGER_POLICY) or "")
        cell_of: dict[int, int] = {}
        for cpu, info in (spec.get("cpuDetail") or {}).items():
            try:
                cell_of[int(cpu)] = int((info or {}).get("numa") or 0)
            except (TypeError, ValueError):
                continue
        cells = sorted(set(cell_of.values()))
        self.cells: tuple[int, ...] = tuple(cells)
        self.capacity: tuple[int, ...] = tuple(
            sum(1 for c in cell_of.values() if c == cell) for cell in cells
        )
        cpu = (spec.get("numares") or {}).get("cpu") or {}
        try:
            free_ids = parse_cpuset(str(cpu.get("allocatable") or ""))
        except ValueError:
            free_ids = []
        # Volcano's cpu provider keeps the node's reserved cpus (resReserved.cpu, rounded up)
        # out of every hint; taken here from the lowest cpu ids, as the kubelet reserves them.
        reserved = set(sorted(cell_of)[: _reserved(spec.get("resReserved") or {})])
        free_ids = [c for c in free_ids if c in cell_of and c not in reserved]
        self.free: tuple[int, ...] = tuple(
            sum(1 for c in free_ids if cell_of[c] == cell) for cell in cells
        )
        # Pods the exporter has already accounted for (their uid, and namespace/name).
        assigned: set[str] = set()
        for pod in spec.get("podAllocations") or ():
            if pod.get("uid"):
                assigned.add(str(pod["uid"]))
            if pod.get("name"):
                assigned.add(f"{pod.get('namespace') or ''}/{pod['name']}")
        self.assigned: frozenset[str] = frozenset(assigned)

    def cell_free(self) -> dict[int, int]:
        return dict(zip(self.cells, self.free, strict=True))

    def cell_capacity(self) -> dict[int, int]:
        return dict(zip(self.cells, self.capacity, strict=True))


def _reserved(res_reserved: dict[str, Any]) -> int:
    text = res_reserved.get("cpu")
    if not text:
        return 0
    try:
        return math.ceil(parse_quantity(text).milli_value() / 1000)
    except (ValueError, TypeError):
        return 0
