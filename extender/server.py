"""The extender's HTTP server: `/v1/filter`, `/v1/prioritize`, `/v1/preempt`, `/v1/bind`,
`/healthz`, `/readyz`, `/metrics` — all on one port.

Every verb answers exactly HTTP 200 with a JSON body (kube-scheduler treats anything else as an
error), except malformed input, which gets 400 and `{"Error": ...}`. Handlers are cancelled when
kube-scheduler disconnects (`handler_cancellation`), so an abandoned bind creates no Binding.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from core.cache import ClusterCache
from core.serving import start_app
from extender import passthrough, protocol
from extender.binder import Binder, BindError
from extender.ledger import GangLedger
from extender.metrics import ExtenderMetrics
from plugins.framework import Framework

log = logging.getLogger("vulcan.extender")

JSON = "application/json"
Handler = Callable[[bytes], Awaitable[bytes]]


class ExtenderServer:
    def __init__(
        self,
        cache: ClusterCache,
        framework: Framework,
        binder: Binder,
        *,
        ledger: GangLedger | None = None,
        metrics: ExtenderMetrics | None = None,
        is_leader: Callable[[], bool] | None = None,
    ) -> None:
        self.cache = cache
        self.framework = framework
        self.binder = binder
        self.ledger = ledger or GangLedger(cache.bump_node)
        self.metrics = metrics or ExtenderMetrics()
        self.is_leader = is_leader
        self.memo = passthrough.attach_memo(cache, passthrough.ShapeMemo())
        self.metrics.watch_cache(
            lambda: {
                "nodes": len(cache.nodes),
                "pods": len(cache.pods),
                "podgroups": len(cache.podgroups),
                "queues": len(cache.queues),
            },
            lambda: {i.resource.plural: i.last_heard for i in cache.informers},
        )
        self.app = web.Application(client_max_size=256 * 1024 * 1024)
        for verb, handler in (
            ("filter", self.filter),
            ("prioritize", self.prioritize),
            ("preempt", self.preempt),
            ("bind", self.bind),
        ):
            self.app.router.add_post(f"/v1/{verb}", self._verb(verb, handler))
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics)

    # ------------------------------------------------------------------ plumbing

    def _verb(
        self, verb: str, handler: Handler
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        duration = self.metrics.request_duration.labels(verb)
        ok = self.metrics.requests.labels(verb, "200")
        bad = self.metrics.requests.labels(verb, "400")

        async def serve(request: web.Request) -> web.Response:
            start = time.perf_counter()
            body = await request.read()
            try:
                answer = await handler(body)
            except protocol.BadRequest as exc:
                log.warning("bad %s request: %s", verb, exc)
                bad.inc()
                return web.Response(
                    body=protocol.error_result(str(exc)), status=400, content_type=JSON
                )
            duration.observe(time.perf_counter() - start)
            ok.inc()
            return web.Response(body=answer, content_type=JSON)

        return serve

    async def _healthz(self, request: web.Request) -> web.Response:
        # Answering at all proves the event loop is alive.
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        if not self.cache.synced.is_set():
            return web.Response(status=503, text="informers not synced")
        if self.is_leader is not None and not self.is_leader():
            return web.Response(status=503, text="not the leader")
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.metrics.registry),
            headers={"Content-Type": CONTENT_TYPE_LATEST},
        )

    # --------------------------------------------------------------------- verbs

    async def filter(self, body: bytes) -> bytes:
        args = protocol.parse_extender_args(protocol.decode(body))
        request = _request(args.pod)
        objects = _objects_by_name(args.node_objects)
        passed, failed = passthrough.fit_filter(
            self.cache, self.ledger, args.pod.key, request, args.node_names, objects, self.memo
        )
        counter = self.metrics.filter_nodes
        counter.labels("passed").inc(len(passed))
        if failed:
            counter.labels("failed").inc(len(failed))
        if args.cache_mode:
            return protocol.filter_result_cache(passed, failed, {})
        assert objects is not None
        return protocol.filter_result_objects([objects[n] for n in passed], failed, {})

    async def prioritize(self, body: bytes) -> bytes:
        args = protocol.parse_extender_args(protocol.decode(body))
        names, scores = passthrough.prioritize(
            self.framework,
            self.cache,
            self.ledger,
            args.pod.key,
            _request(args.pod),
            args.node_names,
            _objects_by_name(args.node_objects),
            self.memo,
        )
        return protocol.host_priority_list(names, scores)

    async def preempt(self, body: bytes) -> bytes:
        args = protocol.parse_preemption_args(protocol.decode(body))
        # Pass kube-scheduler's candidates through unchanged, always in the Meta (UID) form.
        return protocol.preemption_result(args.victims)

    async def bind(self, body: bytes) -> bytes:
        args = protocol.parse_binding_args(protocol.decode(body))
        self.metrics.binds_in_flight.inc()
        try:
            await self.binder.bind(args)
        except BindError as exc:
            return protocol.error_result(str(exc))
        finally:
            self.metrics.binds_in_flight.dec()
        return protocol.BIND_OK


_REQUESTS: dict[tuple[str, str], Any] = {}


def _request(pod: protocol.PodInfo) -> Any:
    """The pod's effective request, parsed once per pod version: filter and prioritize (and
    every retry) send the same pod."""
    version = (pod.uid, str(pod.metadata.get("resourceVersion") or ""))
    cacheable = bool(pod.uid and version[1])
    if cacheable and version in _REQUESTS:
        return _REQUESTS[version]
    try:
        request = passthrough.request_of(pod.spec)
    except (ValueError, TypeError) as exc:
        raise protocol.BadRequest(f"Pod {pod.key}: {exc}") from None
    if cacheable:
        if len(_REQUESTS) > 10_000:  # bounded; pods come and go
            _REQUESTS.clear()
        _REQUESTS[version] = request
    return request


def _objects_by_name(objects: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
    if objects is None:
        return None
    return {o["metadata"]["name"]: o for o in objects}


async def serve(server: ExtenderServer, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving (port 0: any free port). Returns the runner (call `cleanup()` to stop,
    which waits for in-flight requests such as held binds) and the port."""
    return await start_app(server.app, host, port, shutdown_timeout=5.0)
