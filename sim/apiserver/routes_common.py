"""What the embedded API server's route handlers share: the resolved `Target` of a resource
request (which type, namespace, name and subresource; which storage serves it), the JSON and
error responses, and query flags.

Separate so that the route mixins (`sim.apiserver.routes_discovery`, `sim.apiserver.routes_read`,
`sim.apiserver.routes_write`) and `ApiServer` (`sim.apiserver.routes`), which combines them, all
import it in one direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from sim.apiserver import errors
from sim.apiserver.events import StorageView
from sim.apiserver.registry import ResourceType

JSON = "application/json"
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

    def served(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A stored (decoded) object as this API serves it."""
        return self.view.out(obj) if self.view is not None else obj

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
