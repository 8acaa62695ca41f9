"""The objects the job plugins keep for a job (svc's ConfigMap, Service and NetworkPolicy,
ssh's Secret), written through the API server: created when missing, rewritten when a
`refresh` object changed (svc's host lists follow scaling), deleted when the job is killed."""

from __future__ import annotations

from typing import Any

from core.kube.client import (
    CONFIGMAPS,
    NETWORK_POLICIES,
    SECRETS,
    SERVICES,
    ApiError,
    KubeClient,
    Resource,
)
from flow_controller.job.plugins import JobContext, Owned, Plugin

RESOURCES: dict[str, Resource] = {
    "ConfigMap": CONFIGMAPS,
    "Service": SERVICES,
    "Secret": SECRETS,
    "NetworkPolicy": NETWORK_POLICIES,
}

_Identity = tuple[str, str, str, str]  # job UID, kind, namespace, name


class PluginObjects:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        # What this process last wrote (or found) per object: an unchanged object costs no
        # API call on the next sync, and ssh's key pair is generated once.
        self._written: dict[_Identity, Any] = {}

    def _identity(self, ctx: JobContext, kind: str, name: str) -> _Identity:
        return (str(ctx.owner.get("uid", "")), kind, ctx.namespace, name)

    async def ensure(self, ctx: JobContext, plugins: list[Plugin]) -> None:
        for plugin in plugins:
            names = plugin.names(ctx)
            known = all(self._identity(ctx, k, n) in self._written for k, n in names)
            if known and not plugin.refresh:
                continue
            for owned in plugin.objects(ctx):
                await self._ensure(ctx, owned)

    async def _ensure(self, ctx: JobContext, owned: Owned) -> None:
        name = owned.body["metadata"]["name"]
        identity = self._identity(ctx, owned.kind, name)
        resource = RESOURCES[owned.kind]
        body = {"apiVersion": resource.api_version, "kind": owned.kind, **owned.body}
        previous = self._written.get(identity)
        if previous is not None and (not owned.refresh or previous == body):
            return
        try:
            await self.client.create(resource, body)
        except ApiError as exc:
            if not exc.conflict:
                raise
            if owned.refresh:
                fields = {k: v for k, v in body.items() if k not in ("metadata", "apiVersion")}
                await self.client.patch(resource, name, fields, ctx.namespace)
        self._written[identity] = body

    async def delete(self, ctx: JobContext, plugins: list[Plugin]) -> None:
        for plugin in plugins:
            for kind, name in plugin.names(ctx):
                try:
                    await self.client.delete(RESOURCES[kind], name, ctx.namespace)
                except ApiError as exc:
                    if not exc.not_found:
                        raise
                self._written.pop(self._identity(ctx, kind, name), None)
