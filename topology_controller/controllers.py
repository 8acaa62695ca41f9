"""The hypernode-controller as the runtime takes it (`core.controller.runtime.build`)."""

from __future__ import annotations

from core.controller.informers import SharedInformers
from core.controller.manager import Controller, ControllerFactory
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy
from core.controller.runtime import build
from core.kube.client import KubeClient
from core.kube.events import EventRecorder
from topology_controller.config import LabelDiscovery
from topology_controller.controller import HYPERNODE_CONTROLLER, HyperNodeDiscovery


def factories(config: LabelDiscovery | None, retries: RetryPolicy) -> dict[str, ControllerFactory]:
    """None when no label discovery is configured: the controller is then not run (Volcano's
    discovery is off until its ConfigMap enables a source)."""
    if config is None:
        return {}

    def hypernode(
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
    ) -> Controller:
        return build(
            HyperNodeDiscovery(client, recorder, metrics, config),
            informers,
            recorder,
            metrics,
            retries=retries,
        )

    return {HYPERNODE_CONTROLLER: hypernode}
