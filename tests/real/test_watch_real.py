"""The informer's watch on a real kube-apiserver (over TLS, through a TCP proxy that can cut it):
cut in the middle of an event, a 410 Gone, a slow handler, and the largest object the API
server takes (tests/watch_checks.py; the embedded server's run is
tests/integration/test_watch_paths.py).

The largest object: a ConfigMap's data may hold 1 MiB (the API server's validation) and etcd
takes requests up to 1.5 MiB, so a 10 MB object cannot be written to a real cluster; the event
of a ~1 MiB ConfigMap still spans many reads (and TLS records)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
import pytest_asyncio

from core.kube.client import CONFIGMAPS, ClientOptions, KubeClient
from core.kube.informer import Informer
from tests import watch_checks
from tests.watch_checks import NAMESPACE, Blob, Cluster
from vulcan.real_cluster.control_plane import ControlPlane, write_kubeconfig

pytestmark = pytest.mark.real

CONTROLLER_MANAGER = False  # a bare API server is all the watch needs
LARGEST_CONFIG_MAP = 1024 * 1024 - 64  # data of at most 1 MiB: the key's bytes count too


@pytest_asyncio.fixture
async def api(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[Cluster]:
    async def through(url: str) -> KubeClient:
        kubeconfig = write_kubeconfig(
            tmp_path / f"proxy-{urlsplit(url).port}.kubeconfig",
            url,
            control_plane.admin_token,
            "admin",
        )
        client = await KubeClient.connect(ClientOptions(kubeconfig=str(kubeconfig), qps=0))
        assert client.raw_watch  # TLS with the kubeconfig's settings: the raw path
        return client

    writer = await KubeClient.connect(
        ClientOptions(kubeconfig=str(control_plane.admin_kubeconfig), qps=0)
    )
    yield Cluster(writer, through, "https", "127.0.0.1", control_plane.port)
    await writer.close()


async def test_a_watch_cut_mid_event_resumes_and_delivers_the_event_whole(
    api: Cluster,
) -> None:
    await watch_checks.cut_mid_event(api, size=LARGEST_CONFIG_MAP)


async def test_a_410_gone_relists_and_delivers_the_delete_missed_while_away(
    api: Cluster, control_plane: ControlPlane
) -> None:
    async def expire(_informer: Informer[Blob]) -> None:
        # Away for longer than the API server keeps history: etcd compacted up to now (through
        # its JSON gateway) and kube-apiserver restarted (its watch cache starts anew), so the
        # informer's resourceVersion is one neither has.
        latest = (await api.writer.list(CONFIGMAPS, NAMESPACE, limit=1))["metadata"]
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{control_plane.etcd_url}/v3/kv/compaction",
                json={"revision": latest["resourceVersion"], "physical": True},
            ) as answer,
        ):
            assert answer.status == 200, await answer.text()
        await asyncio.to_thread(control_plane.restart_apiserver, 0.5)

    await watch_checks.gone_while_away(api, expire)


async def test_a_slow_handler_loses_no_event(api: Cluster, control_plane: ControlPlane) -> None:
    async def make_writer() -> KubeClient:
        return await KubeClient.connect(
            ClientOptions(kubeconfig=str(control_plane.admin_kubeconfig), qps=0)
        )

    await watch_checks.slow_reader(api, make_writer, count=300)
