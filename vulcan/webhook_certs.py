"""`vulcan webhook-certs`: the webhooks' certificate without cert-manager (what Volcano's
`volcano-admission-init` Job does), run as the Job of manifests/components/self-signed-webhooks
or by hand with --kubeconfig: the Secret and the caBundles as core/webhook_tls.py keeps them.

The extender reads a certificate given as files at start, so after a renewal it serves the old
one until it restarts (the previous CA stays in the caBundle meanwhile). An extender run with
--manage-webhook-certs instead keeps the certificate itself and serves a renewal at once.
"""

from __future__ import annotations

import argparse
import logging
import sys

from core.kube.client import ApiError, KubeClient
from core.kube.flags import options_from_args
from core.webhook_tls import CertsError, Options, ensure_secret, set_ca_bundles
from vulcan.webhook_certs_flags import options_of

log = logging.getLogger("vulcan.webhook_certs")


async def run(opts: Options, args: argparse.Namespace) -> None:
    try:
        client = await KubeClient.connect(options_from_args(args, "webhook-certs"))
    except ValueError as exc:  # no kubeconfig, no in-cluster service account
        raise CertsError(str(exc)) from exc
    async with client:
        kept = await ensure_secret(client, opts)
        await set_ca_bundles(client, opts, kept.ca, kept.replaced_cas)
    if kept.renewed:
        log.info(
            "restart the extender to serve the new certificate: kubectl -n %s rollout "
            "restart deployment/vulcan-extender",
            opts.namespace,
        )


def main(args: argparse.Namespace) -> int:
    from kubernetes_asyncio.config import ConfigException

    from vulcan.logs import setup_logging
    from vulcan.sim_commands import run_async

    try:
        opts = options_of(args)
    except ValueError as exc:
        print(f"vulcan webhook-certs: error: {exc}", file=sys.stderr)
        return 2
    setup_logging(args.log_format)
    try:
        run_async(run(opts, args))
    except (CertsError, ApiError, ConfigException) as exc:
        # ApiError carries the server's message (a 403 names the verb and resource refused).
        print(f"vulcan webhook-certs: error: {exc}", file=sys.stderr)
        return 1
    return 0
