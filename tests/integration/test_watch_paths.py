"""The informer's watch against the embedded API server, on the raw protocol and on aiohttp's
stream: cut mid-event, 410 Gone, a slow handler, a 10 MB object (tests/watch_checks.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from core.kube.client import CONFIGMAPS, ClientOptions, KubeClient
from core.kube.informer import Informer
from sim.apiserver.server import EmbeddedApiServer
from tests import watch_checks
from tests.watch_checks import Blob, Cluster, config_map

HISTORY = 50


@pytest_asyncio.fixture(params=["raw", "aiohttp"])
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    raw = request.param == "raw"

    async def through(url: str) -> KubeClient:
        client = await KubeClient.connect(ClientOptions(master=url, qps=0))
        assert client.raw_watch  # a plain http server: the raw path is the one chosen
        client.raw_watch = raw
        return client

    async with EmbeddedApiServer(watch_history=HISTORY) as server:
        writer = await KubeClient.connect(ClientOptions(master=server.url, qps=0))
        yield Cluster(writer, through, "http", "127.0.0.1", server.port)
        await writer.close()


async def test_a_watch_cut_mid_event_resumes_and_delivers_the_event_whole(
    cluster: Cluster,
) -> None:
    await watch_checks.cut_mid_event(cluster, size=10 * 1024 * 1024)


async def test_a_410_gone_relists_and_delivers_the_delete_missed_while_away(
    cluster: Cluster,
) -> None:
    async def expire(_informer: Informer[Blob]) -> None:
        # More writes than the server's history holds: the informer's version is gone.
        for i in range(HISTORY + 10):
            await cluster.writer.create(CONFIGMAPS, config_map(f"other-{i}", "other"))

    await watch_checks.gone_while_away(cluster, expire)


async def test_a_slow_handler_loses_no_event(cluster: Cluster) -> None:
    url = f"http://127.0.0.1:{cluster.port}"

    async def make_writer() -> KubeClient:
        return await KubeClient.connect(ClientOptions(master=url, qps=0))

    await watch_checks.slow_reader(cluster, make_writer, count=200)
