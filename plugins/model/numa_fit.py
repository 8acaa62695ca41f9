"""NUMA alignment of a Guaranteed pod's cpus on a node, as Volcano's numa-aware plugin decides
it (pkg/scheduler/plugins/numaaware: its cpu hint provider and topology-manager policies, which
follow the kubelet's): counts of cpus per NUMA cell stand in for cpusets.

Per container, in order:
- hints: every non-empty set of cells whose free cpus hold the request; a hint is preferred
  when its size is the fewest cells whose capacity could hold the request at all;
- the policy merges them into the best hint (preferred first, then the narrowest, then the
  lowest cells) and admits: `none` and `best-effort` always, `restricted` a preferred hint,
  `single-numa-node` a preferred hint of one cell;
- the cpus are taken from the best hint's cells first, the rest from any other cell.

A container whose cpu is not a whole number asks for nothing (no preference). Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

from core.numa import NumaAsk
from core.records import PodRecord
from core.records.numa import NumaRecord

if TYPE_CHECKING:
    from core.cache import Snapshot

__all__ = [
    "BEST_EFFORT",
    "NONE",
    "POLICIES",
    "RESTRICTED",
    "SINGLE_NUMA_NODE",
    "Hint",
    "NumaNodes",
    "Verdict",
    "best_hint",
    "cpu_hints",
    "judge",
    "numa_nodes",
    "numa_reason",
    "pods_holding",
    "take",
]

NONE = "none"
BEST_EFFORT = "best-effort"
RESTRICTED = "restricted"
SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)
STATIC = "static"

# kube-scheduler's phrasing ("node(s) ..."), Volcano's words in parentheses.
_PREFIX = "node(s) had NUMA topology affinity errors"


def numa_reason(detail: str) -> str:
    return f"{_PREFIX} ({detail})"


@dataclass(frozen=True, slots=True)
class Hint:
    cells: frozenset[int] | None  # None: any cell
    preferred: bool


def cpu_hints(capacity: Mapping[int, int], free: Mapping[int, int], request: int) -> list[Hint]:
    """The cpu provider's hints for `request` cpus (kubelet's generateCPUTopologyHints)."""
    cells = sorted(capacity)
    smallest = len(cells)
    fitting: list[tuple[int, ...]] = []
    for size in range(1, len(cells) + 1):
        for mask in combinations(cells, size):
            if sum(capacity[c] for c in mask) >= request and size < smallest:
                smallest = size
            if sum(free.get(c, 0) for c in mask) >= request:
                fitting.append(mask)
    return [Hint(frozenset(mask), len(mask) == smallest) for mask in fitting]


def _bits(cells: frozenset[int]) -> int:
    return sum(1 << c for c in cells)


def _narrower(a: frozenset[int], b: frozenset[int]) -> bool:
    """kubelet's BitMask.IsNarrowerThan: fewer cells, or as many and a lower mask."""
    if len(a) == len(b):
        return _bits(a) < _bits(b)
    return len(a) < len(b)


def best_hint(policy: str, cells: list[int], hints: list[Hint] | None) -> tuple[Hint, bool]:
    """(the best hint, admitted) under `policy`; `hints` None: the container asks nothing."""
    if policy not in (BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE):
        return Hint(None, False), True  # none (and a policy the plugin does not know)
    every = frozenset(cells)
    candidates = [Hint(None, True)] if hints is None else (hints or [Hint(None, False)])
    if policy == SINGLE_NUMA_NODE:
        candidates = [
            h for h in candidates if h.preferred and (h.cells is None or len(h.cells) == 1)
        ]
    best = Hint(every, False)
    for hint in candidates:
        affinity = every if hint.cells is None else hint.cells & every
        if not affinity:
            continue
        if hint.preferred and not best.preferred:
            best = Hint(affinity, True)
        elif hint.preferred == best.preferred and _narrower(affinity, best.cells or every):
            best = Hint(affinity, hint.preferred)
    return best, policy == BEST_EFFORT or best.preferred


def take(free: dict[int, int], request: int, hint: Hint) -> dict[int, int]:
    """The cpus taken per cell for `request` (the best hint's cells first, lowest first, then
    any other); nothing when the node has too few free (kubelet's takeByTopology fails)."""
    if request <= 0 or sum(free.values()) < request:
        return {}
    order = sorted(free)
    if hint.cells is not None:
        order = [c for c in order if c in hint.cells] + [c for c in order if c not in hint.cells]
    taken: dict[int, int] = {}
    left = request
    for cell in order:
        amount = min(left, free[cell])
        if amount > 0:
            taken[cell] = amount
            left -= amount
        if left == 0:
            break
    return taken


@dataclass(frozen=True, slots=True)
class Verdict:
    """A pod on a node: refused with `reason`, or admitted taking `taken` (cell -> cpus)."""

    reason: str | None
    taken: Mapping[int, int]

    @property
    def cells_used(self) -> int:
        return sum(1 for amount in self.taken.values() if amount > 0)


_NO_CONSTRAINT = Verdict(None, {})


def judge(
    ask: NumaAsk,
    cpu_policy: str | None,
    topology_policy: str,
    capacity: Mapping[int, int],
    free: Mapping[int, int],
) -> Verdict:
    """Volcano's predicate for a Guaranteed pod on a node whose topology is `cpu_policy` (None:
    the node reports none), `topology_policy`, cells' `capacity` and `free` cpus."""
    if ask.policy and ask.policy != NONE:
        # The pod names a policy: the node must report the same, with the static cpu manager.
        if cpu_policy is None:
            return Verdict(numa_reason("numa info is empty"), {})
        if cpu_policy != STATIC:
            return Verdict(numa_reason("cpu manager policy isn't static"), {})
        if ask.policy != topology_policy:
            detail = f"task topology policy[{ask.policy}] is different with node[{topology_policy}]"
            return Verdict(numa_reason(detail), {})
        if not any(free.values()):
            return Verdict(numa_reason("cpu allocatable map is empty"), {})
    elif cpu_policy != STATIC or topology_policy in ("", NONE):
        return _NO_CONSTRAINT
    cells = sorted(capacity)
    left = dict(free)
    taken: dict[int, int] = {}
    for name, request in zip(ask.names, ask.cpus, strict=False):
        hints = cpu_hints(capacity, left, request) if request > 0 else None
        hint, admitted = best_hint(topology_policy, cells, hints)
        if not admitted:
            detail = f"container {name} cannot be assigned by numa under {topology_policy}"
            return Verdict(numa_reason(detail), {})
        for cell, amount in take(left, request, hint).items():
            left[cell] -= amount
            taken[cell] = taken.get(cell, 0) + amount
    return Verdict(None, taken)


class NumaNodes:
    """The nodes' NUMA topologies as one scheduling decision sees them: each node's free cpus
    per cell, less what pods bound there hold that its exporter has not reported yet (Volcano's
    unassigned NUMA pods) and what this decision has placed (`place`)."""

    def __init__(
        self,
        records: Mapping[str, NumaRecord],
        pods_on: Callable[[str], Iterable[PodRecord]],
    ) -> None:
        self.records = records
        self._pods_on = pods_on
        self._free: dict[str, dict[int, int]] = {}

    def free(self, node: str) -> dict[int, int]:
        free = self._free.get(node)
        if free is None:
            record = self.records[node]
            free = self._free[node] = record.cell_free()
            for pod in self._pods_on(node):
                ask = pod.numa
                if ask is None or pod.uid in record.assigned or pod.key in record.assigned:
                    continue
                verdict = self._judge(ask, record, free)
                for cell, amount in verdict.taken.items():
                    free[cell] -= amount
        return free

    @staticmethod
    def _judge(ask: NumaAsk, record: NumaRecord, free: Mapping[int, int]) -> Verdict:
        return judge(ask, record.cpu_policy, record.topology_policy, record.cell_capacity(), free)

    def verdict(self, ask: NumaAsk, node: str) -> Verdict:
        record = self.records.get(node)
        if record is None:
            return judge(ask, None, "", {}, {})
        return self._judge(ask, record, self.free(node))

    def reason(self, ask: NumaAsk | None, node: str) -> str | None:
        if ask is None:
            return None
        return self.verdict(ask, node).reason

    def place(self, ask: NumaAsk | None, node: str) -> None:
        if ask is None or node not in self.records:
            return
        free = self.free(node)
        for cell, amount in self.verdict(ask, node).taken.items():
            free[cell] -= amount


def numa_nodes(
    snapshot: Snapshot,
    members: Iterable[PodRecord],
    held: Callable[[str], str | None] | None = None,
) -> NumaNodes | None:
    """The NUMA view for planning `members`: None (no check at all) unless some node reports
    its topology in `snapshot` (the extender leaves them out without the plugin) and some
    member is Guaranteed. Other Guaranteed pods count where they are bound, or where `held`
    (pod key -> node) says their reservation is."""
    if not snapshot.numa:
        return None  # the common cluster: nothing more to look at
    members = list(members)
    if not any(pod.numa is not None for pod in members):
        return None
    own = {pod.key for pod in members}
    return NumaNodes(snapshot.numa, pods_holding(snapshot, held or _nowhere, own))


def _nowhere(_key: str) -> str | None:
    return None


def pods_holding(
    snapshot: Snapshot, held: Callable[[str], str | None], own: Iterable[str] = ()
) -> Callable[[str], list[PodRecord]]:
    """node -> the Guaranteed pods holding cpus there: bound (not finished), or pending with
    a reservation there (`held`), except `own`."""
    pods, on_node = snapshot.pods, snapshot.pods_by_node
    reserved: dict[str, list[PodRecord]] = {}
    skip = set(own)
    for key in snapshot.numa_pods:
        pod = pods.get(key)
        if pod is not None and pod.node is None and key not in skip:
            node = held(key)
            if node is not None:
                reserved.setdefault(node, []).append(pod)

    def pods_on(node: str) -> list[PodRecord]:
        found = [pods.get(key) for key in on_node.get(node, ())]
        bound = [p for p in found if p is not None and p.occupies_node and p.key not in skip]
        return bound + reserved.get(node, [])

    return pods_on
