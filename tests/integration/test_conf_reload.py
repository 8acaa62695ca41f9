"""`vulcan extender --config FILE` follows a changed conf without a restart: the file laid out as
the kubelet mounts a ConfigMap (`scheduler.conf -> ..data/scheduler.conf`, `..data -> ..<ts>`,
the new version swapped in by replacing the `..data` symlink). A packing conf (binpack) becomes
a spreading one (nodeorder's least-requested): the same prioritize call ranks the nodes the
other way round, the conf's hash in `vulcan_scheduler_conf_info` changes; an invalid conf is
refused with a log line and an Event on the extender's Lease, and the spreading conf stays."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.kube.client import EVENTS, PODS, KubeClient
from extender.conf_reload import conf_hash
from tests.helpers import (
    add_ready_node,
    announced_url,
    http_get,
    sim_apiserver_process,
    vulcan_process,
)

PACK = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: proportion
  - name: binpack
"""

SPREAD = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: proportion
  - name: nodeorder
"""

INVALID = """\
actions: "enqueue, allocate, backfil"
tiers:
- plugins:
  - name: gang
"""


def mount(directory: Path, version: str, text: str) -> None:
    """Write a ConfigMap volume's new version and swap `..data` to it, as the kubelet does."""
    target = directory / f"..{version}"
    target.mkdir()
    (target / "scheduler.conf").write_text(text)
    staged = directory / "..data_tmp"
    staged.symlink_to(target.name)
    os.replace(staged, directory / "..data")
    link = directory / "scheduler.conf"
    if not link.is_symlink():
        link.symlink_to("..data/scheduler.conf")


async def eventually(what: str, probe: Callable[[], Any], timeout: float = 20.0) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            value = await asyncio.to_thread(probe)
            if value:
                return value
            await asyncio.sleep(0.05)
    raise AssertionError(what)  # pragma: no cover - the timeout raises first


def ranking(base: str) -> list[str]:
    """Node names by prioritize score, best first, for a 1-cpu pod."""
    body = json.dumps(
        {
            "Pod": {
                "metadata": {"name": "probe", "namespace": "default", "uid": "probe-uid"},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}
                    ]
                },
            },
            "Nodes": None,
            "NodeNames": ["busy", "idle"],
        }
    ).encode()
    request = urllib.request.Request(
        f"{base}/v1/prioritize", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        scores = json.load(response)
    # A node left out scores 0 (kube-scheduler's reading of a HostPriorityList).
    by_node = {"busy": 0, "idle": 0} | {s["Host"]: s["Score"] for s in scores}
    assert by_node["busy"] != by_node["idle"], scores
    return sorted(by_node, key=lambda node: -by_node[node])


def active_hashes(base: str) -> list[str]:
    _, text = http_get(f"{base}/metrics")
    return re.findall(r'^vulcan_scheduler_conf_info\{hash="([0-9a-f]+)"\} 1\.0$', text, re.M)


def refused_count(base: str) -> float:
    _, text = http_get(f"{base}/metrics")
    found = re.search(
        r'^vulcan_scheduler_conf_reloads_total\{result="refused"\} (\S+)$', text, re.M
    )
    return float(found.group(1)) if found else 0.0


async def test_a_changed_conf_is_applied_without_a_restart_and_an_invalid_one_refused(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    apiserver, _ = sim_apiserver_process(kubeconfig)
    extender = None
    log_path = tmp_path / "extender.log"
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    mount(conf_dir, "v1", PACK)
    client = await KubeClient.connect(kubeconfig=str(kubeconfig), qps=0)
    try:
        for name in ("busy", "idle"):
            await add_ready_node(client, name, {"cpu": "8", "memory": "32Gi", "pods": "110"})
        await client.create(
            PODS,
            {
                "metadata": {"name": "load", "namespace": "default"},
                "spec": {
                    "nodeName": "busy",
                    "containers": [
                        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "4"}}}
                    ],
                },
            },
        )
        with log_path.open("w") as log_file:
            extender = vulcan_process(
                "extender",
                "--kubeconfig",
                str(kubeconfig),
                "--port",
                "0",
                "--bind-address",
                "127.0.0.1",
                "--log-format",
                "json",
                "--config",
                str(conf_dir / "scheduler.conf"),
                "--config-reload-period",
                "100ms",
                "--leader-elect-resource-namespace",
                "default",
                stderr=log_file.fileno(),
            )
        base = announced_url(extender, "vulcan extender listening on http://127.0.0.1:")
        base = base.removesuffix("/v1")

        def synced() -> bool:
            return '"cache synced"' in log_path.read_text()

        await eventually("the extender's cache synced", synced)
        # binpack: the node already loaded first.
        assert ranking(base) == ["busy", "idle"]
        assert active_hashes(base) == [conf_hash(PACK)]

        mount(conf_dir, "v2", SPREAD)
        await eventually(
            "the spreading conf active", lambda: active_hashes(base) == [conf_hash(SPREAD)]
        )
        # least-requested: the empty node first, from the same running process.
        assert ranking(base) == ["idle", "busy"]
        assert extender.poll() is None

        mount(conf_dir, "v3", INVALID)
        await eventually("the invalid conf refused", lambda: refused_count(base) == 1.0)
        assert active_hashes(base) == [conf_hash(SPREAD)]
        assert ranking(base) == ["idle", "busy"]
        lines = [json.loads(line) for line in log_path.read_text().splitlines() if line[:1] == "{"]
        refused = [line for line in lines if "refused" in line.get("msg", "")]
        assert refused and "backfil" in refused[0]["error"], refused
        assert refused[0]["hash"] == conf_hash(SPREAD)

        async def lease_event() -> dict[str, Any] | None:
            events = (await client.list(EVENTS, "default"))["items"]
            for event in events:
                if event.get("reason") == "SchedulerConfRefused":
                    return event
            return None

        async with asyncio.timeout(20):
            while (event := await lease_event()) is None:
                await asyncio.sleep(0.05)
        assert event["type"] == "Warning"
        assert event["regarding"]["kind"] == "Lease"
        assert event["regarding"]["name"] == "vulcan-extender"
        assert "backfil" in event["note"] and conf_hash(SPREAD) in event["note"]
    finally:
        await client.close()
        for process in (extender, apiserver):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)
