"""The hypernode-controller's reconciler: one key ("label"), reconciled whenever a node's
topology labels change, a node comes or goes, or a discovered HyperNode is changed or deleted
by someone else. Each pass computes the whole tree (`discovery.discover`) and creates, updates
and deletes HyperNodes to match; only HyperNodes labelled `volcano.sh/network-topology-source:
label` are touched, as Volcano's reconcileTopology does. Their status is the status
reconciler's (`status.py`), as for every HyperNode."""

from __future__ import annotations

import logging
from typing import Any

from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Builder, ObjectRef
from core.kube.client import HYPERNODES, NODES, ApiError, KubeClient
from core.kube.events import EventRecorder
from topology_controller.config import LabelDiscovery
from topology_controller.discovery import SOURCE, SOURCE_LABEL, Desired, discover, manifest

log = logging.getLogger("vulcan.controllers.hypernode")

DISCOVERY = "hypernode-discovery"  # its work queue and metrics label
KEY = SOURCE


class NodeLabels:
    __slots__ = ("key", "labels", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key: str = meta["name"]
        self.rv: str = meta.get("resourceVersion", "")
        self.labels: dict[str, str] = meta.get("labels") or {}


class Discovered:
    """A HyperNode this source made: what a pass compares with what it wants."""

    __slots__ = ("key", "labels", "rv", "spec")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.key: str = meta["name"]
        self.rv: str = meta.get("resourceVersion", "")
        self.labels: dict[str, str] = meta.get("labels") or {}
        self.spec: dict[str, Any] = obj.get("spec") or {}


class HyperNodeDiscovery:
    name = DISCOVERY

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
        config: LabelDiscovery,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        self.tiers = config.tiers
        self.keys = frozenset(k for keys in config.tiers.values() for k in keys)

    def setup(self, watch: Builder[str]) -> None:
        self.nodes = watch.watch(
            NODES,
            NodeLabels,
            on_add=self._node_matters,
            on_update=lambda old, new: KEY if self._topology(old) != self._topology(new) else None,
            on_delete=self._node_matters,
        )
        self.hypernodes = watch.watch(
            HYPERNODES,
            Discovered,
            on_add=lambda r: KEY,
            on_update=lambda old, new: KEY,
            on_delete=lambda r: KEY,
            label_selector=f"{SOURCE_LABEL}={SOURCE}",
        )
        watch.enqueue(KEY)

    def _topology(self, node: NodeLabels) -> dict[str, str]:
        return {k: v for k, v in node.labels.items() if k in self.keys}

    def _node_matters(self, node: NodeLabels) -> str | None:
        return KEY if self._topology(node) else None

    def reference(self, key: str) -> ObjectRef | None:
        return None

    def describe(self, key: str) -> str:
        return "label-based HyperNode discovery"

    def given_up(self, key: str, exc: BaseException) -> bool:
        return False

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def reconcile(self, key: str) -> float | None:
        existing = dict(self.hypernodes.items)
        desired = discover(
            self.tiers,
            ((n.key, n.labels) for n in self.nodes.items.values()),
            {name: r.labels for name, r in existing.items()},
        )
        for name, want in desired.items():
            have = existing.get(name)
            if have is None:
                await self._create(name, want)
            else:
                await self._update(have, name, want)
        for name in sorted(set(existing) - set(desired)):
            log.info("deleting HyperNode %s (no node carries its label any more)", name)
            try:
                await self.client.delete(HYPERNODES, name)
            except ApiError as exc:
                if not exc.not_found:
                    raise
        return None

    async def _create(self, name: str, want: Desired) -> None:
        log.info("creating HyperNode %s (tier %d, %d members)", name, want.tier, len(want.members))
        try:
            await self.client.create(HYPERNODES, manifest(name, want))
        except ApiError as exc:
            if not exc.conflict:  # 409 AlreadyExists: our informer lags; the next pass sees it
                raise

    async def _update(self, have: Discovered, name: str, want: Desired) -> None:
        obj = manifest(name, want)
        labels = obj["metadata"]["labels"]  # type: ignore[index]
        if have.spec != obj["spec"] or any(have.labels.get(k) != v for k, v in labels.items()):
            log.info("updating HyperNode %s", name)
            patch = {"metadata": {"labels": labels}, "spec": obj["spec"]}
            await self.client.patch(HYPERNODES, name, patch)
