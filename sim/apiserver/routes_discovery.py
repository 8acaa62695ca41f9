"""The embedded API server's discovery and probe routes: `/version`, `/healthz` and friends,
`/api`, `/apis`, the OpenAPI v2 document and the v3 documents.

Separate from the resource routes (`sim.apiserver.routes_read`, `sim.apiserver.routes_write`):
these serve fixed documents (`sim.apiserver.discovery`, `sim.apiserver.openapi`) and touch no
stored object. `ApiServer` (`sim.apiserver.routes`) registers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
from aiohttp import web

from sim.apiserver import discovery, errors, openapi_v2
from sim.apiserver.routes_common import _error_response, _json_response

if TYPE_CHECKING:
    from sim.apiserver.openapi import OpenApiDocuments
    from sim.apiserver.registry import Registry


class DiscoveryRoutes:
    """`ApiServer`'s discovery, version, probe and OpenAPI handlers."""

    # Provided by ApiServer.
    registry: Registry
    server_address: str
    openapi: OpenApiDocuments

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

    async def _openapi_v2(self, request: web.Request) -> web.Response:
        # Built per request: custom resources registered since start are included.
        if "protobuf" in request.headers.get("Accept", ""):
            return web.Response(
                body=openapi_v2.document(self.registry), content_type=openapi_v2.CONTENT_TYPE
            )
        return _json_response(orjson.dumps(openapi_v2.json_document(self.registry)))

    async def _openapi_document(self, request: web.Request) -> web.Response:
        body = self.openapi.documents.get(request.match_info["path"].strip("/"))
        if body is None:
            return _error_response(
                errors.ApiError(404, "NotFound", "the server could not find the requested resource")
            )
        return _json_response(body)
