"""Which replica leads, marked on the replicas' own pods (`vulcan.sh/leader`), so that the
Services select the leader by label while every synced replica is Ready.

With readiness tied to leadership a Deployment of two never counts both available: it is never
Available, a rolling update stalls (the new pods cannot lead while the old leader runs, and the
old leader is never taken down while it is the only one available), and a PodDisruptionBudget
blocks draining the leader's node. With the label, readiness means "synced and not marked
leader by mistake": a replica sets its own label to "false" before it reports Ready (a restarted
leader's container finds its old "true"), and the leader, on taking the Lease, marks itself
"true" and every other replica "false". Failures are retried with backoff; until the own label is
cleared the replica stays unready, saying why.
"""

from __future__ import annotations

import logging
from typing import Any

from core.kube.backoff import Backoff
from core.kube.client import PODS, ApiError, KubeClient

__all__ = ["LEADER_LABEL", "LeaderLabel"]

LEADER_LABEL = "vulcan.sh/leader"

log = logging.getLogger("vulcan.extender.leader_label")


class LeaderLabel:
    def __init__(
        self, client: KubeClient, namespace: str, pod: str, backoff: Backoff | None = None
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.pod = pod
        self.cleared = False  # this replica's own label is "false" (or it leads)
        self.problem = "leader label not cleared yet"
        self._backoff = backoff or Backoff(0.2, 10.0)

    async def step_aside(self) -> None:
        """Mark this replica not the leader (retried until done)."""
        await self._set(self.pod, "false")
        self.cleared = True
        self.problem = ""

    async def lead(self) -> None:
        """Mark this replica the leader and every other replica of the namespace not."""
        await self._set(self.pod, "true")
        self.cleared = True
        listed = await self._retrying(
            lambda: self.client.list(PODS, self.namespace, labelSelector=f"{LEADER_LABEL}=true"),
            f"cannot list the pods labelled {LEADER_LABEL}=true in {self.namespace}",
        )
        for item in listed.get("items") or []:
            name = item["metadata"]["name"]
            if name != self.pod:
                await self._set(name, "false", missing_ok=True)

    async def _set(self, pod: str, value: str, missing_ok: bool = False) -> None:
        patch = {"metadata": {"labels": {LEADER_LABEL: value}}}

        async def write() -> Any:
            try:
                return await self.client.patch(PODS, pod, patch, self.namespace)
            except ApiError as exc:
                if missing_ok and exc.status == 404:
                    return None  # that replica is gone: nothing routes to it
                raise

        what = f"cannot set {LEADER_LABEL}={value} on pod {self.namespace}/{pod}"
        await self._retrying(write, what)

    async def _retrying(self, call: Any, what: str) -> Any:
        backoff = Backoff(self._backoff.initial, self._backoff.maximum)
        while True:
            try:
                return await call()
            except ApiError as exc:
                if not self.cleared:
                    self.problem = f"{what}: {exc}"
                log.warning("%s: %s; retrying", what, exc)
                await backoff.wait()
