"""The extender's admission webhooks as one part of the process: the flags checked and a given
certificate loaded before anything starts, the webhooks served (and announced) once the extender
serves, with the certificate from files or kept by the extender (--manage-webhook-certs)."""

from __future__ import annotations

import argparse
import logging
import shutil
import ssl
import tempfile
from pathlib import Path

from core.api import keys
from core.cache import ClusterCache
from core.kube.client import KubeClient
from extender.ungrouped import served_pods
from extender.webhook_cert_keeper import ServingCertKeeper
from extender.webhook_flags import DEFAULT_WEBHOOK_PORT, managed_cert_options, webhook_flag_errors
from extender.webhook_pods import gated_pods
from extender.webhook_view import WebhookView
from extender.webhooks import AdmissionWebhooks

__all__ = ["WebhookServing"]

log = logging.getLogger("vulcan.extender.webhooks")


class WebhookServing:
    def __init__(self, args: argparse.Namespace, context: ssl.SSLContext | None) -> None:
        self.args = args
        self.context = context
        self.webhooks: AdmissionWebhooks | None = None
        self.view: WebhookView | None = None
        self.keeper: ServingCertKeeper | None = None
        self._cert_dir: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> WebhookServing:
        problem = webhook_flag_errors(args)
        if problem:
            raise SystemExit(f"vulcan extender: error: {problem}")
        if not args.tls_cert_file:
            return cls(args, None)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(args.tls_cert_file, args.tls_private_key_file)
        except (OSError, ssl.SSLError) as exc:
            raise SystemExit(
                f"vulcan extender: error: cannot load the webhook certificate: {exc}"
            ) from None
        return cls(args, context)

    async def start(self, client: KubeClient, cache: ClusterCache) -> None:
        if self.args.manage_webhook_certs:
            # Files for ssl to load, in a directory of this process's own (under /tmp, which
            # the Deployment mounts writable).
            self._cert_dir = Path(tempfile.mkdtemp(prefix="vulcan-webhook-certs-"))
            self.keeper = ServingCertKeeper(
                client,
                managed_cert_options(self.args),
                self._cert_dir,
                self.args.webhook_cert_check_interval,
            )
            self.context = await self.keeper.start()
        if self.context is None:
            return
        self.view = WebhookView(client, cache, scheduler_names=(keys.DEFAULT_SCHEDULER_NAME,))
        self.view.start()
        gated = None
        if self.args.queue_allocation_gate:
            gated = gated_pods(served_pods(self.args), self.args.bind_marker or None)
        self.webhooks = AdmissionWebhooks(client, self.view, gated=gated)
        port = self.args.webhook_port
        host = self.args.bind_address
        bound = await self.webhooks.start(
            host, DEFAULT_WEBHOOK_PORT if port is None else port, self.context
        )
        url = f"https://{host}:{bound}"
        # The second stdout line (the first stays the extender's), for whoever started us.
        print(f"vulcan admission webhooks listening on {url}", flush=True)
        log.info("admission webhooks serving", extra={"url": url})

    async def stop(self) -> None:
        if self.keeper is not None:
            await self.keeper.stop()
        if self.webhooks is not None:
            await self.webhooks.stop()
        if self.view is not None:
            await self.view.stop()
        if self._cert_dir is not None:
            shutil.rmtree(self._cert_dir, ignore_errors=True)
