"""`ApiServer`, the embedded API server's HTTP face of a `Store`: the aiohttp application, its
route table, and the resolution of a request path to a resource `Target` (or a discovery
document) and its dispatch by method.

The handlers live in mixins, one module each: discovery and probes
(`sim.apiserver.routes_discovery`), lists and watches (`sim.apiserver.routes_read`), patch,
delete and eviction (`sim.apiserver.routes_write`), server-side apply
(`sim.apiserver.routes_apply`); what they share is in
`sim.apiserver.routes_common`. Separate from `sim.apiserver.server`, which assembles a store and
serves this application.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from sim.apiserver import discovery, errors
from sim.apiserver.admission import WebhookAdmission
from sim.apiserver.events import storage_views
from sim.apiserver.openapi import OpenApiDocuments
from sim.apiserver.rbac import Rbac
from sim.apiserver.routes_apply import ApplyRoutes, writer_of
from sim.apiserver.routes_auth import AuthRoutes
from sim.apiserver.routes_common import Target, _error_response, _flag, _json_response
from sim.apiserver.routes_discovery import DiscoveryRoutes
from sim.apiserver.routes_read import ReadRoutes
from sim.apiserver.routes_scale import ScaleRoutes
from sim.apiserver.routes_write import WriteRoutes
from sim.apiserver.store import Store, bind_pod, evict_pod
from sim.apiserver.tables import table, wants_table
from sim.apiserver.writes import Writes, dry_run_of


class ApiServer(DiscoveryRoutes, ReadRoutes, WriteRoutes, ApplyRoutes, ScaleRoutes, AuthRoutes):
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
        self.app.router.add_get("/openapi/v2", self._openapi_v2)
        self.app.router.add_get("/openapi/v3", self._openapi_root)
        self.app.router.add_get("/openapi/v3/{path:.*}", self._openapi_document)
        # Authorization (off unless the server is given a token file: `enable_rbac`).
        self.rbac: Rbac | None = None
        self.app.router.add_post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            self._self_subject_access_review,
        )
        self.app.router.add_route("*", "/api/{tail:.*}", self._dispatch)
        self.app.router.add_route("*", "/apis/{tail:.*}", self._dispatch)

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
            self._check(request, None if isinstance(target, dict) else target)
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
        if t.subresource == "scale":
            return await self._scale(request, t)
        if method == "GET":
            if t.name is None:
                if _flag(request, "watch"):
                    return await self._watch(request, t)
                return await self._list(request, t)
            stored = self.store.get(t.storage, ns, t.name)
            if wants_table(request.headers.get("Accept", "")):
                # Table columns read the stored format (a view's columns are its storage's).
                return _json_response(
                    orjson.dumps(
                        table(
                            t.rtype,
                            [stored.decode()],
                            str(stored.rv),
                            request.query.get("includeObject", "Metadata"),
                            t.served,
                        )
                    )
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
                    writer=writer_of(request, t, "CreateOptions"),
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
                writer=writer_of(request, t, "UpdateOptions"),
            )
            return _json_response(t.out(raw), 200, warnings)
        if method == "PATCH":
            return await self._patch(request, t)
        if method == "DELETE":
            return await self._delete(request, t)
        raise errors.ApiError(405, "MethodNotAllowed", f"method {method} is not supported")


def _success() -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
