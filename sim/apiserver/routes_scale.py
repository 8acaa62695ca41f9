"""The `scale` subresource of Deployments, ReplicaSets and StatefulSets (autoscaling/v1
Scale), as kube-apiserver serves it: `kubectl scale` and autoscalers read the replica count
and selector there and write `spec.replicas` through it (GET, PUT, and the patch types)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from sim.apiserver import errors
from sim.apiserver.patch import PatchError, UnsupportedPatchType, apply_patch
from sim.apiserver.routes_apply import writer_of
from sim.apiserver.routes_common import Target, _json_response

if TYPE_CHECKING:
    from sim.apiserver.store import Store, Stored
    from sim.apiserver.writes import Writes


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale of a scalable object."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    labels = ((spec.get("selector") or {}).get("matchLabels")) or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(spec.get("replicas", 1))},
        "status": {
            "replicas": int((obj.get("status") or {}).get("replicas") or 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        },
    }


class ScaleRoutes:
    # Provided by ApiServer.
    store: Store
    writes: Writes

    if TYPE_CHECKING:

        async def _body(self, request: web.Request) -> Any: ...

    async def _scale(self, request: web.Request, t: Target) -> web.Response:
        ns = t.namespace or ""
        name = t.name or ""
        if request.method == "GET":
            return _json_response(
                orjson.dumps(scale_of(self.store.get(t.rtype, ns, name).decode()))
            )
        if request.method == "PUT":
            body = await self._body(request)
            change = lambda scale: body  # noqa: E731 - the Scale as sent
        elif request.method == "PATCH":
            raw = await request.read()
            content_type = request.headers.get("Content-Type", "")

            def change(scale: dict[str, Any]) -> Any:
                try:
                    return apply_patch(scale, content_type, raw, "Scale")
                except UnsupportedPatchType as exc:
                    raise errors.ApiError(415, "UnsupportedMediaType", str(exc)) from None
                except PatchError as exc:
                    raise errors.ApiError(422, "Invalid", str(exc)) from None

        else:
            raise errors.ApiError(405, "MethodNotAllowed", "method not allowed on scale")

        def produce(stored: Stored) -> dict[str, Any]:
            current = stored.decode()
            wanted = change(scale_of(current))
            replicas = ((wanted or {}).get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise errors.ApiError(
                    422,
                    "Invalid",
                    f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                    f"{replicas!r}: must be greater than or equal to 0",
                )
            current.setdefault("spec", {})["replicas"] = replicas
            return current

        # Recorded on the scaled object as an Update of its `scale` subresource, in the object's
        # API version (the ScaleHandler's mapping of spec.replicas).
        writer = writer_of(
            request, t, "PatchOptions" if request.method == "PATCH" else "UpdateOptions"
        )
        raw_object, warnings = await self.writes.update(
            t.rtype, ns, name, None, produce, dry_run=False, field_validation="", writer=writer
        )
        return _json_response(orjson.dumps(scale_of(orjson.loads(raw_object))), 200, warnings)
