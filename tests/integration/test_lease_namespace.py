"""The controllers' Lease lives in vulcan's install namespace, `vulcan-system`. On a cluster
where it does not exist yet, `vulcan controllers` cannot lead: it says so in /readyz and in its
log until the namespace appears, then takes the Lease (instead of waiting silently)."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.error
import urllib.request
from pathlib import Path

from core.controller.manager import LeaseNamespaceWatch
from core.kube.client import LEASES, NAMESPACES, KubeClient
from tests.helpers import announced_url, http_get, sim_apiserver_process, vulcan_process


async def test_the_watch_reports_a_missing_namespace_until_it_appears(client: KubeClient) -> None:
    watch = LeaseNamespaceWatch(client, "vulcan-system", interval=0.02)
    assert not await watch.check()
    assert watch.missing and "vulcan-system does not exist" in watch.reason()
    running = asyncio.create_task(watch.run())
    await client.create(NAMESPACES, {"metadata": {"name": "vulcan-system"}})
    await asyncio.wait_for(running, 5)
    assert not watch.missing


def test_controllers_without_their_namespace_say_so_in_readyz_and_the_log(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    apiserver, api = sim_apiserver_process(kubeconfig)
    controllers = None
    try:
        controllers = vulcan_process(
            "controllers",
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--log-format",
            "json",
        )
        base = announced_url(controllers, "vulcan controllers listening on http://127.0.0.1:")
        status, body = http_get(f"{base}/readyz")
        assert status == 503 and "vulcan-system does not exist" in body, (status, body)
        assert controllers.stderr is not None
        for line in controllers.stderr:
            record = json.loads(line)
            if "namespace does not exist" in record.get("msg", ""):
                assert record.get("namespace") == "vulcan-system"
                break
        # No Lease anywhere: it could not lead.
        with urllib.request.urlopen(api + LEASES.path("vulcan-system"), timeout=5) as response:
            assert json.loads(response.read())["items"] == []
    finally:
        for process in (controllers, apiserver):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)
