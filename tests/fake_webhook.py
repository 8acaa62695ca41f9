"""An HTTPS AdmissionReview endpoint for tests: a webhook (a policy engine, vulcan's own) whose
answers the test decides, served with a throw-away CA the API server verifies it against."""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from core.certs import write_serving_certs

Responder = Callable[[dict[str, Any]], Awaitable[dict[str, Any]] | dict[str, Any]]


class FakeWebhook:
    """An HTTPS AdmissionReview endpoint whose answers the test decides."""

    def __init__(self, tmp: Path) -> None:
        self.certs = write_serving_certs(tmp)
        self.requests: list[dict[str, Any]] = []
        self.respond: Responder = lambda req: {"allowed": True}
        self.runner: web.AppRunner | None = None
        self.url = ""

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.certs.ca_pem).decode()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        self.requests.append({**req, "path": request.path, "query": dict(request.query)})
        answer = self.respond(req)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": req["uid"], **answer},  # type: ignore[dict-item]
            }
        )

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.certs.cert_file, self.certs.key_file)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"https://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
