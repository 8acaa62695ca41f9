"""The collected API objects turned into what vulcan's scheduler reasons about: the cluster as
its cache keeps it (`core.cache`: nodes' free room from pods' requests, queues' allocated), the
queues' shares (from the extender's last pass when it answered, else computed here as the
extender's pass computes them: `plugins.model.queue_inputs.queue_pass` with the scheduler conf's
queue plugin), and the gang in focus as Volcano's gang plugin counts it.

Pure: no I/O (the records and the cache are in-memory structures).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.cache import ClusterCache, Snapshot
from core.records import NodeRecord, PodGroupRecord, PodRecord, QueueRecord
from core.resources import ResourceVector, format_quantity
from plugins.framework.config import default_config
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy
from plugins.model import gang as gangs
from plugins.model.feasibility import static_reason
from plugins.model.queue_inputs import queue_pass
from plugins.model.queue_share import QueueInput, requested_dims
from plugins.model.share_json import model_from_rows
from plugins.model.share_model import QueueShares

if TYPE_CHECKING:
    from explain.collect import Collected

_ZERO = ResourceVector()


@dataclass(slots=True)
class World:
    snapshot: Snapshot
    model: QueueShares
    inputs: dict[str, QueueInput]
    shares_from: str  # "the extender's last pass" or "computed by explain (proportion)"
    plugin: str  # "proportion" | "capacity"
    reserved_pods: set[str] = field(default_factory=set)  # extender ledger (focus gang)
    held_pods: set[str] = field(default_factory=set)  # extender bind barrier (focus gang)

    def view(self, group_key: str) -> gangs.GangView | None:
        return gangs.gang_view(
            self.snapshot, group_key, allocated=self.reserved_pods, binding=self.held_pods
        )

    def schedulable(self, pod: PodRecord | None = None) -> list[str]:
        """The nodes kube-scheduler's node filters let `pod` onto (readiness, cordon, taints
        and tolerations, node affinity); without a pod, those a pod without constraints may
        use."""
        constraints = pod.constraints if pod is not None else None
        return sorted(
            n for n, node in self.snapshot.nodes.items() if static_reason(node, constraints) is None
        )

    def largest_free(
        self,
        dim: str,
        *,
        freed: Mapping[str, ResourceVector] | None = None,
        pod: PodRecord | None = None,
    ) -> tuple[str, int]:
        """(node, amount) of the node `pod` may use (see `schedulable`) with the most of `dim`
        free (first by name on ties); `freed` adds room being freed per node."""
        best, amount = "", -1
        for name in self.schedulable(pod):
            free = self.snapshot.node_free(name) + (freed or {}).get(name, _ZERO)
            if free.get(dim) > amount:
                best, amount = name, free.get(dim)
        return best, max(amount, 0)


def build_world(found: Collected, session: Policy | None = None) -> World:
    """`session`: the scheduler conf's (Volcano's default conf when None), whose queue plugin
    computes the shares when the extender's last pass is not at hand."""
    cache = ClusterCache()
    for obj in found.nodes:
        cache.on_node_add(NodeRecord(obj))
    for obj in found.queues:
        cache.on_queue_add(QueueRecord(obj))
    for obj in found.podgroups:
        cache.on_podgroup_add(PodGroupRecord(obj))
    for obj in found.pods:
        cache.on_pod_add(PodRecord(obj))
    snapshot = cache.live_view()  # nothing changes it any more
    world: World
    if found.extender_queues and found.extender_queues.get("queues") is not None:
        model, inputs, plugin = model_from_extender(found.extender_queues)
        world = World(snapshot, model, inputs, "the extender's last pass", plugin)
    else:
        # The ledger's reservations are the extender's alone: none are known here.
        session = session or build_policy(default_config())
        queues = queue_pass(snapshot, {}, session.open_queues)
        model = queues.model  # type: ignore[assignment]
        plugin = session.queue_model
        world = World(snapshot, model, queues.inputs, f"computed by explain ({plugin})", plugin)
    gang = found.extender_gang or {}
    world.reserved_pods = {r["pod"] for r in gang.get("reservations") or () if "pod" in r}
    world.held_pods = set((gang.get("hold") or {}).get("pods") or ())
    return world


# ------------------------------------------------------------------------------ queues


def model_from_extender(
    data: Mapping[str, Any],
) -> tuple[QueueShares, dict[str, QueueInput], str]:
    """The share model exactly as the extender's last pass left it (GET /debug/queues), so
    the queue checks here give the extender's own answers and wording."""
    return model_from_rows(data)


# ------------------------------------------------------------------------------ words


def amounts(vector: ResourceVector | None, dims: list[str] | None = None) -> str:
    """A vector in words, e.g. "cpu 8, memory 32Gi" (pods and zeros left out unless named)."""
    if vector is None:
        return "none"
    names = dims if dims is not None else requested_dims(vector)
    if not names:
        return "nothing"
    return ", ".join(f"{n} {format_quantity(n, vector.get(n))}" for n in names)


def amount(name: str, value: int) -> str:
    return f"{format_quantity(name, value)} {name}"
