"""Filter and prioritize for pods vulcan does not hold back: a ledger-aware fit check and
scoring through the plugin framework. Pure functions of the cache, the ledger and the request —
no API calls, no models; this is the hot path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.cache import ClusterCache
from core.records import NodeRecord
from core.resources import ResourceVector, pod_requests
from extender.ledger import GangLedger
from plugins.framework import Framework, NodeState

_ZERO = ResourceVector()
UNKNOWN_NODE = "node unknown to vulcan (not in its cache yet)"


def request_of(spec: dict[str, Any]) -> ResourceVector:
    return pod_requests(spec)


def _node_of(
    cache: ClusterCache, name: str, objects: dict[str, dict[str, Any]] | None
) -> NodeRecord | None:
    node = cache.nodes.get(name)
    if node is None and objects is not None and name in objects:
        # Non-cache mode: kube-scheduler sent the Node; use it until our informer has it.
        return NodeRecord(objects[name])
    return node


def fit_filter(
    cache: ClusterCache,
    ledger: GangLedger,
    pod_key: str,
    request: ResourceVector,
    names: Sequence[str],
    objects: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(passing names, failed name -> reason). Free = allocatable - requested - reserved (the
    pod's own reservation excluded); only dimensions the pod requests are compared."""
    wanted = [(dim, amount) for dim, amount in request.view().items() if amount > 0]
    requested = cache.node_requested
    passed: list[str] = []
    failed: dict[str, str] = {}
    for name in names:
        node = _node_of(cache, name, objects)
        if node is None:
            failed[name] = UNKNOWN_NODE
            continue
        allocatable = node.allocatable.view()
        used = requested.get(name, _ZERO).view()
        reserved = ledger.reserved_on(name, excluding=pod_key).view()
        short = None
        for dim, amount in wanted:
            if allocatable.get(dim, 0) - used.get(dim, 0) - reserved.get(dim, 0) < amount:
                short = dim if short is None else f"{short}, {dim}"
        if short is None:
            passed.append(name)
        else:
            # kube-scheduler's wording, so identical reasons aggregate in FailedScheduling.
            failed[name] = "Insufficient " + short.replace(", ", ", Insufficient ")
    return passed, failed


def node_states(
    cache: ClusterCache,
    ledger: GangLedger,
    pod_key: str,
    names: Sequence[str],
    objects: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[str], list[NodeState]]:
    """The scoring view of each known candidate: allocatable and what is requested or reserved."""
    known: list[str] = []
    states: list[NodeState] = []
    requested = cache.node_requested
    for name in names:
        node = _node_of(cache, name, objects)
        if node is None:
            continue
        used = requested.get(name, _ZERO)
        reserved = ledger.reserved_on(name, excluding=pod_key)
        if not reserved.is_zero():
            used = used + reserved
        known.append(name)
        states.append(NodeState(name, node.allocatable, used))
    return known, states


def prioritize(
    framework: Framework,
    cache: ClusterCache,
    ledger: GangLedger,
    pod_key: str,
    request: ResourceVector,
    names: Sequence[str],
    objects: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[str], list[int]]:
    known, states = node_states(cache, ledger, pod_key, names, objects)
    if not states:
        return [], []
    return known, framework.extender_scores(request, states)
