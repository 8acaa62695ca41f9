"""The controllers in-process against an embedded API server (real HTTP), for the PodGroup and
Queue controller tests. There is no ReplicaSet/StatefulSet controller in the embedded cluster:
tests create a workload and its pods by hand, with the ownerReferences a real one would set."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from kubernetes_asyncio.client import Configuration

from core.controller.manager import ControllerManager
from core.kube.client import EVENTS, ApiError, ClientOptions, KubeClient
from flow_controller.controllers import factories as flow_factories
from podgroup_controller.controllers import factories
from podgroup_controller.options import ControllerOptions
from sim.apiserver.server import EmbeddedApiServer
from tests.helpers import until
from topology_controller.config import LabelDiscovery
from topology_controller.controllers import factories as topology_factories

T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
    """Await `probe()` until it returns something truthy (polling the API every 20 ms)."""
    last: Any = None
    try:
        async with asyncio.timeout(timeout):
            while not (last := await probe()):
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"not reached within {timeout}s (last: {last!r})") from None
    return last


class Controllers:
    """A ControllerManager running one term, stoppable and restartable."""

    def __init__(
        self,
        client: KubeClient,
        enabled: Sequence[str],
        flow: dict[str, Any] | None = None,
        discovery: LabelDiscovery | None = None,
        **options: Any,
    ) -> None:
        self.client = client
        self.enabled = enabled
        self.flow = flow or {}  # the job controller's options (`flow_controller.factories`)
        self.discovery = discovery  # the hypernode-controller's label discovery
        self.options = ControllerOptions(**{"max_retries": 5, "retry_max": 0.5, **options})
        self.manager: ControllerManager | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> ControllerManager:
        available = {
            **factories(self.options),
            **flow_factories(self.options.retries, **self.flow),
            **topology_factories(self.discovery, self.options.retries),
        }
        self.manager = ControllerManager(
            self.client,
            {name: available[name] for name in self.enabled},
            identity="test-controllers",
        )
        self._task = asyncio.create_task(self.manager.run())
        manager = self.manager
        await until(lambda: manager.ready() == (True, "ok"), 10)
        return manager

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def restart(self) -> ControllerManager:
        await self.stop()
        return await self.start()


@contextlib.asynccontextmanager
async def running(
    enabled: Sequence[str],
    flow: dict[str, Any] | None = None,
    discovery: LabelDiscovery | None = None,
    **options: Any,
) -> AsyncIterator[tuple[KubeClient, Controllers]]:
    async with EmbeddedApiServer() as server:
        client = KubeClient(Configuration(host=server.url), ClientOptions(qps=0))
        controllers = Controllers(client, enabled, flow, discovery, **options)
        await controllers.start()
        try:
            yield client, controllers
        finally:
            await controllers.stop()
            await client.close()


async def get_or_none(
    client: KubeClient, resource: Any, name: str, namespace: str | None = None
) -> Any:
    try:
        return await client.get(resource, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def events_about(client: KubeClient, name: str, namespace: str = "default") -> list[Any]:
    items = (await client.list(EVENTS, namespace))["items"]
    return [e for e in items if e.get("regarding", {}).get("name") == name]
