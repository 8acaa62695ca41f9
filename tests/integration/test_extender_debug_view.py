"""The extender's read-only debug endpoints against the embedded API server: a gang holding
binds (held count, its timer, reservations), a gang refused for want of members, the queues of
the last pass; served over HTTP by the extender's app, and left out when the flag says so."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from core.kube.client import PODGROUPS, PODS, KubeClient
from extender.debug_view import add_debug_routes, gang_view, queues_view
from extender.flags import add_extender_flags
from extender.gang_verbs import GangVerbs
from extender.protocol import BindingArgs
from plugins.framework.books_check import VICTIM_PROMISED_TWICE, Breach
from tests.helpers import until
from tests.integration.test_gang_scheduler import add_gpu_node, started, worker


def _group(name: str, min_member: int, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"minMember": min_member},
    }


async def test_the_views_of_a_holding_gang_a_refused_gang_and_the_queues(
    client: KubeClient,
) -> None:
    for name in ("gpu-0", "gpu-1"):
        await add_gpu_node(client, name)
    await client.create(PODGROUPS, _group("job", 2, **{"vulcan.sh/gang-timeout": "30s"}))
    await client.create(PODGROUPS, _group("short", 3))
    pods = [await client.create(PODS, worker("job", i)) for i in range(2)]
    await client.create(PODS, worker("short", 0))
    cache, gangs = await started(client)
    try:
        await until(lambda: len(cache.pods) == 3 and len(cache.podgroups) == 2)
        assert queues_view(gangs) is None  # no pass yet
        gangs.schedule_pass()
        name = pods[0]["metadata"]["name"]
        node = gangs.ledger.reservation_of(f"default/{name}").node
        bind = asyncio.create_task(
            GangVerbs(gangs).bind(BindingArgs(name, "default", pods[0]["metadata"]["uid"], node))
        )
        await until(lambda: gangs.barrier.held("default/job") == 1)

        view = gang_view(gangs, "default/job")
        assert view is not None
        assert view["admitted"] is True and view["reason"] is None
        assert view["members"] == {
            "created": 2,
            "admitted": 2,
            "holdingBinds": 1,
            "bound": 0,
            "pending": 0,
        }
        assert view["statuses"] == {"Allocated": 1, "Binding": 1}
        assert view["gangTimeoutSeconds"] == 30.0
        hold = view["hold"]
        assert hold["pods"] == [f"default/{name}"] and hold["timeoutSeconds"] == 30.0
        assert 25 < hold["secondsLeft"] <= 30
        assert view["backoffSecondsLeft"] == 0 and view["committed"] is False
        assert sorted(r["node"] for r in view["reservations"]) == ["gpu-0", "gpu-1"]
        assert view["reservations"][0]["request"] == {"cpu": "1", "nvidia.com/gpu": "1"}
        assert view["reserved"] == {"cpu": "2", "nvidia.com/gpu": "2"}

        refused = gang_view(gangs, "default/short")
        assert refused is not None and refused["admitted"] is False
        assert refused["reason"] == "gang default/short: 1/3 members created"
        assert refused["members"]["created"] == 1 and refused["hold"] is None
        assert gang_view(gangs, "default/nothing") is None

        queues = queues_view(gangs)
        assert queues is not None and queues["plugin"] == "proportion"
        assert queues["total"] == {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}
        default = next(q for q in queues["queues"] if q["name"] == "default")
        assert default["state"] == "Open" and default["weight"] == 1
        # The reservation counts as allocated: the gang holds its two GPUs.
        assert default["allocated"] == {"cpu": "2", "nvidia.com/gpu": "2"}
        assert default["deserved"]["nvidia.com/gpu"] == "2"
        assert default["capability"] == {} and default["borrowing"] == {}
        assert sum(default["podgroups"].values()) == 2  # phases as the cache last heard them

        # Over HTTP, on the extender's app.
        app = web.Application()
        add_debug_routes(app, gangs)
        async with TestClient(TestServer(app)) as http:
            response = await http.get("/debug/gangs/default/job")
            assert response.status == 200
            assert (await response.json())["members"]["holdingBinds"] == 1
            response = await http.get("/debug/queues")
            assert response.status == 200 and (await response.json())["waiting"] == ["default"]
            missing = await http.get("/debug/gangs/default/nothing")
            assert missing.status == 404 and "error" in await missing.json()
            # The passes broke no accounting invariant; one they would, the view tells.
            response = await http.get("/debug/invariants")
            assert await response.json() == {"breaches": 0, "recent": []}
            gangs.runner._breached([Breach(VICTIM_PROMISED_TWICE, "default/x", "default/b", "d")])
            response = await http.get("/debug/invariants")
            assert await response.json() == {
                "breaches": 1,
                "recent": [
                    {
                        "kind": "victim-promised-twice",
                        "subject": "default/x",
                        "job": "default/b",
                        "detail": "d",
                    }
                ],
            }
        gangs.barrier.release("default/job", "test over")
        with pytest.raises(Exception, match="test over"):
            await bind
    finally:
        await gangs.stop()
        await cache.stop()


def test_the_flag_is_on_by_default_and_turns_off_go_style() -> None:
    parser = argparse.ArgumentParser()
    add_extender_flags(parser)
    assert parser.parse_args([]).enable_debug_endpoints is True
    assert parser.parse_args(["--enable-debug-endpoints"]).enable_debug_endpoints is True
    assert parser.parse_args(["--enable-debug-endpoints=false"]).enable_debug_endpoints is False
    assert parser.parse_args(["--enable-debug-endpoints=0"]).enable_debug_endpoints is False
