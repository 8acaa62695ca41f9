"""`NodeColumns`: allocatable and requested per node as dense int64 numpy columns (`ROW_DIMS`),
which the extender's vectorised filter and scoring read (extender/fastpath.py).

Separate from `ClusterCache` (`core.cache`), which owns one and refreshes a node's slot on every
change it makes; the only module of the cache that needs numpy. `core.cache` re-exports both
names.
"""

from __future__ import annotations

import numpy as np

from core.resources import ResourceVector

# Dense per-node columns for the extender's vectorised filter and scoring (extender/fastpath.py):
# allocatable and requested of the dimensions scheduling reads most.
ROW_DIMS = ("cpu", "memory", "nvidia.com/gpu", "pods")


class NodeColumns:
    """Allocatable (`cap[d, slot]`) and requested (`used[d, slot]`) per node as int64 numpy
    columns, one slot per node, kept current by the cache on every change it makes."""

    LIMIT = 1 << 46  # values below it convert to float64 exactly and cannot overflow int64 math

    def __init__(self) -> None:
        self.slot: dict[str, int] = {}
        self._free: list[int] = []
        self.cap = np.zeros((len(ROW_DIMS), 1024), np.int64)
        self.used = np.zeros((len(ROW_DIMS), 1024), np.int64)
        self.too_big = 0  # nodes with a value >= LIMIT: the vectorised path stands aside

    def set(self, name: str, allocatable: ResourceVector | None, requested: ResourceVector) -> None:
        slot = self.slot.get(name)
        if slot is not None and self.cap[0, slot] < 0:  # it was marked too big
            self.too_big -= 1
        if allocatable is None:
            if slot is not None:
                del self.slot[name]
                self.cap[:, slot] = 0
                self.used[:, slot] = 0
                self._free.append(slot)
            return
        if slot is None:
            if not self._free:
                size = self.cap.shape[1]
                self.cap = np.concatenate([self.cap, np.zeros_like(self.cap)], axis=1)
                self.used = np.concatenate([self.used, np.zeros_like(self.used)], axis=1)
                self._free.extend(range(2 * size - 1, size - 1, -1))
            slot = self.slot[name] = self._free.pop()
        a, u = allocatable.view(), requested.view()
        row = [a.get(dim, 0) for dim in ROW_DIMS] + [u.get(dim, 0) for dim in ROW_DIMS]
        if all(0 <= value < self.LIMIT for value in row):
            width = len(ROW_DIMS)
            self.cap[:, slot] = row[:width]
            self.used[:, slot] = row[width:]
        else:
            self.cap[:, slot] = 0
            self.cap[0, slot] = -1
            self.too_big += 1
