"""Calling one admission webhook the way kube-apiserver does: an `admission.k8s.io/v1`
AdmissionReview POSTed over HTTPS (verified against the webhook's caBundle) with
`?timeout=Ns`, the response checked (uid, apiVersion/kind, patch rules), and failures phrased as
kube-apiserver phrases them (`failed calling webhook "NAME": failed to call webhook: Post ...`).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from sim.apiserver import errors
from sim.apiserver.webhook_config import Webhook

# The embedded cluster authenticates nobody; every request acts as the cluster's admin, which is
# what a webhook sees from kubectl with an admin kubeconfig on a real cluster.
USER_INFO = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}

_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


@dataclass(slots=True)
class Attributes:
    """What one write is, for admission (Kubernetes' admission.Attributes)."""

    group: str
    version: str
    kind: str
    resource: str
    subresource: str
    name: str
    namespace: str
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    dry_run: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    # The kind's group/version when it is not the resource's (pods/eviction is policy/v1).
    kind_group: str | None = None
    kind_version: str | None = None

    @property
    def group_resource(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


class CallError(Exception):
    """The webhook could not be called or answered nonsense: `failurePolicy` decides."""

    def __init__(self, hook: Webhook, reason: str) -> None:
        super().__init__(f'failed calling webhook "{hook.name}": {reason}')
        self.hook = hook


@dataclass(slots=True)
class Answer:
    allowed: bool
    status: dict[str, Any] | None
    patch: bytes | None
    warnings: list[str]


def review(hook: Webhook, attrs: Attributes) -> tuple[str, dict[str, Any]]:
    """The AdmissionReview sent to `hook` (and the request uid to expect back)."""
    uid = str(uuid.uuid4())
    kind = {
        "group": attrs.group if attrs.kind_group is None else attrs.kind_group,
        "version": attrs.kind_version or attrs.version,
        "kind": attrs.kind,
    }
    resource = {"group": attrs.group, "version": attrs.version, "resource": attrs.resource}
    request: dict[str, Any] = {
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "operation": attrs.operation,
        "userInfo": USER_INFO,
        "object": attrs.obj,
        "oldObject": attrs.old,
        "dryRun": attrs.dry_run,
        "options": {
            "kind": _OPTIONS_KIND.get(attrs.operation, "CreateOptions"),
            "apiVersion": "meta.k8s.io/v1",
            **attrs.options,
        },
    }
    if attrs.subresource:
        request["subResource"] = request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    body = {
        "apiVersion": f"admission.k8s.io/{hook.review_version}",
        "kind": "AdmissionReview",
        "request": request,
    }
    return uid, body


def verify(hook: Webhook, uid: str, body: Any) -> Answer:
    """`VerifyAdmissionResponse`: the checks kube-apiserver makes of an answer."""
    if not isinstance(body, dict):
        raise CallError(hook, "received invalid webhook response: webhook response was absent")
    response = body.get("response")
    if not isinstance(response, dict):
        raise CallError(hook, "received invalid webhook response: webhook response was absent")
    if response.get("uid") != uid:
        raise CallError(
            hook,
            f'received invalid webhook response: expected response.uid="{uid}", '
            f'got "{response.get("uid") or ""}"',
        )
    expected = f"admission.k8s.io/{hook.review_version}, Kind=AdmissionReview"
    got = f"{body.get('apiVersion') or ''}, Kind={body.get('kind') or ''}"
    if got != expected:
        raise CallError(
            hook,
            "received invalid webhook response: expected webhook response of "
            f"{expected}, got {got}",
        )
    patch, patch_type = response.get("patch"), response.get("patchType")
    if hook.mutating:
        if patch and patch_type is None:
            raise CallError(
                hook,
                "received invalid webhook response: webhook returned response.patch but not "
                "response.patchType",
            )
        if not patch and patch_type is not None:
            raise CallError(
                hook,
                "received invalid webhook response: webhook returned response.patchType but "
                "not response.patch",
            )
        if patch_type is not None and patch_type != "JSONPatch":
            raise CallError(hook, f'unsupported patch type "{patch_type}"')
    else:
        if patch:
            raise CallError(
                hook,
                "received invalid webhook response: validating webhook may not return "
                "response.patch",
            )
        if patch_type is not None:
            raise CallError(
                hook,
                "received invalid webhook response: validating webhook may not return "
                "response.patchType",
            )
    decoded = None
    if patch:
        try:
            decoded = base64.b64decode(patch, validate=True)
        except (ValueError, TypeError) as exc:
            raise errors.ApiError(500, "InternalError", f"Internal error occurred: {exc}") from None
    status = response.get("status")
    return Answer(
        allowed=bool(response.get("allowed")),
        status=status if isinstance(status, dict) else None,
        patch=decoded,
        warnings=[w for w in response.get("warnings") or () if isinstance(w, str)],
    )


class WebhookClient:
    """One HTTP client (keep-alive connections) for every webhook call of an API server."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}

    def _context(self, hook: Webhook) -> ssl.SSLContext:
        context = self._contexts.get(hook.ca_bundle)
        if context is None:
            # Without a caBundle the system's trusted roots verify the webhook, as in Kubernetes.
            context = ssl.create_default_context(cadata=hook.ca_bundle or None)
            self._contexts[hook.ca_bundle] = context
        return context

    async def call(self, hook: Webhook, attrs: Attributes) -> Answer:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        uid, body = review(hook, attrs)
        # kube-apiserver tells the webhook its deadline in the URL, as client-go's Timeout().
        url = f"{hook.url}?timeout={hook.timeout}s"
        try:
            context = self._context(hook)
        except ssl.SSLError as exc:
            raise CallError(
                hook, f"could not get REST client: unable to load root certificates: {exc}"
            ) from None
        try:
            async with asyncio.timeout(hook.timeout):
                async with self._session.post(
                    url,
                    data=orjson.dumps(body),
                    headers={"Content-Type": "application/json", "Accept": "application/json"},
                    ssl=context,
                ) as response:
                    raw = await response.read()
                    status = response.status
        except TimeoutError:
            raise CallError(
                hook, f'failed to call webhook: Post "{url}": context deadline exceeded'
            ) from None
        except aiohttp.ClientConnectorCertificateError as exc:
            reason = getattr(exc.certificate_error, "verify_message", None) or str(
                exc.certificate_error
            )
            raise CallError(
                hook,
                f'failed to call webhook: Post "{url}": tls: failed to verify certificate: '
                f"x509: {reason}",
            ) from None
        except aiohttp.ClientConnectorError as exc:
            raise CallError(
                hook,
                f'failed to call webhook: Post "{url}": dial tcp {exc.host}:{exc.port}: connect: '
                f"{_dial_reason(exc)}",
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise CallError(
                hook, f'failed to call webhook: Post "{url}": {exc or type(exc).__name__}'
            ) from None
        if not 200 <= status < 300:
            raise CallError(hook, f"failed to call webhook: {_status_text(status, raw)}")
        try:
            decoded = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise CallError(hook, f"failed to call webhook: {exc}") from None
        return verify(hook, uid, decoded)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _dial_reason(exc: aiohttp.ClientConnectorError) -> str:
    if isinstance(exc.os_error, ConnectionRefusedError):
        return "connection refused"
    return (exc.os_error.strerror or str(exc.os_error)).lower()


def _status_text(status: int, raw: bytes) -> str:
    """What client-go says of a non-2xx answer that is not a Status object."""
    if status == 404:
        return "the server could not find the requested resource"
    text = raw.decode("utf-8", "replace").strip()[:256]
    return (
        f'an error on the server ("{text or "unknown"}") has prevented the request from succeeding'
    )


def rejection(hook: Webhook, attrs: Attributes, result: dict[str, Any] | None) -> errors.ApiError:
    """`ToStatusErr`: a webhook's denial as the API server returns it. The code defaults to 403
    and the message is framed like any Forbidden (`queues.scheduling.volcano.sh "default" is
    forbidden: admission webhook "NAME" denied the request: ...`); a 500 is an internal error."""
    result = dict(result or {})
    code = int(result.get("code") or 403)
    message = str(result.get("message") or "")
    reason = str(result.get("reason") or "")
    denied = f'admission webhook "{hook.name}" denied the request'
    if message:
        text = f"{denied}: {message}"
    elif reason:
        text = f"{denied}: {reason}"
    else:
        text = f"{denied} without explanation"
    name = attrs.name or "Unknown"
    if code == 500:
        full = f"Internal error occurred: {text}"
        details = result.get("details") or {"causes": [{"message": text}]}
    else:
        full = f'{attrs.group_resource} "{name}" is forbidden: {text}'
        details = result.get("details") or {
            "name": name,
            "group": attrs.group,
            "kind": attrs.resource,
        }
    error = errors.ApiError(code, reason or ("InternalError" if code == 500 else "Forbidden"), full)
    error.details = {k: v for k, v in details.items() if v not in ("", None)}
    return error
