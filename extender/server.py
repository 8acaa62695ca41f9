"""The extender's HTTP server: `/v1/filter`, `/v1/prioritize`, `/v1/preempt`, `/v1/bind`,
`/healthz`, `/readyz`, `/metrics` — all on one port.

Every verb answers exactly HTTP 200 with a JSON body (kube-scheduler treats anything else as an
error), except malformed input, which gets 400 and `{"Error": ...}`. Handlers are cancelled when
kube-scheduler disconnects (`handler_cancellation`), so an abandoned bind creates no Binding.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from itertools import compress
from typing import Any

import numpy as np
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from core.cache import ClusterCache
from core.serving import start_app
from extender import fastpath, lean_http, numa_verbs, passthrough, protocol
from extender.binder import Binder, BindError
from extender.ledger import GangLedger
from extender.metrics import ExtenderMetrics
from plugins.framework.node_order import Framework

log = logging.getLogger("vulcan.extender")

JSON = "application/json"
# A verb's JSON answer: now, or once awaited (a held bind, a member waiting for its room).
Reply = bytes | Awaitable[bytes]
Handler = Callable[[bytes], Reply]


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
        not_ready: Callable[[], str] | None = None,
    ) -> None:
        self.cache = cache
        self.framework = framework
        self.binder = binder
        # `is None`, not `or`: an empty ledger is falsy (it has a length) but is the one to use.
        self.ledger = ledger if ledger is not None else GangLedger(cache.bump_node)
        self.metrics = metrics or ExtenderMetrics()
        self.is_leader = is_leader
        self.not_ready = not_ready  # why this replica is not ready yet ("" once it is)
        self.memo = passthrough.attach_memo(cache, passthrough.ShapeMemo())
        # Bumped whenever a node changes (added, removed, resized, load moved): column slots
        # remembered from an earlier call are only trusted while it stays the same.
        self._generation = 0
        cache.node_listeners.append(self._node_changed)
        self._recent: _RecentFilter | None = None
        self._bind_results: dict[str, Any] = {}  # result -> binds_total's child
        self._passed_nodes = self.metrics.filter_nodes.labels("passed")
        self._failed_nodes = self.metrics.filter_nodes.labels("failed")
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
        # The verbs as (status, body) answers: served on raw HTTP by `serve` (extender.lean_http)
        # and, for clients of the aiohttp application itself, through its routes.
        self.verbs: dict[bytes, lean_http.Answer] = {}
        for verb, handler in (
            ("filter", self.filter),
            ("prioritize", self.prioritize),
            ("preempt", self.preempt),
            ("bind", self.bind),
        ):
            answer = self._answer(verb, handler)
            self.verbs[f"/v1/{verb}".encode()] = answer
            self.app.router.add_post(f"/v1/{verb}", _route(answer))
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics)

    # ------------------------------------------------------------------ plumbing

    def _answer(self, verb: str, handler: Handler) -> lean_http.Answer:
        duration = self.metrics.request_duration.labels(verb)
        ok = self.metrics.requests.labels(verb, "200")
        bad = self.metrics.requests.labels(verb, "400")

        def refused(exc: protocol.BadRequest) -> lean_http.Result:
            log.warning("bad %s request: %s", verb, exc)
            bad.inc()
            return 400, protocol.error_result(str(exc))

        def answered(result: bytes, start: float) -> lean_http.Result:
            duration.observe(time.perf_counter() - start)
            ok.inc()
            return 200, result

        async def waited(reply: Awaitable[bytes], start: float) -> lean_http.Result:
            try:
                result = await reply
            except protocol.BadRequest as exc:
                return refused(exc)
            return answered(result, start)

        def answer(body: bytes) -> lean_http.Result | Awaitable[lean_http.Result]:
            start = time.perf_counter()
            try:
                reply = handler(body)
            except protocol.BadRequest as exc:
                return refused(exc)
            if isinstance(reply, bytes):
                return answered(reply, start)
            return waited(reply, start)

        return answer

    async def _healthz(self, request: web.Request) -> web.Response:
        # Answering at all proves the event loop is alive.
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        if not self.cache.synced.is_set():
            return web.Response(status=503, text="informers not synced")
        if self.is_leader is not None and not self.is_leader():
            return web.Response(status=503, text="not the leader")
        if self.not_ready is not None and (why := self.not_ready()):
            return web.Response(status=503, text=why)
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.metrics.registry),
            headers={"Content-Type": CONTENT_TYPE_LATEST},
        )

    # --------------------------------------------------------------------- verbs

    def _node_changed(self, name: str) -> None:
        self._generation += 1

    def filter(self, body: bytes) -> Reply:
        return self.pass_through_filter(body)

    def pass_through_filter(self, body: bytes) -> bytes:
        """Filter for a pod vulcan does not hold back (the fit check where a gang's room is
        held on a candidate)."""
        args = self._parse(body)
        if args.cache_mode:
            protocol.check_node_names(args.node_names)
        # Nodes reporting NUMA cells: the numa-aware plugin's refusals (None: it has none).
        numa = self._numa_refusals(args) if self.cache.numa else None
        if not numa and not self._reserved_on(args.node_names):
            # Nothing vulcan holds lies on a candidate: each passes as kube-scheduler offered it.
            _request(args.pod)  # still parsed: a malformed pod gets its 400 as before
            self._passed_nodes.inc(len(args.node_names))
            if not args.cache_mode:
                return protocol.filter_result_objects(args.node_objects or [], {}, {})
            self._recent = _RecentFilter(body, self._generation, args, None, args.node_names, {})
            return protocol.filter_result_cache(args.node_names, {}, {})
        # Room is held on a candidate: the vectorised fit stands aside for that (its gather
        # refuses reserved candidates), so the per-node path answers at once. The slots are
        # still looked up for prioritize, which may reuse them for the nodes that passed.
        rows = self._rows(args)
        objects = _objects_by_name(args.node_objects)
        passed, failed = passthrough.fit_filter(
            self.cache,
            self.ledger,
            args.pod.key,
            _request(args.pod),
            args.node_names,
            objects,
            self.memo,
            vectorised=False,
        )
        # Volcano's numa-aware refusal is UnschedulableAndUnresolvable: no preemption helps.
        unresolvable = {n: why for n, why in (numa or {}).items() if n not in failed}
        passed = [n for n in passed if n not in unresolvable]
        self._recent = (
            _RecentFilter(body, self._generation, args, rows, passed, failed | unresolvable)
            if rows is not None
            else None
        )
        self._passed_nodes.inc(len(passed))
        if failed or unresolvable:
            self._failed_nodes.inc(len(failed) + len(unresolvable))
        if args.cache_mode:
            return protocol.filter_result_cache(passed, failed, unresolvable)
        assert objects is not None
        return protocol.filter_result_objects([objects[n] for n in passed], failed, unresolvable)

    def _numa_refusals(self, args: protocol.ExtenderArgs) -> dict[str, str] | None:
        pod, names = args.pod, args.node_names
        numa = self.framework.session.numa
        return numa_verbs.refusals(numa, self.cache, self.ledger, pod, names)

    def _reserved_on(self, names: list[str]) -> bool:
        """Whether the ledger holds room for a gang member on one of the candidates.

        Only then has the pass-through filter anything to add: kube-scheduler sends the
        extender only the nodes its own filters passed, NodeResourcesFit among them, counting
        every pod it has bound or assumed; what it cannot count is the room the ledger keeps
        for gang members it has not placed yet. Checking the fit again on other candidates
        would only repeat its answer, or contradict it where this cache lags (a node added a
        moment ago, refused as unknown), at ~70 us per call."""
        by_node = self.ledger.by_node
        return bool(by_node) and not by_node.keys().isdisjoint(names)

    def prioritize(self, body: bytes) -> bytes:
        args, rows = self._after_filter(body)
        if rows is None:
            rows = self._rows(args)
        names, scores = passthrough.prioritize(
            self.framework,
            self.cache,
            self.ledger,
            args.pod.key,
            _request(args.pod),
            args.node_names,
            _objects_by_name(args.node_objects),
            self.memo,
            vectorised=rows is not None,
            rows=rows,
        )
        if self.cache.numa and names == args.node_names:
            request, ledger = _request(args.pod), self.ledger
            numa = numa_verbs.scores(self.framework, self.cache, ledger, args.pod, request, names)
            scores = scores if numa is None else numa
        return protocol.host_priority_list(*protocol.above_lowest(names, scores))

    @staticmethod
    def _parse(body: bytes) -> protocol.ExtenderArgs:
        # NodeNames are checked to be strings by `_rows`, only when the cache does not know
        # them all.
        return protocol.parse_extender_args(protocol.decode(body), check_names=False)

    def _rows(self, args: protocol.ExtenderArgs) -> fastpath.Rows | None:
        """The candidates' column slots (cache mode, every name known to the cache), else None
        for the per-node Python path, once the names are known to be strings."""
        if args.cache_mode:
            rows = fastpath.rows_of(self.cache, args.node_names)
            if rows is not None:
                return rows  # all are names of cached nodes, so strings
            protocol.check_node_names(args.node_names)
        return None

    def _after_filter(self, body: bytes) -> tuple[protocol.ExtenderArgs, fastpath.Rows | None]:
        """The request's arguments and, if the filter call just before had them, its
        candidates' column slots (else None).

        kube-scheduler calls prioritize right after filter for the same pod, with the nodes
        that passed: the very same body if all passed, else the names filter answered. Then
        filter's slots and the columns it read are reused instead of looking every name up and
        reading the columns again, as long as no node changed in between (any change at all:
        the columns are a copy, and a slot belongs to a node only while it exists). Ledger
        reservations are checked by the fast path on every call.
        """
        recent, self._recent = self._recent, None  # used at most once
        if recent is not None and recent.generation != self._generation:
            recent = None
        if recent is not None and body == recent.body:
            return recent.args, recent.rows
        args = self._parse(body)
        if recent is None or not args.cache_mode:
            return args, None
        # (A list equal to a list of strings holds only strings: no type check needed.)
        if args.node_names != recent.passed:
            return args, None
        asked = recent.args.node_names
        if not recent.failed:
            # The Python path lists some passing nodes last: the slots are in `asked` order.
            return args, (recent.rows if asked == recent.passed else None)
        if recent.rows is None:
            return args, None
        keep = ~np.fromiter(map(recent.failed.__contains__, asked), bool, len(asked))
        if list(compress(asked, keep.tolist())) != recent.passed:
            return args, None
        return args, recent.rows.subset(keep)

    def preempt(self, body: bytes) -> bytes:
        args = protocol.parse_preemption_args(protocol.decode(body))
        # Pass kube-scheduler's candidates through unchanged, always in the Meta (UID) form.
        return protocol.preemption_result(args.victims)

    async def bind(self, body: bytes) -> bytes:
        """Every answered bind counts once in binds_total, under the result that ended it."""
        try:
            args = protocol.parse_binding_args(protocol.decode(body))
        except protocol.BadRequest:
            self._count_bind("invalid_request")
            raise
        in_flight = self.metrics.binds_in_flight
        in_flight.inc()
        try:
            result = await self.bind_pod(args)
        except BindError as exc:
            self._count_bind(exc.result)
            return protocol.error_result(str(exc))
        except asyncio.CancelledError:
            raise  # kube-scheduler went away: nothing is answered
        except Exception:
            self._count_bind("internal_error")
            raise
        finally:
            in_flight.dec()
        self._count_bind(result)
        return protocol.BIND_OK

    def _count_bind(self, result: str) -> None:
        # The labelled child looked up once per result (`labels()` takes a lock and builds a
        # key on every call, once per pod here).
        counter = self._bind_results.get(result)
        if counter is None:
            counter = self._bind_results[result] = self.metrics.binds.labels(result)
        counter.inc()

    async def bind_pod(self, args: protocol.BindingArgs) -> str:
        """Create the pod's Binding and say how (raises BindError); gang scheduling holds it
        first."""
        return await self.binder.bind(args)


@dataclass(slots=True)
class _RecentFilter:
    """The last filter call in cache mode whose candidates the cache all knew, or that passed
    them all without looking them up (no reservation on any)."""

    body: bytes
    generation: int
    args: protocol.ExtenderArgs
    rows: fastpath.Rows | None  # of every candidate, in order; None: not looked up
    passed: list[str]
    failed: dict[str, str]


_request = passthrough.pod_request


def _route(answer: lean_http.Answer) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def serve(request: web.Request) -> web.Response:
        result = answer(await request.read())
        status, body = result if isinstance(result, tuple) else await result
        return web.Response(body=body, status=status, content_type=JSON)

    return serve


def _objects_by_name(objects: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
    if objects is None:
        return None
    return {o["metadata"]["name"]: o for o in objects}


async def serve(server: ExtenderServer, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving (port 0: any free port): the verbs on raw HTTP, everything else by the
    aiohttp application (extender.lean_http). Returns the runner (call `cleanup()` to stop,
    which waits for in-flight requests such as held binds) and the port."""
    return await start_app(
        server.app,
        host,
        port,
        shutdown_timeout=5.0,
        site=lambda runner: lean_http.LeanSite(
            runner, server.verbs, host, port, backlog=1024, drain_timeout=5.0
        ),
    )
