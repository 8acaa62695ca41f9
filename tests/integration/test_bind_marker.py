"""The bind entry restricted to vulcan's marker (`managedResources: vulcan.sh/managed-bind`):
kube-scheduler binds every pod without the marker itself (DefaultBinder) and sends vulcan only
the binds of marked pods. A member of a gang of minMember > 1 that lacks the marker would so be
bound past the gang barrier, one member at a time: the extender (`--bind-marker`) refuses it in
filter, naming the marker and the fix, so such a gang is never bound by halves; made again with
the marker it binds whole through vulcan.

Two installs restrict the bind entry so: the cluster-scheduler one (both entries take only pods
with their marker; a member that opted in with `vulcan.sh/managed` alone is the hazard) and the
second-scheduler one with the opt-in component manifests/components/bind-marker (the filter
entry takes every pod of the profile).

`vulcan extender` and `vulcan sim apiserver` as processes, the kube-scheduler stand-in in the
test with the two extender entries as the install writes them."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from core.api.keys import BINDING_MARKER, MARKERS, SCHEDULING_MARKER
from core.kube.client import PODGROUPS, PODS, ClientOptions, KubeClient
from sim.scheduler.config import parse_config, sim_config
from sim.scheduler.scheduler import Scheduler
from tests.helpers import (
    add_ready_node,
    announced_url,
    http_get,
    sim_apiserver_process,
    stop_process,
)
from tests.helpers import vulcan_process as start_vulcan


async def _until(check: Any, what: str, timeout: float = 20.0) -> Any:
    """Poll an API read (`check` is async) until it returns something truthy."""
    async with asyncio.timeout(timeout):
        while not (found := await check()):
            await asyncio.sleep(0.05)
    assert found, what
    return found


class Cluster:
    def __init__(self, client: KubeClient, extender: str, mode: str) -> None:
        self.client = client
        self.extender = extender
        self.mode = mode

    def pod(self, name: str, group: str | None, bind_marker: bool) -> dict[str, Any]:
        """A pod as a user writes it: in cluster-scheduler mode it opts in to vulcan's filter
        with the scheduling marker; `bind_marker` adds the bind entry's."""
        markers = [SCHEDULING_MARKER] if self.mode == "cluster-scheduler" else []
        return _pod(name, group, markers + ([BINDING_MARKER] if bind_marker else []))

    def binds(self) -> float:
        """vulcan_extender_binds_total over every result: the binds vulcan answered."""
        status, text = http_get(f"{self.extender}/metrics")
        assert status == 200
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("vulcan_extender_binds_total{")
        )

    async def node_of(self, name: str) -> str | None:
        pod = await self.client.get(PODS, name, "default")
        return pod["spec"].get("nodeName")

    async def unschedulable_message(self, name: str) -> str:
        pod = await self.client.get(PODS, name, "default")
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return str(condition.get("message") or "")
        return ""


def _pod(name: str, group: str | None, markers: list[str]) -> dict[str, Any]:
    limits: dict[str, str] = {"cpu": "1", "memory": "1Gi"}
    limits.update({marker: "1" for marker in markers})
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "metadata": meta,
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]
        },
    }


@pytest_asyncio.fixture(params=["cluster-scheduler", "second-scheduler-bind-marker"])
async def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    mode = request.param
    kubeconfig = tmp_path / "kubeconfig"
    apiserver, _ = sim_apiserver_process(kubeconfig)
    processes = [apiserver]
    client = await KubeClient.connect(ClientOptions(kubeconfig=str(kubeconfig), qps=0))
    scheduler: Scheduler | None = None
    try:
        extender = start_vulcan(
            "extender",
            "--kubeconfig", str(kubeconfig),
            "--port", "0",
            "--bind-address", "127.0.0.1",
            f"--bind-marker={BINDING_MARKER}",
            # Whom it serves, as each install tells it: the marked pods, or those of the
            # profile that calls it (default-scheduler here).
            *(
                [f"--filter-marker={SCHEDULING_MARKER}"]
                if mode == "cluster-scheduler"
                else ["--served-scheduler-name=default-scheduler"]
            ),
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        processes.append(extender)
        url = announced_url(extender, "vulcan extender listening on ").removesuffix("/v1")
        for index in range(2):
            await add_ready_node(client, f"n{index}", {"cpu": "4", "memory": "8Gi", "pods": "110"})
        await _until(
            lambda: asyncio.to_thread(lambda: http_get(f"{url}/readyz")[0] == 200),
            "the extender to be ready",
        )
        if mode == "cluster-scheduler":
            # The overlay's stanza: each entry takes only the pods with its marker.
            config = sim_config(url, markers=MARKERS)
        else:
            # The second-scheduler install's entries (no prioritize) with the component's
            # restricted bind entry.
            config = sim_config(url)
            filter_entry, bind_entry = config["extenders"]
            filter_entry.pop("prioritizeVerb")
            filter_entry.pop("weight")
            bind_entry["managedResources"] = [{"name": BINDING_MARKER, "ignoredByScheduler": True}]
        scheduler = Scheduler(client, parse_config(config), seed=1, max_unschedulable=1.0)
        await scheduler.start()
        yield Cluster(client, url, mode)
    finally:
        if scheduler is not None:
            await scheduler.stop()
        await client.close()
        for process in reversed(processes):
            stop_process(process)


async def test_a_gang_without_the_bind_marker_is_refused_whole_and_binds_whole_once_marked(
    cluster: Cluster,
) -> None:
    client = cluster.client
    # A plain pod needs no barrier: kube-scheduler binds it itself, vulcan sees no bind.
    await client.create(PODS, cluster.pod("solo", None, bind_marker=False))
    assert await _until(lambda: cluster.node_of("solo"), "the plain pod to be bound")
    assert cluster.binds() == 0

    await client.create(
        PODGROUPS,
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}},
    )
    members = ["g-0", "g-1"]
    for name in members:
        await client.create(PODS, cluster.pod(name, "g", bind_marker=False))

    async def refused() -> bool:
        messages = [await cluster.unschedulable_message(n) for n in members]
        return all(f"lacks the bind marker {BINDING_MARKER}" in m for m in messages)

    await _until(refused, "both unmarked members to be refused, naming the marker")
    message = await cluster.unschedulable_message("g-0")
    assert "gang default/g (minMember 2)" in message
    assert f"resources.limits {{{BINDING_MARKER}: 1}}" in message  # how to fix it
    # Refused on every node: kube-scheduler never placed one, so none was bound past the barrier.
    assert [await cluster.node_of(n) for n in members] == [None, None]
    assert cluster.binds() == 0
    # Nor is the gang admitted meanwhile: no room held for members that cannot be placed
    # (held until the gang timeout, then again after each backoff, it kept others out).
    status, text = http_get(f"{cluster.extender}/debug/gangs/default/g")
    assert status == 200
    view = json.loads(text)
    assert view["admitted"] is False and view["reserved"] == {}, view
    assert f"lacks the bind marker {BINDING_MARKER}" in view["reason"]

    # Made again with the marker: both binds come to vulcan, held until the gang is whole.
    for name in members:
        await client.delete(PODS, name, "default")
    await _until(lambda: _gone(client, members), "the unmarked members to be deleted")
    for name in members:
        await client.create(PODS, cluster.pod(name, "g", bind_marker=True))

    async def both_bound() -> bool:
        return all([await cluster.node_of(n) for n in members])

    await _until(both_bound, "the marked gang to be bound")
    assert cluster.binds() == 2


async def _gone(client: KubeClient, names: list[str]) -> bool:
    items = (await client.list(PODS, namespace="default"))["items"]
    return not any(p["metadata"]["name"] in names for p in items)
