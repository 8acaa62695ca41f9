"""Writes with admission webhooks and dryRun: create, update (PUT and PATCH), delete and the pod
subresources, in kube-apiserver's order.

A write no webhook covers, and that is not a dry run, takes the store's one-step path (atomic on
the event loop, nothing awaited). Otherwise the store's steps are interleaved with the webhooks:
decode (CR defaults) -> mutating webhooks -> the registry's defaulting and validation ->
validating webhooks -> storage. Since webhooks are awaited, the object may change meanwhile: an
update then re-reads and runs again (as kube-apiserver's GuaranteedUpdate retries), unless the
client asked for a resourceVersion, which gets its 409 Conflict.

Creates and updates given a `Writer` record its `metadata.managedFields` entry
(sim.apiserver.managed_fields) before admission, where kube-apiserver's field manager runs;
server-side apply (sim.apiserver.routes_apply) computes the entries itself and carries them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from sim.apiserver import errors
from sim.apiserver.admission import WebhookAdmission
from sim.apiserver.field_shapes import shape_of
from sim.apiserver.managed_fields import Writer, record_update
from sim.apiserver.registry import ResourceType
from sim.apiserver.store import Store, Stored
from sim.apiserver.webhook_call import Attributes

_UPDATE_ATTEMPTS = 5
Produce = Callable[[Stored], dict[str, Any]]


def dry_run_of(values: list[str], options_kind: str) -> bool:
    """The `dryRun` query parameter: absent, or `All` (the only value Kubernetes accepts)."""
    if not values:
        return False
    bad = [v for v in values if v != "All"]
    if bad:
        shown = ", ".join(f'"{v}"' for v in bad)
        raise errors.invalid(
            options_kind,
            "",
            "meta.k8s.io",
            [
                {
                    "reason": "FieldValueNotSupported",
                    "field": "dryRun",
                    "message": f'Unsupported value: []string{{{shown}}}: supported values: "All"',
                }
            ],
        )
    return True


class Writes:
    def __init__(self, store: Store, admission: WebhookAdmission) -> None:
        self.store = store
        self.admission = admission

    def _attributes(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        subresource: str | None,
        operation: str,
        obj: dict[str, Any] | None,
        old: dict[str, Any] | None,
        dry_run: bool,
    ) -> Attributes:
        return Attributes(
            group=rtype.group,
            version=rtype.version,
            kind=rtype.kind,
            resource=rtype.plural,
            subresource=subresource or "",
            name=name,
            namespace=namespace if rtype.namespaced else "",
            operation=operation,
            obj=obj,
            old=old,
            dry_run=dry_run,
            options={"dryRun": ["All"]} if dry_run else {},
        )

    # --------------------------------------------------------------------------- create

    async def create(
        self,
        rtype: ResourceType,
        namespace: str,
        body: Any,
        *,
        dry_run: bool,
        field_validation: str,
        writer: Writer | None = None,
    ) -> tuple[bytes, list[str]]:
        """`writer` records its managedFields entry (None: the body carries them already)."""
        store = self.store
        if writer is not None and isinstance(body, dict):
            # Before admission, as kube-apiserver's field manager runs on the decoded request.
            record_update(None, body, writer, shape_of(rtype), ignore_status=rtype.has_status)
        hooks = self.admission.match(rtype, None, "CREATE")
        if hooks is None and not dry_run:
            stored, warnings = store.create(
                rtype, namespace, body, field_validation=field_validation
            )
            return stored.raw, warnings
        store.begin_create(rtype, namespace, body)
        warnings: list[str] = []
        attrs = None
        if hooks is not None:
            warnings += store.decode_defaults(rtype, body, field_validation)
            name = body["metadata"].get("name") or ""  # empty with generateName, as in Kubernetes
            attrs = self._attributes(rtype, namespace, name, None, "CREATE", body, None, dry_run)
            if hooks.mutating:
                body = await self.admission.mutate(hooks.mutating, attrs, warnings)
                _keep_identity(rtype, namespace, body)
        warnings += store.finish_create(rtype, body, field_validation if hooks is None else "")
        if hooks is not None and hooks.validating:
            assert attrs is not None
            attrs.obj, attrs.name = body, body["metadata"]["name"]
            await self.admission.validate(hooks.validating, attrs, warnings)
        if dry_run:
            return orjson.dumps(body), warnings
        return store.commit_create(rtype, body).raw, warnings

    # --------------------------------------------------------------------------- update

    async def update(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        subresource: str | None,
        produce: Produce,
        *,
        dry_run: bool,
        field_validation: str,
        writer: Writer | None = None,
        carry_managed_fields: bool = False,
    ) -> tuple[bytes, list[str]]:
        """PUT or PATCH: `produce(stored)` gives the object to write (the body, or the patch
        applied to the stored object). `writer` records its managedFields entry; with
        `carry_managed_fields` the produced object's entries are stored as they are (an apply
        computed them), even on a subresource."""
        store = self.store
        hooks = self.admission.match(rtype, subresource, "UPDATE")
        tracked = writer is not None or carry_managed_fields
        if hooks is None and not dry_run:
            stored = store.get(rtype, namespace, name)
            if not tracked:
                new, warnings = store.update(
                    rtype,
                    namespace,
                    name,
                    produce(stored),
                    subresource=subresource,
                    field_validation=field_validation,
                    current=stored,
                )
                return new.raw, warnings
            obj = produce(stored)
            stored, old, merged = store.begin_update(
                rtype, namespace, name, obj, subresource=subresource, current=stored
            )
            _managed_fields(rtype, subresource, writer, obj, old, merged)
            warnings = store.finish_update(rtype, old, merged, subresource, field_validation)
            return store.commit_update(rtype, stored, old, merged, subresource).raw, warnings
        for attempt in range(_UPDATE_ATTEMPTS):
            stored = store.get(rtype, namespace, name)
            obj = produce(stored)
            asked_version = bool((obj.get("metadata") or {}).get("resourceVersion"))
            stored, old, new = store.begin_update(
                rtype, namespace, name, obj, subresource=subresource, current=stored
            )
            if tracked:
                _managed_fields(rtype, subresource, writer, obj, old, new)
            warnings: list[str] = []
            attrs = None
            if hooks is not None:
                if subresource is None:
                    warnings += store.decode_defaults(rtype, new, field_validation)
                attrs = self._attributes(
                    rtype, namespace, name, subresource, "UPDATE", new, old, dry_run
                )
                if hooks.mutating:
                    new = await self.admission.mutate(hooks.mutating, attrs, warnings)
                    new = store.remerge(rtype, old, new, subresource)
            warnings += store.finish_update(
                rtype, old, new, subresource, field_validation if hooks is None else ""
            )
            if hooks is not None and hooks.validating:
                assert attrs is not None
                attrs.obj = new
                await self.admission.validate(hooks.validating, attrs, warnings)
            if dry_run:
                new["metadata"]["resourceVersion"] = str(stored.rv)
                return orjson.dumps(new), warnings
            try:
                result = store.commit_update(rtype, stored, old, new, subresource)
            except errors.ApiError as exc:
                if exc.code == 409 and not asked_version and attempt + 1 < _UPDATE_ATTEMPTS:
                    continue  # changed while the webhooks ran: read it again and redo
                raise
            current = store.find(rtype, namespace, name)
            return (current.raw if current is not None else result.raw), warnings
        raise AssertionError("unreachable")

    # --------------------------------------------------------------------------- delete

    async def delete(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        options: dict[str, Any],
        *,
        dry_run: bool,
    ) -> tuple[bytes, bool, list[str]]:
        """Returns (body, finished, warnings); `finished` False while finalizers or a graceful
        pod termination hold the object."""
        store = self.store
        hooks = self.admission.match(rtype, None, "DELETE")
        preconditions = options.get("preconditions")
        warnings: list[str] = []
        if hooks is not None or dry_run:
            stored = store.get(rtype, namespace, name)
            if hooks is not None:
                attrs = self._attributes(
                    rtype, namespace, name, None, "DELETE", None, stored.decode(), dry_run
                )
                attrs.options = {
                    k: v for k, v in options.items() if k != "preconditions"
                } | attrs.options
                if hooks.mutating:
                    await self.admission.mutate(hooks.mutating, attrs, warnings)
                if hooks.validating:
                    await self.admission.validate(hooks.validating, attrs, warnings)
            if dry_run:
                return stored.raw, True, warnings
            # The decision was made about this object: not about one recreated meanwhile.
            preconditions = {"uid": stored.uid, **(preconditions or {})}
        obj, finished = store.delete(
            rtype,
            namespace,
            name,
            grace_period=options.get("gracePeriodSeconds"),
            propagation=options.get("propagationPolicy"),
            preconditions=preconditions,
        )
        return orjson.dumps(obj), finished, warnings

    # ------------------------------------------------------------------- subresources

    async def admit_connect(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        subresource: str,
        body: Any,
        kind: tuple[str, str, str],
    ) -> tuple[Any, list[str]]:
        """A POST to pods/binding or pods/eviction is a CREATE of that subresource for
        admission; returns the (possibly mutated) body."""
        hooks = self.admission.match(rtype, subresource, "CREATE")
        warnings: list[str] = []
        if hooks is None or not isinstance(body, dict):
            return body, warnings
        attrs = self._attributes(rtype, namespace, name, subresource, "CREATE", body, None, False)
        attrs.kind_group, attrs.kind_version, attrs.kind = kind
        if hooks.mutating:
            body = await self.admission.mutate(hooks.mutating, attrs, warnings)
            attrs.obj = body
        if hooks.validating:
            await self.admission.validate(hooks.validating, attrs, warnings)
        return body, warnings


def _managed_fields(
    rtype: ResourceType,
    subresource: str | None,
    writer: Writer | None,
    obj: dict[str, Any],
    old: dict[str, Any],
    new: dict[str, Any],
) -> None:
    """Set `new`'s managedFields: the writer's Update recorded, or those of `obj` (what the
    request produced) carried over."""
    if writer is not None:
        main = subresource is None and rtype.has_status  # status is not the writer's to set
        record_update(old, new, writer, shape_of(rtype), ignore_status=main)
        return
    entries = (obj.get("metadata") or {}).get("managedFields")
    if entries:
        new["metadata"]["managedFields"] = entries
    else:
        new["metadata"].pop("managedFields", None)


def _keep_identity(rtype: ResourceType, namespace: str, obj: dict[str, Any]) -> None:
    """A mutating webhook may not move an object to another kind or namespace."""
    obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind
    meta = obj.setdefault("metadata", {})
    if rtype.namespaced:
        meta["namespace"] = namespace
