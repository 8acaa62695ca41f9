"""Flags for the admission webhooks the extender process serves (no heavy imports: parsed
before anything starts). Webhooks are HTTPS only, as kube-apiserver calls them, so they are
served when a certificate and key are given, and not at all otherwise."""

from __future__ import annotations

import argparse

DEFAULT_WEBHOOK_PORT = 8443  # Volcano's admission port


def add_webhook_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "admission webhooks",
        "Volcano's /queues, /podgroups, /jobs and /jobflows webhooks over HTTPS, on their own "
        "port (served only with --tls-cert-file and --tls-private-key-file)",
    )
    group.add_argument(
        "--webhook-port",
        type=int,
        default=None,
        help=f"HTTPS port for the webhooks (default {DEFAULT_WEBHOOK_PORT}; 0: any free port, "
        "announced on stdout's second line)",
    )
    group.add_argument(
        "--tls-cert-file",
        metavar="FILE",
        help="PEM certificate (chain) the webhooks serve; its CA goes into the webhook "
        "configurations' caBundle",
    )
    group.add_argument("--tls-private-key-file", metavar="FILE", help="PEM key of the certificate")


def webhook_flag_errors(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of webhook flags, if anything."""
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        return "--tls-cert-file and --tls-private-key-file go together"
    if args.webhook_port is not None and not args.tls_cert_file:
        return (
            "--webhook-port needs --tls-cert-file and --tls-private-key-file (webhooks are "
            "served over HTTPS only)"
        )
    return None
