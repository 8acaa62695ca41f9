"""Volcano's resource-exporter for the hollow nodes given a NUMA topology (`numa=2x16` in a
node profile): each publishes its node's Numatopology (`nodeinfo.volcano.sh/v1alpha1`, named
after the node): the cpus of each NUMA cell, the kubelet's cpu manager policy (`static`) and
topology manager policy, and keeps it current as Guaranteed pods pinning whole cpus bind and
leave (the free cpuset and each pod's cpus, as the exporter reads the kubelet's cpu manager).

The cpus a pod pins are chosen as the static cpu manager with a topology manager does: each
container's from the lowest cell with room for all of them, else across cells from the lowest.
Writes are coalesced: one merge patch per node with the state at the time it is written.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from core.api.nodeinfo import CPU_MANAGER_POLICY, NODEINFO_API_VERSION, TOPOLOGY_MANAGER_POLICY
from core.kube.client import NUMATOPOLOGIES, PODS, ApiError, KubeClient
from core.kube.informer import Informer
from core.numa import exclusive_cpus, format_cpuset

log = logging.getLogger("vulcan.sim.kubelet")

_TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class NumaShape:
    """A node's NUMA cells (`cells` of `cpus` each) and its topology manager policy."""

    cells: int
    cpus: int
    policy: str = "none"


class _PodCpus:
    """The fields of a pod the exporter reads."""

    __slots__ = ("containers", "key", "live", "name", "namespace", "node", "uid")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        self.namespace: str = meta.get("namespace") or ""
        self.name: str = meta["name"]
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid", "")
        self.node: str = spec.get("nodeName") or ""
        self.live = (obj.get("status") or {}).get("phase") not in _TERMINAL
        cpus = exclusive_cpus(spec) or ()
        names = [str(c.get("name") or "") for c in spec.get("containers") or ()]
        self.containers = tuple((n, c) for n, c in zip(names, cpus, strict=False) if c > 0)


@dataclass
class _NodeCpus:
    shape: NumaShape
    pods: dict[str, tuple[_PodCpus, list[tuple[str, list[int]]]]] = field(default_factory=dict)

    def cell_of(self, cpu: int) -> int:
        return cpu // self.shape.cpus

    def free(self) -> list[int]:
        taken = {c for _, containers in self.pods.values() for _, ids in containers for c in ids}
        return [c for c in range(self.shape.cells * self.shape.cpus) if c not in taken]

    def pin(self, pod: _PodCpus) -> None:
        free = self.free()
        pinned: list[tuple[str, list[int]]] = []
        for name, count in pod.containers:
            if len(free) < count:
                log.warning("no %d free cpus on %s for %s", count, pod.node, pod.key)
                break
            by_cell = [
                [c for c in free if self.cell_of(c) == cell] for cell in range(self.shape.cells)
            ]
            one = next((ids for ids in by_cell if len(ids) >= count), None)
            ids = one[:count] if one is not None else free[:count]
            pinned.append((name, ids))
            free = [c for c in free if c not in ids]
        self.pods[pod.uid] = (pod, pinned)

    def spec(self) -> dict[str, Any]:
        shape, total = self.shape, self.shape.cells * self.shape.cpus
        return {
            "policies": {CPU_MANAGER_POLICY: "static", TOPOLOGY_MANAGER_POLICY: shape.policy},
            "numares": {"cpu": {"allocatable": format_cpuset(self.free()), "capacity": total}},
            "cpuDetail": {
                str(c): {"numa": self.cell_of(c), "socket": self.cell_of(c), "core": c}
                for c in range(total)
            },
            "podAllocations": [
                {
                    "uid": pod.uid,
                    "name": pod.name,
                    "namespace": pod.namespace,
                    "containerAllocations": [
                        {"name": name, "allocations": {"cpu": format_cpuset(ids)}}
                        for name, ids in pinned
                    ],
                }
                for pod, pinned in self.pods.values()
            ],
        }


class NumaExporter:
    """The Numatopologies of `shapes` (node name -> its NUMA shape), kept current."""

    def __init__(self, client: KubeClient, shapes: dict[str, NumaShape]) -> None:
        self.client = client
        self._nodes = {name: _NodeCpus(shape) for name, shape in shapes.items()}
        self._where: dict[str, str] = {}  # pod uid -> node holding its cpus
        self._dirty: set[str] = set(shapes)
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        pods = Informer(self.client, PODS, _PodCpus, field_selector="spec.nodeName!=")
        pods.add_handlers(self._seen, lambda _old, pod: self._seen(pod), self._gone)
        self._tasks.append(asyncio.create_task(pods.run(), name="numa-exporter-pods"))
        await pods.wait_synced()
        await self._write_dirty()
        self._tasks.append(asyncio.create_task(self._writer(), name="numa-exporter-writes"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def _seen(self, pod: _PodCpus) -> None:
        node = self._nodes.get(pod.node)
        if node is None or not pod.containers:
            return
        if not pod.live:
            self._gone(pod)
        elif pod.uid not in node.pods:
            node.pin(pod)
            self._where[pod.uid] = pod.node
            self._mark(pod.node)

    def _gone(self, pod: _PodCpus) -> None:
        name = self._where.pop(pod.uid, None)
        if name is not None:
            self._nodes[name].pods.pop(pod.uid, None)
            self._mark(name)

    def _mark(self, name: str) -> None:
        self._dirty.add(name)
        self._wake.set()

    async def _writer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._write_dirty()
            except ApiError:
                log.exception("numa exporter: writing Numatopologies failed; retried")
                await asyncio.sleep(1.0)
                self._wake.set()

    async def _write_dirty(self) -> None:
        names, self._dirty = self._dirty, set()
        try:
            for name in sorted(names):
                await self._write(name)
        except BaseException:
            self._dirty |= names
            raise

    async def _write(self, name: str) -> None:
        spec = self._nodes[name].spec()
        try:
            await self.client.patch(NUMATOPOLOGIES, name, {"spec": spec})
        except ApiError as exc:
            if not exc.not_found:
                raise
            obj = {"apiVersion": NODEINFO_API_VERSION, "kind": "Numatopology"}
            await self.client.create(
                NUMATOPOLOGIES, {**obj, "metadata": {"name": name}, "spec": spec}
            )
