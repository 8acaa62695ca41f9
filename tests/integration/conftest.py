"""An embedded API server per test, and a kubernetes-asyncio client for it (real HTTP)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from kubernetes_asyncio.client import ApiClient, Configuration

from core.kube.client import ClientOptions, KubeClient
from sim.apiserver.server import EmbeddedApiServer


@pytest_asyncio.fixture
async def apiserver() -> AsyncIterator[EmbeddedApiServer]:
    # A short history and bookmark interval make 410s and bookmarks quick to provoke.
    async with EmbeddedApiServer(watch_history=50, bookmark_interval=0.2) as server:
        yield server


@pytest_asyncio.fixture
async def api(apiserver: EmbeddedApiServer) -> AsyncIterator[ApiClient]:
    config = Configuration(host=apiserver.url)
    async with ApiClient(config) as client:
        yield client


@pytest_asyncio.fixture
async def client() -> AsyncIterator[KubeClient]:
    """vulcan's own client against a fresh embedded API server (modules may override)."""
    async with EmbeddedApiServer() as server:
        kube = await KubeClient.connect(ClientOptions(master=server.url, qps=0))
        yield kube
        await kube.close()
