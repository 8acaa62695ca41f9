"""The admission webhooks' serving certificate kept in a Secret, and its CA in the webhook
configurations' caBundle: what `vulcan webhook-certs` (the Job of
manifests/components/self-signed-webhooks) and the extender's --manage-webhook-certs do.

1. The Secret (`vulcan-webhook-tls`, type kubernetes.io/tls: tls.crt, tls.key, ca.crt) is kept
   when its certificate is for the Service's names, signed by its ca.crt, matches its key and
   does not expire within the renew-before days; otherwise a new CA and certificate replace it.
   Asking again therefore changes nothing until renewal is due.
2. Every webhook of the Mutating and the ValidatingWebhookConfiguration gets that CA as its
   `caBundle`. A renewal leaves the previous CA in the caBundle next to the new one while that
   CA is unexpired, so a server still presenting the old certificate stays trusted (the webhooks
   fail closed). That is safe because a CA's key is dropped once it has signed its one
   certificate (core/certs.py): the old CA vouches for the old certificate alone.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.serialization import Encoding

from core.certs import issue, load_certificates, serving_problem
from core.kube.backoff import Backoff
from core.kube.client import SECRETS, ApiError, KubeClient, Resource
from core.webhook_tls_options import Options

__all__ = [
    "CONFIGURATIONS",
    "CertsError",
    "Options",
    "ServingSecret",
    "bundle_for",
    "ensure_secret",
    "set_ca_bundles",
]

log = logging.getLogger("vulcan.webhook_tls")

ADMISSION = "admissionregistration.k8s.io"
CONFIGURATIONS = (
    Resource(
        ADMISSION, "v1", "mutatingwebhookconfigurations", False, "MutatingWebhookConfiguration"
    ),
    Resource(
        ADMISSION, "v1", "validatingwebhookconfigurations", False, "ValidatingWebhookConfiguration"
    ),
)
TLS_TYPE = "kubernetes.io/tls"
KEYS = ("tls.crt", "tls.key", "ca.crt")
# The issuer name core.certs gives its CAs: only such a CA is carried over in a caBundle.
OUR_CA = x509.Name.from_rfc4514_string("CN=vulcan-webhook-ca,O=vulcan")
CONFLICT_ATTEMPTS = 10


@dataclass(frozen=True, slots=True)
class ServingSecret:
    """What the Secret holds after `ensure_secret`, and what it replaced."""

    ca: bytes
    cert: bytes
    key: bytes
    replaced_cas: list[bytes] = field(default_factory=list)  # the CA of a replaced certificate
    renewed: bool = False  # an existing certificate was replaced (not created, not kept)


class CertsError(Exception):
    """A failure worth one line on stderr and a non-zero exit (not a traceback)."""


def now_utc() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _decoded(data: dict[str, Any], key: str) -> bytes:
    try:
        return base64.b64decode(data.get(key) or "", validate=True)
    except ValueError:
        return b""


def _secret_object(
    existing: dict[str, Any] | None, opts: Options, files: dict[str, bytes]
) -> dict[str, Any]:
    data = {key: base64.b64encode(files[key]).decode() for key in KEYS}
    if existing is None:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": opts.secret,
                "namespace": opts.namespace,
                "labels": {"app.kubernetes.io/part-of": "vulcan"},
            },
            "type": TLS_TYPE,
            "data": data,
        }
    # An update carries the resourceVersion read: a concurrent writer makes it a 409.
    return {**existing, "data": {**(existing.get("data") or {}), **data}}


async def ensure_secret(client: KubeClient, opts: Options) -> ServingSecret:
    """The Secret's certificate after keeping or (re)writing it. A conflict (another writer got
    there first) re-reads it and decides again."""
    backoff = Backoff(0.2, 5.0)
    for _ in range(CONFLICT_ATTEMPTS):
        try:
            secret = await client.get(SECRETS, opts.secret, opts.namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            secret = None
        data = (secret or {}).get("data") or {}
        files = {key: _decoded(data, key) for key in KEYS}
        renew_before = datetime.timedelta(days=opts.renew_before_days)
        problem = (
            serving_problem(*files.values(), opts.hosts, now=now_utc(), renew_before=renew_before)
            if secret
            else "it does not exist"
        )
        where = f"Secret {opts.namespace}/{opts.secret}"
        if problem is None:
            log.info("kept %s: its certificate for %s is not due for renewal", where, opts.hosts[0])
            return ServingSecret(files["ca.crt"], files["tls.crt"], files["tls.key"])
        if secret is not None and secret.get("type") != TLS_TYPE:
            # A Secret's type cannot be changed; replacing it is for a person to decide.
            raise CertsError(f"{where} has type {secret.get('type')!r}, not {TLS_TYPE}")
        ca, cert, key = issue(opts.hosts, validity=datetime.timedelta(days=opts.valid_days))
        body = _secret_object(secret, opts, {"tls.crt": cert, "tls.key": key, "ca.crt": ca})
        try:
            if secret is None:
                await client.create(SECRETS, body, opts.namespace)
            else:
                await client.replace(SECRETS, body)
        except ApiError as exc:
            if not exc.conflict:  # 409: AlreadyExists on create, Conflict on update
                raise
            log.info("%s was written meanwhile; reading it again", where)
            await backoff.wait()
            continue
        verb = "created" if secret is None else "renewed"
        log.info("%s %s (%s): a new CA and certificate for %s", verb, where, problem, opts.hosts[0])
        return ServingSecret(ca, cert, key, [files["ca.crt"]], renewed=secret is not None)
    raise CertsError(f"Secret {opts.namespace}/{opts.secret}: still conflicting, giving up")


def bundle_for(ca_pem: bytes, carried: list[bytes], now: datetime.datetime) -> bytes:
    """`ca_pem`, then every unexpired CA of vulcan's among `carried` (the CA of a replaced
    certificate, the caBundles in place), each once. Other certificates (another issuer's CA,
    the manifests' placeholder) are dropped."""
    cas = load_certificates(ca_pem)
    if not cas:
        raise CertsError("ca.crt holds no certificate")
    seen = {cas[0].fingerprint(hashes.SHA256())}
    parts = [ca_pem.strip() + b"\n"]
    for pem in carried:
        for cert in load_certificates(pem):
            fingerprint = cert.fingerprint(hashes.SHA256())
            ours = cert.subject == OUR_CA and cert.issuer == OUR_CA
            if ours and fingerprint not in seen and cert.not_valid_after_utc > now:
                seen.add(fingerprint)
                parts.append(cert.public_bytes(Encoding.PEM))
    return b"".join(parts)


async def _wait_for(
    client: KubeClient, resource: Resource, opts: Options, deadline: float
) -> dict[str, Any]:
    """The configuration, once it exists (the Job may run before it is applied)."""
    backoff = Backoff(0.5, 10.0)
    while True:
        try:
            return await client.get(resource, opts.configuration)
        except ApiError as exc:
            if not exc.not_found:
                raise
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CertsError(
                f"{resource.kind} {opts.configuration} not found after waiting {opts.wait:g}s: "
                "apply the install's webhook configurations first"
            )
        if backoff.attempt == 0:
            log.info("waiting up to %gs for %s %s", opts.wait, resource.kind, opts.configuration)
        await asyncio.sleep(min(backoff.next_delay(), remaining))


async def _put_bundle(
    client: KubeClient, resource: Resource, config: dict[str, Any], bundle: str
) -> None:
    """Every webhook's caBundle := bundle: an update carrying the resourceVersion read, read
    again and redone on a conflict. Nothing is written when all hooks have it already."""
    name = config["metadata"]["name"]
    backoff = Backoff(0.2, 5.0)
    for _ in range(CONFLICT_ATTEMPTS):
        hooks = config.get("webhooks") or []
        stale = [h for h in hooks if (h.get("clientConfig") or {}).get("caBundle") != bundle]
        if not stale:
            log.info("kept %s %s: its %d webhooks trust the CA", resource.kind, name, len(hooks))
            return
        for hook in stale:
            hook.setdefault("clientConfig", {})["caBundle"] = bundle
        try:
            await client.replace(resource, config)
        except ApiError as exc:
            if not exc.conflict:
                raise
            await backoff.wait()
            config = await client.get(resource, name)
            continue
        log.info(
            "patched %s %s: caBundle of %d of its %d webhooks",
            resource.kind,
            name,
            len(stale),
            len(hooks),
        )
        return
    raise CertsError(f"{resource.kind} {name}: still conflicting, giving up")


async def set_ca_bundles(
    client: KubeClient, opts: Options, ca_pem: bytes, previous: list[bytes]
) -> None:
    deadline = time.monotonic() + opts.wait
    configs = [await _wait_for(client, r, opts, deadline) for r in CONFIGURATIONS]
    in_place = [
        _decoded(hook.get("clientConfig") or {}, "caBundle")
        for config in configs
        for hook in config.get("webhooks") or ()
    ]
    bundle = base64.b64encode(bundle_for(ca_pem, previous + in_place, now_utc())).decode()
    for resource, config in zip(CONFIGURATIONS, configs, strict=True):
        await _put_bundle(client, resource, config, bundle)
