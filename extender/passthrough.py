"""Filter and prioritize for pods vulcan does not hold back: a ledger-aware fit check and
scoring through the plugin framework. Pure functions of the cache, the ledger and the request —
no API calls, no models; this is the hot path.

Both are memoised per request shape and node (`ShapeMemo`): a node's verdict and raw score only
change when its allocatable, its requested total or its reservations change, and the cache and
the ledger replace those (immutable) vectors on every change. So consecutive pods of one job —
same requests — recompute only the nodes that changed since the last pod (typically the node
the last pod was bound to), and a 5,000-node call costs a few dict lookups per node.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from core.cache import ClusterCache
from core.records import NodeRecord
from core.resources import ResourceVector, pod_requests
from extender.ledger import GangLedger
from plugins.framework import Framework, NodeState

_ZERO = ResourceVector()
UNKNOWN_NODE = "node unknown to vulcan (not in its cache yet)"
_UNSET: Any = object()

# Memo entry: [allocatable, requested, reserved, verdict (None = fits, str = reason), score]
_ALLOC, _USED, _RESERVED, _VERDICT, _SCORE = range(5)


def request_of(spec: dict[str, Any]) -> ResourceVector:
    return pod_requests(spec)


class ShapeMemo:
    """Per request shape (its resource amounts), per node: the last verdict and raw score,
    valid while the node's three vectors are the very same objects."""

    __slots__ = ("_shapes", "max_shapes")

    def __init__(self, max_shapes: int = 64) -> None:
        self._shapes: OrderedDict[tuple[tuple[str, int], ...], dict[str, list[Any]]] = OrderedDict()
        self.max_shapes = max_shapes

    def table(self, request: ResourceVector) -> dict[str, list[Any]]:
        shape = tuple(sorted(request.view().items()))
        table = self._shapes.get(shape)
        if table is None:
            table = self._shapes[shape] = {}
            if len(self._shapes) > self.max_shapes:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(shape)
        return table

    def clear(self) -> None:
        self._shapes.clear()


class _Lookup:
    """Per-call view of a node's allocatable, requested and reserved vectors."""

    __slots__ = ("nodes", "objects", "own", "requested", "reserved")

    def __init__(
        self,
        cache: ClusterCache,
        ledger: GangLedger,
        pod_key: str,
        objects: dict[str, dict[str, Any]] | None,
    ) -> None:
        self.nodes = cache.nodes
        self.requested = cache.node_requested
        self.reserved = ledger.by_node
        self.own = ledger.reservation_of(pod_key)
        self.objects = objects

    def node(self, name: str) -> NodeRecord | None:
        node = self.nodes.get(name)
        if node is None and self.objects is not None and name in self.objects:
            # Non-cache mode: kube-scheduler sent the Node; use it until our informer has it.
            node = NodeRecord(self.objects[name])
        return node

    def reserved_on(self, name: str) -> ResourceVector:
        reserved = self.reserved.get(name, _ZERO)
        own = self.own
        if own is not None and own.node == name:
            # A pod's own reservation is not held against it.
            reserved = reserved - own.request
        return reserved


def _entry(
    table: dict[str, list[Any]],
    name: str,
    alloc: ResourceVector,
    used: ResourceVector,
    reserved: ResourceVector,
) -> list[Any]:
    entry = table.get(name)
    if (
        entry is None
        or entry[_ALLOC] is not alloc
        or entry[_USED] is not used
        or (entry[_RESERVED] is not reserved and entry[_RESERVED] != reserved)
    ):
        entry = [alloc, used, reserved, _UNSET, _UNSET]
        table[name] = entry
    return entry


def fit_filter(
    cache: ClusterCache,
    ledger: GangLedger,
    pod_key: str,
    request: ResourceVector,
    names: Sequence[str],
    objects: dict[str, dict[str, Any]] | None = None,
    memo: ShapeMemo | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(passing names, failed name -> reason). Free = allocatable - requested - reserved (the
    pod's own reservation excluded); only dimensions the pod requests are compared."""
    wanted = [(dim, amount) for dim, amount in request.view().items() if amount > 0]
    table = (memo or ShapeMemo()).table(request)
    look = _Lookup(cache, ledger, pod_key, objects)
    requested = look.requested
    passed: list[str] = []
    failed: dict[str, str] = {}
    for name in names:
        node = look.node(name)
        if node is None:
            failed[name] = UNKNOWN_NODE
            continue
        alloc = node.allocatable
        used = requested.get(name, _ZERO)
        reserved = look.reserved_on(name)
        entry = _entry(table, name, alloc, used, reserved)
        verdict = entry[_VERDICT]
        if verdict is _UNSET:
            verdict = entry[_VERDICT] = _verdict(wanted, alloc, used, reserved)
        if verdict is None:
            passed.append(name)
        else:
            failed[name] = verdict
    return passed, failed


def _verdict(
    wanted: list[tuple[str, int]],
    alloc: ResourceVector,
    used: ResourceVector,
    reserved: ResourceVector,
) -> str | None:
    allocatable, taken, promised = alloc.view(), used.view(), reserved.view()
    short = [
        dim
        for dim, amount in wanted
        if allocatable.get(dim, 0) - taken.get(dim, 0) - promised.get(dim, 0) < amount
    ]
    if not short:
        return None
    # kube-scheduler's wording, so identical reasons aggregate in FailedScheduling events.
    return ", ".join(f"Insufficient {dim}" for dim in short)


def prioritize(
    framework: Framework,
    cache: ClusterCache,
    ledger: GangLedger,
    pod_key: str,
    request: ResourceVector,
    names: Sequence[str],
    objects: dict[str, dict[str, Any]] | None = None,
    memo: ShapeMemo | None = None,
) -> tuple[list[str], list[int]]:
    table = (memo or ShapeMemo()).table(request)
    look = _Lookup(cache, ledger, pod_key, objects)
    requested = look.requested
    known: list[str] = []
    scores: list[float] = []
    stale: list[int] = []
    stale_states: list[NodeState] = []
    for name in names:
        node = look.node(name)
        if node is None:
            continue
        alloc = node.allocatable
        used = requested.get(name, _ZERO)
        reserved = look.reserved_on(name)
        entry = _entry(table, name, alloc, used, reserved)
        score = entry[_SCORE]
        if score is _UNSET:
            stale.append(len(scores))
            stale_states.append(
                NodeState(name, alloc, used if reserved.is_zero() else used + reserved)
            )
            score = 0.0
        known.append(name)
        scores.append(score)
    if stale_states:
        fresh = framework.score(request, stale_states)
        for index, state, value in zip(stale, stale_states, fresh, strict=True):
            scores[index] = value
            table[state.name][_SCORE] = value
    if not known:
        return [], []
    return known, framework.normalize(scores)
