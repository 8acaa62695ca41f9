"""The embedded API server's writes beyond create and update: the request body's decoding, the
three patch types (an apply patch goes to `sim.apiserver.routes_apply`), delete (with its
options) and delete-collection, and the PodDisruptionBudget check an eviction must pass.

Separate from the reads (`sim.apiserver.routes_read`); the write path itself (admission,
validation, the store) is `sim.apiserver.writes.Writes`, which these handlers call. `ApiServer`
(`sim.apiserver.routes`) dispatches to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import yaml
from aiohttp import web

from sim.apiserver import errors
from sim.apiserver.patch import PatchError, UnsupportedPatchType, apply_patch
from sim.apiserver.protobuf import ProtobufError, decode_object, is_protobuf
from sim.apiserver.registry import Registry
from sim.apiserver.routes_apply import is_apply, refuse_force, writer_of
from sim.apiserver.routes_common import Target, _json_response
from sim.apiserver.selectors import label_selector_from_dict
from sim.apiserver.store import Store, Stored
from sim.apiserver.writes import Writes, dry_run_of

if TYPE_CHECKING:
    from sim.apiserver.registry import ResourceType
    from sim.apiserver.store import Matcher

STRATEGIC = "application/strategic-merge-patch+json"


class WriteRoutes:
    """`ApiServer`'s body decoding, patch and delete handlers and the eviction's budget check."""

    # Provided by ApiServer.
    store: Store
    registry: Registry
    writes: Writes

    if TYPE_CHECKING:
        # Provided by ReadRoutes (declared for the type checker only, so that it never shadows
        # the real method).
        def _matcher(self, request: web.Request, rtype: ResourceType) -> Matcher | None: ...

        # Provided by ApplyRoutes.
        async def _apply(self, request: web.Request, t: Target) -> web.Response: ...

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return {}
        if is_protobuf(request.headers.get("Content-Type", "")):
            # kubectl's typed clients send built-in kinds as protobuf.
            try:
                return decode_object(raw)
            except ProtobufError as exc:
                raise errors.bad_request(
                    f"the body of the request could not be decoded: {exc}"
                ) from None
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

    # --------------------------------------------------------------------- patch/delete

    async def _patch(self, request: web.Request, t: Target) -> web.Response:
        content_type = request.headers.get("Content-Type", "")
        if is_apply(content_type):
            return await self._apply(request, t)
        refuse_force(request)
        writer = writer_of(request, t, "PatchOptions")
        if t.rtype.custom and content_type.split(";")[0].strip() == STRATEGIC:
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
            )
        raw = await request.read()

        # A patch that does not mention managedFields cannot change them: they are set aside
        # while it runs (patching copies the object, and they are often its biggest part).
        detach = b"managedFields" not in raw

        def patched(stored: Stored) -> dict[str, Any]:
            current = stored.decode()
            entries = current["metadata"].pop("managedFields", None) if detach else None
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
            if entries is not None and isinstance(meta, dict):
                meta["managedFields"] = entries
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
            writer=writer,
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
