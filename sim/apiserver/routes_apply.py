"""Server-side apply over HTTP (`PATCH` with `Content-Type: application/apply-patch+yaml`), and
who a write's field manager is.

An apply names its manager in `fieldManager` (required: 422 as kube-apiserver's
ValidatePatchOptions answers), may `force=true` through conflicts and may be a `dryRun=All`. The
body is YAML or JSON. Applied to a missing object it creates it (201) through the same create path
as a POST (admission, defaulting, validation); otherwise it is an update (200) whose object is the
live one with the configuration merged in (sim.apiserver.apply). `kubectl apply --server-side`
sends exactly this.

Every other write names its manager the way kube-apiserver does: the `fieldManager` query
parameter, else the prefix of the User-Agent (`kubectl-client-side-apply`, `kubectl`, ...).
Simplified: applying to the `scale` subresource is not served (415).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import orjson
import yaml
from aiohttp import web

from sim.apiserver import errors
from sim.apiserver.apply import apply_configuration
from sim.apiserver.field_shapes import shape_of
from sim.apiserver.field_walk import ShapeError
from sim.apiserver.managed_fields import Writer, field_manager_causes, prefix_from_user_agent
from sim.apiserver.routes_common import Target, _json_response
from sim.apiserver.writes import dry_run_of

if TYPE_CHECKING:
    from sim.apiserver.registry import ResourceType
    from sim.apiserver.store import Store, Stored
    from sim.apiserver.writes import Writes

APPLY_PATCH: Final = "application/apply-patch+yaml"
_META_GROUP: Final = "meta.k8s.io"


class _NoTimestamps(yaml.SafeLoader):
    """YAML as sigs.k8s.io/yaml reads it into JSON: timestamps stay strings."""


_NoTimestamps.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def is_apply(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == APPLY_PATCH


def writer_of(request: web.Request, t: Target, options_kind: str) -> Writer:
    """The manager of a write: `fieldManager`, else the User-Agent's prefix."""
    name = request.query.get("fieldManager", "")
    if name:
        causes = field_manager_causes(name)
        if causes:
            raise errors.invalid(options_kind, "", _META_GROUP, causes)
    else:
        name = prefix_from_user_agent(request.headers.get("User-Agent", ""))
    return Writer(name, t.rtype.api_version, t.subresource or "")


def refuse_force(request: web.Request) -> None:
    """`force` belongs to apply patches only."""
    if "force" in request.query:
        raise errors.invalid(
            "PatchOptions",
            "",
            _META_GROUP,
            [
                {
                    "reason": "FieldValueForbidden",
                    "field": "force",
                    "message": "Forbidden: may not be specified for non-apply patch",
                }
            ],
        )


def _decode(raw: bytes) -> dict[str, Any]:
    try:
        config = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            config = yaml.load(raw, Loader=_NoTimestamps)  # a SafeLoader: no arbitrary objects
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error decoding YAML: {exc}") from None
    if not isinstance(config, dict):
        raise errors.bad_request("error decoding YAML: the applied configuration is not an object")
    return config


def _gvk(config: dict[str, Any]) -> str:
    """Go's GroupVersionKind.String() of what the configuration claims to be."""
    api_version = str(config.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={config.get('kind') or ''}"


class ApplyRoutes:
    # Provided by ApiServer.
    store: Store
    writes: Writes

    async def _apply(self, request: web.Request, t: Target) -> web.Response:
        manager = request.query.get("fieldManager", "")
        if not manager:
            raise errors.invalid(
                "PatchOptions",
                "",
                _META_GROUP,
                [
                    {
                        "reason": "FieldValueRequired",
                        "field": "fieldManager",
                        "message": "Required value: is required for apply patch",
                    }
                ],
            )
        writer = writer_of(request, t, "PatchOptions")
        dry_run = dry_run_of(request.query.getall("dryRun", []), "PatchOptions")
        force = request.query.get("force", "").lower() == "true"
        config = _decode(await request.read())
        if (config.get("apiVersion"), config.get("kind")) != (t.rtype.api_version, t.rtype.kind):
            raise errors.bad_request(f"invalid object type: {_gvk(config)}")
        config = t.into(config)
        rtype, ns, name = t.storage, t.namespace or "", t.name or ""
        status = _status_mode(rtype, t.subresource)
        shape = shape_of(rtype)
        field_validation = request.query.get("fieldValidation", "")

        def applied(live: dict[str, Any] | None) -> dict[str, Any]:
            try:
                return apply_configuration(
                    live, config, writer=writer, force=force, shape=shape, status=status
                )
            except ShapeError as exc:
                where = f"{ns}/{name}; {rtype.group}/{rtype.version}, Kind={rtype.kind}"
                raise errors.ApiError(
                    500, "", f"failed to create typed patch object ({where}): {exc}"
                ) from None

        if self.store.find(rtype, ns, name) is None:
            if t.subresource is not None:
                raise errors.not_found(rtype.plural, name, rtype.group)
            meta = config.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise errors.bad_request("metadata must be an object")
            if meta.get("name") and meta["name"] != name:
                raise errors.bad_request(
                    f"the name of the object ({meta['name']}) does not match the name on the URL "
                    f"({name})"
                )
            meta["name"] = name
            raw, warnings = await self.writes.create(
                rtype, ns, applied(None), dry_run=dry_run, field_validation=field_validation
            )
            return _json_response(t.out(raw), 201, warnings)

        def produce(stored: Stored) -> dict[str, Any]:
            return applied(stored.decode())

        raw, warnings = await self.writes.update(
            rtype,
            ns,
            name,
            t.subresource,
            produce,
            dry_run=dry_run,
            field_validation=field_validation,
            carry_managed_fields=True,
        )
        return _json_response(t.out(raw), 200, warnings)


def _status_mode(rtype: ResourceType, subresource: str | None) -> str:
    """What of `.status` an apply may write (kube-apiserver's reset fields)."""
    if subresource == "status":
        return "only"
    return "none" if rtype.has_status else "all"
