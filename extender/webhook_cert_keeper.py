"""--manage-webhook-certs: the extender keeps the webhooks' serving certificate itself, as
Kueue's internal certificate management does, so an install needs neither cert-manager nor the
init Job. At start the certificate in the Secret is taken (made when it is missing, not for the
Service's names, or due), served, and its CA put into the webhook configurations' caBundle;
every check interval the Secret is read again, so a renewal (this replica's or another's) is
served from the next TLS handshake on, without a restart. Every replica does the same: writes
carry the resourceVersion read, and the loser of a race takes the winner's certificate."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from pathlib import Path

import aiohttp

from core.certs import load_certificates
from core.kube.backoff import Backoff
from core.kube.client import ApiError, KubeClient
from core.webhook_tls import CertsError, Options, ServingSecret, ensure_secret, set_ca_bundles

__all__ = ["ServingCertKeeper"]

log = logging.getLogger("vulcan.webhook_tls")

# What a failed check may meet: the API server's refusal or absence, or a Secret we cannot use.
_RETRIED = (ApiError, CertsError, aiohttp.ClientError, asyncio.TimeoutError, OSError)


class ServingCertKeeper:
    def __init__(
        self, client: KubeClient, opts: Options, directory: Path, check_every: float
    ) -> None:
        self.client = client
        self.opts = opts
        self.directory = directory  # where the served files are written (ssl loads files)
        self.check_every = check_every
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.serving: bytes | None = None  # the certificate served now (PEM)
        self._task: asyncio.Task[None] | None = None

    @property
    def where(self) -> str:
        return f"Secret {self.opts.namespace}/{self.opts.secret}"

    async def start(self) -> ssl.SSLContext:
        """The Secret's certificate in force (retried with backoff until the API server answers
        and the Secret is usable); the caBundles and later checks go on in the background."""
        backoff = Backoff(0.5, 30.0)
        while True:
            try:
                self._serve(await ensure_secret(self.client, self.opts))
                break
            except _RETRIED as exc:
                log.warning("webhook certificate not ready, retrying: %s: %s", self.where, exc)
                await backoff.wait()
        self._task = asyncio.create_task(self._keep(), name="webhook-cert-keeper")
        return self.context

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def check(self) -> bool:
        """Read the Secret again (renewing when due) and trust its CA; True when the served
        certificate changed."""
        kept = await ensure_secret(self.client, self.opts)
        changed = kept.cert != self.serving
        if changed:
            self._serve(kept)
        await set_ca_bundles(self.client, self.opts, kept.ca, kept.replaced_cas)
        return changed

    async def _keep(self) -> None:
        """A check at once (the caBundles), then every interval; a failure is retried with
        backoff (the certificate served meanwhile stays valid for days)."""
        backoff = Backoff(1.0, min(300.0, self.check_every))
        while True:
            try:
                await self.check()
            except _RETRIED as exc:
                log.warning("webhook certificate check failed, retrying: %s: %s", self.where, exc)
                await backoff.wait()
                continue
            backoff.reset()
            await asyncio.sleep(self.check_every)

    def _serve(self, kept: ServingSecret) -> None:
        """Write the certificate and key where ssl can load them, then load them: handshakes
        from now on present them (ones under way finish with the old)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        cert_file, key_file = self.directory / "tls.crt", self.directory / "tls.key"
        _write_private(cert_file, kept.cert)
        _write_private(key_file, kept.key)
        self.context.load_cert_chain(cert_file, key_file)
        self.serving = kept.cert
        expires = load_certificates(kept.cert)[0].not_valid_after_utc
        how = "renewed" if kept.renewed else "created" if kept.replaced_cas else "as found"
        log.info(
            "serving the webhook certificate of %s (%s), valid until %s",
            self.where,
            how,
            f"{expires:%Y-%m-%d %H:%M}Z",
        )


def _write_private(path: Path, data: bytes) -> None:
    """Replace `path` whole (write aside, then rename), readable by this user only."""
    aside = path.with_name(path.name + ".new")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(aside, path)
