"""filter and prioritize for a Guaranteed pod where nodes report their NUMA topology and the
conf names the numa-aware plugin (`plugins.builtin.numaaware`): the candidates whose cells
cannot align its cpus are refused with the reason, and the cells an assignment uses add to
its score. Every other request never gets here (the server checks `cache.numa` first)."""

from __future__ import annotations

from collections.abc import Sequence

from core.api import keys
from core.cache import ClusterCache
from core.numa import NumaAsk, numa_ask
from core.records import NodeRecord
from core.resources import ResourceVector
from extender.ledger import GangLedger
from extender.protocol import PodInfo
from plugins.builtin.numaaware import NumaSettings
from plugins.framework.node_order import Framework, NodeState
from plugins.model.numa_fit import NumaNodes, pods_holding

_ZERO = ResourceVector()


def _ask(pod: PodInfo) -> NumaAsk | None:
    annotations = pod.metadata.get("annotations") or {}
    return numa_ask(pod.spec, str(annotations.get(keys.NUMA_TOPOLOGY_POLICY) or ""))


def _nodes(cache: ClusterCache, ledger: GangLedger, pod: PodInfo) -> NumaNodes:
    """What holds cpus on each node: pods bound there, and gang members reserved there (the
    asking pod's own reservation aside)."""

    def held(key: str) -> str | None:
        reservation = ledger.reservation_of(key)
        return reservation.node if reservation is not None else None

    return NumaNodes(cache.numa, pods_holding(cache.live_view(), held, (pod.key,)))


def refusals(
    settings: NumaSettings | None,
    cache: ClusterCache,
    ledger: GangLedger,
    pod: PodInfo,
    names: Sequence[str],
) -> dict[str, str] | None:
    """Candidate -> why the conf's numa-aware plugin (`settings`) refuses it; None when it has
    nothing to say (no filter in the conf, or not a Guaranteed pod)."""
    if settings is None or not settings.filters:
        return None
    ask = _ask(pod)
    if ask is None:
        return None
    nodes = _nodes(cache, ledger, pod)
    refused: dict[str, str] = {}
    for name in names:
        why = settings.plugin.refusal(nodes, ask, name)
        if why is not None:
            refused[name] = why
    return refused


def scores(
    framework: Framework,
    cache: ClusterCache,
    ledger: GangLedger,
    pod: PodInfo,
    request: ResourceVector,
    names: Sequence[str],
) -> list[int] | None:
    """The candidates' scores with the plugin's added to the conf's node order (both raw,
    then scaled to kube-scheduler's 0..10 together); None when the plugin does not score this
    pod (no scores in the conf, not a Guaranteed pod)."""
    settings = framework.session.numa
    if settings is None or not settings.scores:
        return None
    ask = _ask(pod)
    if ask is None:
        return None
    states = []
    for name in names:
        node: NodeRecord | None = cache.nodes.get(name)
        if node is None:
            return None  # a candidate this cache has not seen: the plain answer stands
        used = cache.node_requested.get(name, _ZERO)
        reserved = ledger.by_node.get(name)
        if reserved is not None and not reserved.is_zero():
            used = used + reserved
        states.append(NodeState(name, node.allocatable, used))
    raw = framework.score(request, states)
    extra = settings.plugin.scores(_nodes(cache, ledger, pod), ask, names)
    return framework.normalize([a + b for a, b in zip(raw, extra, strict=True)])
