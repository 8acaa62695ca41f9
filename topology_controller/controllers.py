"""The hypernode-controller as the runtime takes it (`core.controller.runtime.build`)."""

from __future__ import annotations

from core.controller.informers import SharedInformers
from core.controller.manager import Controller, ControllerFactory
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy
from core.controller.runtime import Together, build
from core.kube.client import KubeClient
from core.kube.events import EventRecorder
from topology_controller.config import LabelDiscovery
from topology_controller.controller import HyperNodeDiscovery
from topology_controller.status import HYPERNODE_STATUS, HyperNodeStatusReconciler

HYPERNODE_CONTROLLER = HYPERNODE_STATUS


def factories(config: LabelDiscovery | None, retries: RetryPolicy) -> dict[str, ControllerFactory]:
    """Status (nodeCount, unmatched members) for every HyperNode, and discovery from node
    labels only when `config` is given (Volcano's discovery is off until its ConfigMap enables
    a source)."""

    def hypernode(
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
    ) -> Controller:
        status = build(
            HyperNodeStatusReconciler(client, recorder),
            informers,
            recorder,
            metrics,
            retries=retries,
        )
        if config is None:
            return status
        discovery = HyperNodeDiscovery(client, recorder, metrics, config)
        return Together(
            HYPERNODE_CONTROLLER,
            status,
            build(discovery, informers, recorder, metrics, retries=retries),
        )

    return {HYPERNODE_CONTROLLER: hypernode}
