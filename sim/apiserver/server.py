"""The embedded Kubernetes API server: aiohttp over the in-memory store.

Speaks the REST API that kubectl, kubernetes-asyncio and a stock kube-scheduler (JSON mode) use:
CRUD, the three patch types, `/status`, `pods/binding`, `pods/eviction`, watches (resume, 410,
bookmarks, watch-list), selectors, discovery. See shared/spec/embedded-apiserver.md.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import web

from core.gc_pauses import freeze_on_growth
from core.serving import start_app
from sim.apiserver import discovery, errors
from sim.apiserver.admission import WebhookAdmission
from sim.apiserver.events import StorageView, storage_views
from sim.apiserver.objects import DEFAULT_TOLERATION_SECONDS
from sim.apiserver.openapi import OpenApiDocuments
from sim.apiserver.patch import PatchError, UnsupportedPatchType, apply_patch
from sim.apiserver.registry import (
    BUILTINS,
    Registry,
    ResourceType,
    load_crds,
    resource_type_from_crd,
)
from sim.apiserver.selectors import (
    SelectorError,
    label_selector_from_dict,
    parse_field_selector,
    parse_label_selector,
)
from sim.apiserver.store import Matcher, Store, Stored, bind_pod, evict_pod, now_rfc3339
from sim.apiserver.tables import table, wants_table
from sim.apiserver.writes import Writes, dry_run_of

log = logging.getLogger("vulcan.sim.apiserver")

JSON = "application/json"
STRATEGIC = "application/strategic-merge-patch+json"
DEFAULT_WATCH_TIMEOUT = 1800  # the real server's --min-request-timeout
_LIST_CHUNK = 2000  # objects per write when streaming a big list
_FREEZE_AFTER_GROWTH = 5000  # stored objects added before long-lived objects are frozen
_TRUE = frozenset({"true", "1"})


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in _TRUE


@dataclass(slots=True)
class Target:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    # Set when the resource is served from another one's storage (events.k8s.io/v1 events).
    view: StorageView | None = None

    @property
    def storage(self) -> ResourceType:
        """The resource type whose storage holds the objects."""
        return self.view.storage if self.view is not None else self.rtype

    def out(self, raw: bytes) -> bytes:
        """A stored object's JSON as this API serves it."""
        return self.view.out_raw(raw) if self.view is not None else raw

    def into(self, body: Any) -> Any:
        """A request body in the storage's format."""
        return self.view.into(body) if self.view is not None else body


def _json_response(
    body: bytes, status: int = 200, warnings: list[str] | None = None
) -> web.Response:
    headers = {}
    if warnings:
        headers["Warning"] = ", ".join(f'299 - "{w}"' for w in warnings)
    return web.Response(body=body, status=status, content_type=JSON, headers=headers)


def _error_response(exc: errors.ApiError) -> web.Response:
    return web.Response(body=exc.body(), status=exc.code, content_type=JSON)


class ApiServer:
    """The HTTP face of a Store."""

    def __init__(self, store: Store, *, bookmark_interval: float = 10.0) -> None:
        self.store = store
        self.registry = store.registry
        self.bookmark_interval = bookmark_interval
        self.server_address = "127.0.0.1"
        self.admission = WebhookAdmission(store)
        self.views = storage_views(self.registry)
        self.writes = Writes(store, self.admission)
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_get("/version", self._version)
        self.app.router.add_get("/version/", self._version)
        for probe in ("/healthz", "/readyz", "/livez"):
            self.app.router.add_get(probe, self._ok)
        self.app.router.add_get("/api", self._api)
        self.app.router.add_get("/api/", self._api)
        self.app.router.add_get("/apis", self._apis)
        self.app.router.add_get("/apis/", self._apis)
        self.openapi = OpenApiDocuments(self.registry)
        self.app.router.add_get("/openapi/v3", self._openapi_root)
        self.app.router.add_get("/openapi/v3/{path:.*}", self._openapi_document)
        self.app.router.add_route("*", "/api/{tail:.*}", self._dispatch)
        self.app.router.add_route("*", "/apis/{tail:.*}", self._dispatch)

    # ------------------------------------------------------------------------ discovery

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _version(self, request: web.Request) -> web.Response:
        return _json_response(orjson.dumps(discovery.version_info()))

    async def _api(self, request: web.Request) -> web.Response:
        return _json_response(orjson.dumps(discovery.api_versions(self.server_address)))

    async def _apis(self, request: web.Request) -> web.Response:
        return _json_response(orjson.dumps(discovery.api_group_list(self.registry)))

    async def _openapi_root(self, request: web.Request) -> web.Response:
        return _json_response(self.openapi.root)

    async def _openapi_document(self, request: web.Request) -> web.Response:
        body = self.openapi.documents.get(request.match_info["path"].strip("/"))
        if body is None:
            return _error_response(
                errors.ApiError(404, "NotFound", "the server could not find the requested resource")
            )
        return _json_response(body)

    # ------------------------------------------------------------------------- routing

    def _resolve(self, path: str) -> Target | dict[str, Any]:
        """A resource target, or a discovery document for group/version paths."""
        parts = [p for p in path.split("/") if p]
        if parts[0] == "api":
            if len(parts) < 2:
                return discovery.api_versions(self.server_address)
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) == 2:
                doc = discovery.api_group(self.registry, parts[1])
                if doc is None:
                    raise errors.not_found("groups", parts[1])
                return doc
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            doc = discovery.api_resource_list(self.registry, group, version)
            if doc is None:
                raise errors.ApiError(
                    404, "NotFound", "the server could not find the requested resource"
                )
            return doc
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            candidate = self.registry.get(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        rtype = self.registry.get(group, version, rest[0])
        if rtype is None or len(rest) > 3:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in rtype.subresources:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        if rtype.namespaced and name is not None and namespace is None:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        return Target(rtype, namespace, name, sub, self.views.get(rtype))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            target = self._resolve(request.path)
            if isinstance(target, dict):
                if request.method != "GET":
                    raise errors.ApiError(405, "MethodNotAllowed", "method not allowed")
                return _json_response(orjson.dumps(target))
            return await self._handle(request, target)
        except errors.ApiError as exc:
            return _error_response(exc)

    async def _handle(self, request: web.Request, t: Target) -> web.StreamResponse:
        method = request.method
        ns = t.namespace or ""
        if method == "GET":
            if t.name is None:
                if _flag(request, "watch"):
                    return await self._watch(request, t)
                return await self._list(request, t)
            stored = self.store.get(t.storage, ns, t.name)
            if wants_table(request.headers.get("Accept", "")):
                # Table columns read the stored format (a view's columns are its storage's).
                return _json_response(
                    orjson.dumps(table(t.rtype, [stored.decode()], str(stored.rv)))
                )
            return _json_response(t.out(stored.raw))
        if method == "POST":
            body = await self._body(request)
            if t.name is None:
                raw, warnings = await self.writes.create(
                    t.storage,
                    ns,
                    t.into(body),
                    dry_run=dry_run_of(request.query.getall("dryRun", []), "CreateOptions"),
                    field_validation=request.query.get("fieldValidation", ""),
                )
                return _json_response(t.out(raw), 201, warnings)
            if t.subresource == "binding":
                body, warnings = await self.writes.admit_connect(
                    t.rtype, ns, t.name, "binding", body, ("", "v1", "Binding")
                )
                bind_pod(self.store, t.rtype, ns, t.name, body)
                return _json_response(orjson.dumps(_success()), 201, warnings)
            if t.subresource == "eviction":
                body, warnings = await self.writes.admit_connect(
                    t.rtype, ns, t.name, "eviction", body, ("policy", "v1", "Eviction")
                )
                evict_pod(self.store, t.rtype, ns, t.name, body, self._pdb_blocks)
                return _json_response(orjson.dumps(_success()), 201, warnings)
            raise errors.ApiError(405, "MethodNotAllowed", "method POST is not supported")
        if t.name is None:
            if method == "DELETE":
                return await self._delete_collection(request, t)
            raise errors.ApiError(405, "MethodNotAllowed", f"method {method} is not supported")
        if method == "PUT":
            body = t.into(await self._body(request))
            raw, warnings = await self.writes.update(
                t.storage,
                ns,
                t.name,
                t.subresource,
                lambda _stored: body,
                dry_run=dry_run_of(request.query.getall("dryRun", []), "UpdateOptions"),
                field_validation=request.query.get("fieldValidation", ""),
            )
            return _json_response(t.out(raw), 200, warnings)
        if method == "PATCH":
            return await self._patch(request, t)
        if method == "DELETE":
            return await self._delete(request, t)
        raise errors.ApiError(405, "MethodNotAllowed", f"method {method} is not supported")

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return {}
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            # kubectl and client-go send JSON; YAML bodies are accepted for curl users.
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise errors.bad_request(
                    f"the body of the request could not be decoded: {exc}"
                ) from None

    # --------------------------------------------------------------------------- lists

    def _matcher(self, request: web.Request, rtype: ResourceType) -> Matcher | None:
        from sim.apiserver.objects import selectable_fields

        labels_text = request.query.get("labelSelector", "")
        fields_text = request.query.get("fieldSelector", "")
        if not labels_text and not fields_text:
            return None
        try:
            label_sel = parse_label_selector(labels_text) if labels_text else None
            field_sel = parse_field_selector(fields_text) if fields_text else None
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from None
        if field_sel is not None:
            supported = set(selectable_fields(rtype))
            for name in sorted(field_sel.fields()):
                if name not in supported:
                    raise errors.bad_request(f"field label not supported: {name}")

        def matches(labels: dict[str, str] | None, fields: dict[str, str]) -> bool:
            if label_sel is not None and not label_sel.matches(labels):
                return False
            return field_sel is None or field_sel.matches(fields)

        return matches

    async def _list(self, request: web.Request, t: Target) -> web.StreamResponse:
        limit_text = request.query.get("limit", "")
        matcher = self._matcher(request, t.rtype)
        if limit_text not in ("", "0"):
            try:
                limit = int(limit_text)
            except ValueError:
                raise errors.bad_request(f"invalid limit: {limit_text}") from None
            return self._list_page(request, t, matcher, limit)
        rv, items = self.store.list(t.storage, t.namespace, matcher)
        if wants_table(request.headers.get("Accept", "")):
            return _json_response(
                orjson.dumps(table(t.rtype, (s.decode() for s in items), str(rv)))
            )
        # `limit` is not honoured: the whole list comes in one page, as the real server does
        # when it serves a list from its watch cache; clients handle that (no continue token).
        head = orjson.dumps(
            {
                "kind": t.rtype.list_kind,
                "apiVersion": t.rtype.api_version,
                "metadata": {"resourceVersion": str(rv)},
            }
        )
        opening = head[:-1] + b',"items":['
        raws = [t.out(s.raw) for s in items] if t.view is not None else [s.raw for s in items]
        if len(raws) <= _LIST_CHUNK:
            return _json_response(opening + b",".join(raws) + b"]}")
        # A big list (100,000 pods is ~200 MB) is streamed in chunks from the snapshot taken
        # above, so the event loop keeps serving other clients and no second copy is built.
        response = web.StreamResponse(headers={"Content-Type": JSON})
        response.content_length = len(opening) + sum(len(r) for r in raws) + len(raws) - 1 + 2
        await response.prepare(request)
        await response.write(opening)
        for start in range(0, len(raws), _LIST_CHUNK):
            chunk = b",".join(raws[start : start + _LIST_CHUNK])
            await response.write(chunk if start == 0 else b"," + chunk)
        await response.write(b"]}")
        await response.write_eof()
        return response

    def _list_page(
        self, request: web.Request, t: Target, matcher: Matcher | None, limit: int
    ) -> web.Response:
        """One page of a paginated list (`limit` + `continue`), in key order. The continue token
        carries the first page's resourceVersion, which every page reports, as Kubernetes does;
        later pages show the current objects (there is no MVCC snapshot to read from)."""
        token = request.query.get("continue", "")
        try:
            start = decode_continue(token) if token else None
        except ValueError:
            raise errors.bad_request(f"invalid continue token: {token}") from None
        list_rv, items, next_key = self.store.list_page(
            t.storage,
            t.namespace,
            matcher,
            limit,
            after=None if start is None else start[1],
            list_rv=None if start is None else start[0],
        )
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if next_key is not None:
            meta["continue"] = encode_continue(list_rv, next_key)
        if wants_table(request.headers.get("Accept", "")):
            rendered = table(t.rtype, (s.decode() for s in items), str(list_rv))
            rendered["metadata"] = meta
            return _json_response(orjson.dumps(rendered))
        head = orjson.dumps(
            {"kind": t.rtype.list_kind, "apiVersion": t.rtype.api_version, "metadata": meta}
        )
        return _json_response(
            head[:-1] + b',"items":[' + b",".join(t.out(s.raw) for s in items) + b"]}"
        )

    # --------------------------------------------------------------------------- watch

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        matcher = self._matcher(request, t.rtype)
        timeout = request.query.get("timeoutSeconds")
        try:
            seconds = float(timeout) if timeout else DEFAULT_WATCH_TIMEOUT
        except ValueError:
            raise errors.bad_request(f"invalid timeoutSeconds: {timeout}") from None
        bookmarks = _flag(request, "allowWatchBookmarks")
        send_initial = _flag(request, "sendInitialEvents")
        response = web.StreamResponse(headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        try:
            watcher, first = self.store.watch(
                t.storage,
                t.namespace,
                matcher,
                request.query.get("resourceVersion"),
                send_initial,
            )
        except errors.ApiError as exc:
            if exc.code != 410:
                raise
            # An expired version is reported inside the stream, as an ERROR event.
            await response.prepare(request)
            await response.write(b'{"type":"ERROR","object":' + exc.body() + b"}\n")
            return response
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        as_table = wants_table(request.headers.get("Accept", ""))

        def encode(chunk: bytes) -> bytes:
            if as_table:
                return _table_events(t.rtype, chunk)
            return t.view.out_lines(chunk) if t.view is not None else chunk

        try:
            await response.prepare(request)
            if first:
                await response.write(encode(b"".join(first)))
            while not watcher.closed:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(
                        watcher.wakeup.wait(), timeout=min(remaining, self.bookmark_interval)
                    )
                except TimeoutError:
                    if bookmarks and deadline - loop.time() > 0:
                        await response.write(self.store.bookmark(t.rtype))
                    continue
                chunk = watcher.drain()
                if chunk:
                    await response.write(encode(chunk))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(t.storage, watcher)
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    # --------------------------------------------------------------------- patch/delete

    async def _patch(self, request: web.Request, t: Target) -> web.Response:
        content_type = request.headers.get("Content-Type", "")
        if t.rtype.custom and content_type.split(";")[0].strip() == STRATEGIC:
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
            )
        raw = await request.read()

        def patched(stored: Stored) -> dict[str, Any]:
            current = stored.decode()
            if t.view is not None:
                current = t.view.out(current)  # the patch is written against this API's format
            try:
                result = t.into(apply_patch(current, content_type, raw, t.rtype.kind))
            except UnsupportedPatchType as exc:
                raise errors.ApiError(415, "UnsupportedMediaType", str(exc)) from None
            except PatchError as exc:
                raise errors.ApiError(422, "Invalid", str(exc)) from None
            if not isinstance(result, dict):
                raise errors.bad_request("the patch did not produce an object")
            meta = result.setdefault("metadata", {})
            if meta.get("resourceVersion") == str(stored.rv):
                meta.pop("resourceVersion")  # unchanged: no precondition
            return result

        body, warnings = await self.writes.update(
            t.storage,
            t.namespace or "",
            t.name or "",
            t.subresource,
            patched,
            dry_run=dry_run_of(request.query.getall("dryRun", []), "PatchOptions"),
            field_validation=request.query.get("fieldValidation", ""),
        )
        return _json_response(t.out(body), 200, warnings)

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        body = await self._body(request) if request.can_read_body else {}
        options = dict(body) if isinstance(body, dict) else {}
        if "gracePeriodSeconds" in request.query:
            options["gracePeriodSeconds"] = int(request.query["gracePeriodSeconds"])
        if "propagationPolicy" in request.query:
            options["propagationPolicy"] = request.query["propagationPolicy"]
        if options.get("orphanDependents") is True and "propagationPolicy" not in options:
            options["propagationPolicy"] = "Orphan"
        return options

    async def _delete(self, request: web.Request, t: Target) -> web.Response:
        options = await self._delete_options(request)
        body, finished, warnings = await self.writes.delete(
            t.storage,
            t.namespace or "",
            t.name or "",
            options,
            dry_run=dry_run_of(request.query.getall("dryRun", []), "DeleteOptions"),
        )
        return _json_response(t.out(body), 200 if finished else 202, warnings)

    async def _delete_collection(self, request: web.Request, t: Target) -> web.Response:
        _, items = self.store.list(t.storage, t.namespace, self._matcher(request, t.rtype))
        grace = request.query.get("gracePeriodSeconds")
        dry_run = dry_run_of(request.query.getall("dryRun", []), "DeleteOptions")
        options = {"gracePeriodSeconds": int(grace)} if grace else {}
        deleted = []
        denied: errors.ApiError | None = None
        for stored in items:
            try:
                raw, _, _ = await self.writes.delete(
                    t.storage, stored.key[0], stored.key[1], options, dry_run=dry_run
                )
            except errors.ApiError as exc:
                # Gone meanwhile is fine; an admission denial is reported (the rest still go,
                # as kube-apiserver deletes the items independently).
                if exc.code != 404 and denied is None:
                    denied = exc
                continue
            deleted.append(orjson.loads(t.out(raw)))
        if denied is not None:
            raise denied
        head = orjson.dumps(
            {
                "kind": t.rtype.list_kind,
                "apiVersion": t.rtype.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
            }
        )
        return _json_response(head[:-1] + b',"items":' + orjson.dumps(deleted) + b"}")

    # ----------------------------------------------------------------------- eviction

    def _pdb_blocks(self, pod: dict[str, Any]) -> str | None:
        """The name of a PodDisruptionBudget that an eviction of `pod` would violate."""
        pdbs = self.registry.get("policy", "v1", "poddisruptionbudgets")
        pods = self.registry.get("", "v1", "pods")
        if pdbs is None or pods is None:
            return None
        namespace = pod["metadata"].get("namespace") or ""
        _, budgets = self.store.list(pdbs, namespace)
        for stored in budgets:
            pdb = stored.decode()
            spec = pdb.get("spec") or {}
            selector = label_selector_from_dict(spec.get("selector"))
            if not selector.matches(pod["metadata"].get("labels")):
                continue
            _, members = self.store.list(
                pods, namespace, lambda labels, _f, s=selector: s.matches(labels)
            )
            decoded = [m.decode() for m in members]
            healthy = sum(1 for m in decoded if _pod_ready(m))
            expected = len(decoded)
            if "minAvailable" in spec:
                desired = _scaled(spec["minAvailable"], expected, round_up=True)
            elif "maxUnavailable" in spec:
                desired = expected - _scaled(spec["maxUnavailable"], expected, round_up=True)
            else:
                continue
            if healthy - desired < 1 and _pod_ready(pod):
                return pdb["metadata"]["name"]
        return None


def encode_continue(list_rv: int, last_key: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([list_rv, *last_key])).decode()


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        rv, namespace, name = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return int(rv), (str(namespace), str(name))
    except Exception as exc:
        raise ValueError(token) from exc


def _table_events(rtype: ResourceType, chunk: bytes) -> bytes:
    """Watch events for kubectl's table printer: each object becomes a one-row Table."""
    out = []
    for line in chunk.splitlines():
        event = orjson.loads(line)
        obj = event["object"]
        if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
            event["object"] = table(rtype, [obj], obj["metadata"].get("resourceVersion", ""))
        out.append(orjson.dumps(event) + b"\n")
    return b"".join(out)


def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        fraction = int(value[:-1]) * total
        return -(-fraction // 100) if round_up else fraction // 100
    return int(value)


def _pod_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


def _success() -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


# --------------------------------------------------------------------------- assembly


SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY_CLASSES = (
    ("system-node-critical", 2000001000),
    ("system-cluster-critical", 2000000000),
)


def build_store(
    crd_dir: Path | None = None,
    *,
    watch_history: int = 10_000,
    default_not_ready_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
    default_unreachable_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
) -> Store:
    """A store with the built-in types, the CRDs, system namespaces and priority classes. The
    toleration seconds are kube-apiserver's --default-not-ready-toleration-seconds and
    --default-unreachable-toleration-seconds."""
    crds = load_crds(crd_dir)
    registry = Registry(BUILTINS)
    for crd in crds:
        for rtype in resource_type_from_crd(crd):
            registry.add(rtype)
    store = Store(
        registry,
        watch_history=watch_history,
        default_not_ready_toleration_seconds=default_not_ready_toleration_seconds,
        default_unreachable_toleration_seconds=default_unreachable_toleration_seconds,
    )
    namespaces = registry.get("", "v1", "namespaces")
    assert namespaces is not None
    for name in SYSTEM_NAMESPACES:
        store.create(
            namespaces,
            "",
            {
                "metadata": {"name": name},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            },
        )
    priority = registry.get("scheduling.k8s.io", "v1", "priorityclasses")
    assert priority is not None
    for name, value in SYSTEM_PRIORITY_CLASSES:
        store.create(
            priority,
            "",
            {
                "metadata": {"name": name},
                "value": value,
                "description": "Used for system critical pods.",
            },
        )
    crd_type = registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert crd_type is not None
    for crd in crds:
        doc = orjson.loads(orjson.dumps(crd))
        doc["status"] = {
            "conditions": [
                {"type": "Established", "status": "True", "lastTransitionTime": now_rfc3339()}
            ]
        }
        store.create(crd_type, "", doc)
    return store


def kubeconfig(url: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "vulcan", "cluster": {"server": url}}],
        "users": [{"name": "vulcan", "user": {}}],
        "contexts": [
            {
                "name": "vulcan",
                "context": {"cluster": "vulcan", "user": "vulcan", "namespace": "default"},
            }
        ],
        "current-context": "vulcan",
        "preferences": {},
    }


def write_kubeconfig(path: str | os.PathLike[str], url: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig(url), sort_keys=False))


class EmbeddedApiServer:
    """`async with EmbeddedApiServer() as server:` serves on 127.0.0.1 (port 0 = any free port)
    and yields itself; `server.url` is the base URL."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        crd_dir: Path | None = None,
        watch_history: int = 10_000,
        bookmark_interval: float = 10.0,
        kubeconfig_out: str | os.PathLike[str] | None = None,
        default_not_ready_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
        default_unreachable_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
    ) -> None:
        self.host = host
        self.port = port
        self.store = build_store(
            crd_dir,
            watch_history=watch_history,
            default_not_ready_toleration_seconds=default_not_ready_toleration_seconds,
            default_unreachable_toleration_seconds=default_unreachable_toleration_seconds,
        )
        self.api = ApiServer(self.store, bookmark_interval=bookmark_interval)
        self.kubeconfig_out = kubeconfig_out
        self._runner: web.AppRunner | None = None
        self._gc_task: asyncio.Task[None] | None = None
        self._freeze_task: asyncio.Task[None] | None = None
        self.url = ""

    async def start(self) -> EmbeddedApiServer:
        self._runner, self.port = await start_app(
            self.api.app, self.host, self.port, shutdown_timeout=1.0
        )
        self.url = f"http://{self.host}:{self.port}"
        self.api.server_address = f"{self.host}:{self.port}"
        # A full GC over 100k stored pods otherwise pauses the event loop for ~250 ms.
        self._freeze_task = asyncio.create_task(
            freeze_on_growth(self._stored_count, growth=_FREEZE_AFTER_GROWTH),
            name="apiserver-freeze",
        )
        self._gc_task = asyncio.create_task(self.store.run_garbage_collector(), name="apiserver-gc")
        if self.kubeconfig_out:
            write_kubeconfig(self.kubeconfig_out, self.url)
        log.info("embedded API server serving", extra={"url": self.url})
        return self

    def _stored_count(self) -> int:
        return sum(len(c.objects) for c in self.store.collections.values())

    async def restart(self, while_down: Callable[[Store], None] | None = None) -> None:
        """Stop serving and serve the same objects again on the same port, as a kube-apiserver
        restarts over the same etcd: open watches break, and watches resuming from a version
        before the restart get 410 Expired (the new watch cache has no history)."""
        if self._runner is not None:
            await self._runner.cleanup()
        if while_down is not None:
            while_down(self.store)  # e.g. writes through another API server replica
        self.store.reset_watch_cache()
        self._runner, _ = await start_app(self.api.app, self.host, self.port, shutdown_timeout=1.0)

    async def stop(self) -> None:
        if self._freeze_task is not None:
            self._freeze_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._freeze_task
        if self._gc_task is not None:
            self._gc_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gc_task
        for coll in self.store.collections.values():
            for watcher in list(coll.watchers):
                watcher.close()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.api.admission.close()

    async def __aenter__(self) -> EmbeddedApiServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@contextlib.asynccontextmanager
async def embedded_apiserver(**kwargs: Any) -> AsyncIterator[EmbeddedApiServer]:
    async with EmbeddedApiServer(**kwargs) as server:
        yield server
