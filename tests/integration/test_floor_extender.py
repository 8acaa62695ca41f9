"""bench.floor_extender, the throughput benchmark's cheapest extender, driven by the stand-in's
own extender client: every node passes, no preference, bind creates the pod's Binding on the
API server its kubeconfig names (and says so when that fails)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from bench.floor_extender import Binder, ExtenderConnection
from core.serving import start_app
from sim.scheduler.config import ExtenderConfig
from sim.scheduler.extenders import ExtenderError, HTTPExtender
from tests.unit.test_sim_scheduler import node, pod


async def test_floor_extender_passes_all_prefers_none_and_binds(tmp_path: Path) -> None:
    bindings: list[tuple[str, dict[str, Any]]] = []

    async def binding(request: web.Request) -> web.Response:
        if request.match_info["name"] == "refused":
            return web.json_response({"kind": "Status", "reason": "Conflict"}, status=409)
        bindings.append((request.path, await request.json()))
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
    runner, api_port = await start_app(app, "127.0.0.1", 0, shutdown_timeout=1.0)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump({"clusters": [{"cluster": {"server": f"http://127.0.0.1:{api_port}"}}]})
    )
    binder = Binder(kubeconfig)
    server = await asyncio.get_running_loop().create_server(
        lambda: ExtenderConnection(binder), "127.0.0.1", 0
    )
    prefix = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    extender = HTTPExtender(
        ExtenderConfig(
            url_prefix=prefix,
            filter_verb="filter",
            prioritize_verb="prioritize",
            bind_verb="bind",
            weight=1,
            node_cache_capable=True,
        )
    )
    try:
        nodes = [node("n1"), node("n2"), node("n3")]
        passing, failed, unresolvable = await extender.filter(pod("p"), nodes)
        assert [n.name for n in passing] == ["n1", "n2", "n3"] and not failed and not unresolvable
        assert await extender.prioritize(pod("p"), nodes) == {}
        await extender.bind(pod("p"), "n2")
        ((path, body),) = bindings
        assert path == "/api/v1/namespaces/default/pods/p/binding"
        assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n2"}
        assert body["metadata"]["name"] == "p" and body["metadata"]["uid"] == pod("p").uid
        with pytest.raises(ExtenderError, match="binding default/refused: 409"):
            await extender.bind(pod("refused"), "n2")
        assert len(bindings) == 1
    finally:
        await extender.close()
        server.close()
        await binder.transport.close()
        await runner.cleanup()
