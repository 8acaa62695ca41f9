"""`/healthz`, `/readyz` and `/metrics` of `vulcan controllers`, on one port."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Readiness = Callable[[], tuple[bool, str]]


def build_app(ready: Readiness, registry: CollectorRegistry) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        # Answering at all shows the event loop is responsive: that is liveness.
        return web.Response(text="ok")

    async def readyz(request: web.Request) -> web.Response:
        ok, why = ready()
        return web.Response(status=200 if ok else 503, text=why)

    async def metrics(request: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app
