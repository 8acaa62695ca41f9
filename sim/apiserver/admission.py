"""Admission webhooks, as kube-apiserver's MutatingAdmissionWebhook and
ValidatingAdmissionWebhook plugins run them.

For each write the server asks `match()` which webhooks' rules cover the request. The answer is
precomputed per (resource, subresource, operation) and thrown away only when a webhook
configuration changes, so a request no webhook covers (a pod create, a status write) pays one
dict lookup. Matched webhooks are then filtered by namespaceSelector, objectSelector and
matchConditions, and called: mutating ones one after another in configuration-name order, each
seeing the previous one's patch; validating ones all at once, the first denial winning. Webhook
configurations themselves are never subject to webhooks (so a broken webhook cannot lock its own
configuration), as in Kubernetes.

Not done: `reinvocationPolicy: IfNeeded` is accepted but a mutating webhook is not called a
second time; `matchPolicy: Equivalent` matches only the requested version (every resource here
is served in one version); audit annotations are dropped (there is no audit log).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch
import orjson

from sim.apiserver import errors
from sim.apiserver.registry import ResourceType
from sim.apiserver.store import Store
from sim.apiserver.webhook_call import Attributes, CallError, WebhookClient, rejection
from sim.apiserver.webhook_config import GROUP, Webhook, compile_configuration

log = logging.getLogger("vulcan.sim.apiserver.admission")


@dataclass(frozen=True, slots=True)
class Matched:
    mutating: tuple[Webhook, ...]
    validating: tuple[Webhook, ...]


class WebhookAdmission:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.client = WebhookClient()
        self._configs = [
            store.collection(rtype)
            for rtype in store.registry.types
            if rtype.group == GROUP and rtype.kind.endswith("WebhookConfiguration")
        ]
        self._namespaces = store.registry.get("", "v1", "namespaces")
        self._seen: tuple[int, ...] = ()
        self._webhooks: tuple[Webhook, ...] = ()
        self._matches: dict[tuple[str, str, str, str, str], Matched | None] = {}

    # ------------------------------------------------------------------------- matching

    def _refresh(self) -> None:
        """Recompile after any configuration changed (compared by collection version)."""
        seen = tuple(c.last_rv for c in self._configs)
        if seen == self._seen:
            return
        self._seen = seen
        self._matches = {}
        hooks: list[tuple[str, Webhook]] = []
        for coll in self._configs:
            for stored in coll.objects.values():
                obj = stored.decode()
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    compiled = compile_configuration(obj)
                except Exception:  # validated on write; a compile error must not stop the server
                    log.exception("webhook configuration %s skipped", stored.key[1])
                    continue
                hooks += [(stored.key[1], hook) for hook in compiled]
        # Kubernetes calls the webhooks of configurations in name order.
        hooks.sort(key=lambda item: (item[0], not item[1].mutating))
        self._webhooks = tuple(hook for _, hook in hooks)

    def match(self, rtype: ResourceType, subresource: str | None, operation: str) -> Matched | None:
        """The webhooks whose rules cover this request, or None (the common case)."""
        self._refresh()
        if not self._webhooks:
            return None
        key = (rtype.group, rtype.version, rtype.plural, subresource or "", operation)
        try:
            return self._matches[key]
        except KeyError:
            pass
        found: Matched | None = None
        if rtype.group != GROUP:  # webhook configurations are exempt from webhooks
            mutating, validating = [], []
            for hook in self._webhooks:
                if any(
                    rule.matches(
                        rtype.group,
                        rtype.version,
                        rtype.plural,
                        subresource or "",
                        operation,
                        rtype.namespaced,
                    )
                    for rule in hook.rules
                ):
                    (mutating if hook.mutating else validating).append(hook)
            if mutating or validating:
                found = Matched(tuple(mutating), tuple(validating))
        self._matches[key] = found
        return found

    def _selected(self, hook: Webhook, attrs: Attributes) -> bool:
        """namespaceSelector and objectSelector (and the CEL matchConditions)."""
        scoped = attrs.namespace or attrs.resource == "namespaces"
        if (
            scoped
            and not hook.namespace_selector.empty
            and not hook.namespace_selector.matches(self._namespace_labels(attrs))
        ):
            return False
        if not hook.object_selector.empty and not any(
            hook.object_selector.matches((o.get("metadata") or {}).get("labels") or {})
            for o in (attrs.obj, attrs.old)
            if o is not None
        ):
            return False
        return all(
            self._condition(hook, name, program, attrs) for name, program in hook.match_conditions
        )

    def _namespace_labels(self, attrs: Attributes) -> dict[str, str]:
        if attrs.resource == "namespaces" and attrs.group == "" and not attrs.subresource:
            source = attrs.obj if attrs.operation in ("CREATE", "UPDATE") else attrs.old
            return dict(((source or {}).get("metadata") or {}).get("labels") or {})
        assert self._namespaces is not None
        stored = self.store.find(self._namespaces, "", attrs.namespace)
        return dict(stored.labels or {}) if stored is not None else {}

    def _condition(self, hook: Webhook, name: str, program: Any, attrs: Attributes) -> bool:
        import celpy

        activation = {
            "object": celpy.json_to_cel(attrs.obj),
            "oldObject": celpy.json_to_cel(attrs.old),
            "request": celpy.json_to_cel(
                {
                    "operation": attrs.operation,
                    "name": attrs.name,
                    "namespace": attrs.namespace,
                    "resource": {
                        "group": attrs.group,
                        "version": attrs.version,
                        "resource": attrs.resource,
                    },
                    "subResource": attrs.subresource,
                    "dryRun": attrs.dry_run,
                }
            ),
        }
        try:
            return bool(program.evaluate(activation))
        except Exception as exc:
            # An expression that cannot be evaluated is treated as a call error.
            if hook.ignore_failures:
                return False
            raise errors.ApiError(
                500,
                "InternalError",
                f'Internal error occurred: failed calling webhook "{hook.name}": '
                f"failed to evaluate match condition {name}: {exc}",
            ) from None

    # -------------------------------------------------------------------------- calling

    async def mutate(
        self, hooks: Sequence[Webhook], attrs: Attributes, warnings: list[str]
    ) -> dict[str, Any] | None:
        """Run the mutating webhooks in order; returns the (possibly patched) object."""
        for hook in hooks:
            if not self._selected(hook, attrs):
                continue
            try:
                answer = await self.client.call(hook, attrs)
            except CallError as exc:
                if hook.ignore_failures:
                    log.warning("failed calling webhook, failing open: %s", exc)
                    continue
                raise _internal(exc) from None
            warnings += answer.warnings
            if not answer.allowed:
                raise rejection(hook, attrs, answer.status)
            if answer.patch and attrs.obj is not None:
                attrs.obj = _apply_patch(attrs.obj, answer.patch)
        return attrs.obj

    async def validate(
        self, hooks: Sequence[Webhook], attrs: Attributes, warnings: list[str]
    ) -> None:
        """Run the validating webhooks concurrently; the first denial (in call order) wins."""
        selected = [hook for hook in hooks if self._selected(hook, attrs)]
        if not selected:
            return
        results = await asyncio.gather(
            *(self.client.call(hook, attrs) for hook in selected), return_exceptions=True
        )
        failure: errors.ApiError | None = None
        for hook, result in zip(selected, results, strict=True):
            if isinstance(result, CallError):
                if hook.ignore_failures:
                    log.warning("failed calling webhook, failing open: %s", result)
                    continue
                failure = failure or _internal(result)
            elif isinstance(result, errors.ApiError):
                failure = failure or result
            elif isinstance(result, BaseException):
                raise result
            else:
                warnings += result.warnings
                if not result.allowed:
                    failure = failure or rejection(hook, attrs, result.status)
        if failure is not None:
            raise failure

    async def close(self) -> None:
        await self.client.close()


def _internal(exc: CallError) -> errors.ApiError:
    message = str(exc)
    error = errors.ApiError(500, "InternalError", f"Internal error occurred: {message}")
    error.details = {"causes": [{"message": message}]}
    return error


def _apply_patch(obj: dict[str, Any], patch: bytes) -> dict[str, Any]:
    """Apply a webhook's JSONPatch; a patch that does not apply is an internal error, whatever
    the failurePolicy, as in kube-apiserver."""
    try:
        operations = orjson.loads(patch)
        patched = jsonpatch.apply_patch(obj, operations)
    except Exception as exc:
        raise errors.ApiError(500, "InternalError", f"Internal error occurred: {exc}") from None
    if not isinstance(patched, dict):
        raise errors.ApiError(
            500, "InternalError", "Internal error occurred: the patch did not produce an object"
        )
    return patched
