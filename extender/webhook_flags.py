"""Flags for the admission webhooks the extender process serves (no heavy imports: parsed
before anything starts). Webhooks are HTTPS only, as kube-apiserver calls them, so they are
served with a certificate and key given as files, or one the extender keeps itself
(--manage-webhook-certs), and not at all otherwise."""

from __future__ import annotations

import argparse

from core.durations import parse_duration
from core.kube.flags import parse_bool
from core.webhook_tls_options import Options, add_place_flags, place_of

DEFAULT_WEBHOOK_PORT = 8443  # Volcano's admission port
# A year: the extender renews on its own, so its certificates need not live as long as the
# Job's (vulcan webhook-certs), which renews only when it runs again.
MANAGED_VALID_DAYS = 365


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
    defaults = Options()
    group.add_argument(
        "--manage-webhook-certs",
        action="store_true",
        help="keep the webhooks' certificate without cert-manager: make a CA and certificate "
        "for the Service's names at start (or take the one in --webhook-secret), put the CA "
        "into the webhook configurations' caBundle, and renew before expiry without a restart",
    )
    add_place_flags(group, "webhook-", pod_namespace=True)
    group.add_argument(
        "--queue-allocation-gate",
        type=parse_bool,
        nargs="?",
        const=True,
        default=True,
        help="create the pods of a gang that waits for its queue (it names a PodGroup not "
        "admitted yet, and vulcan schedules it) behind the scheduling gate "
        "scheduling.volcano.sh/queue-allocation-gate (the gatepod.vulcan.sh webhook), lifted "
        "when the gang is admitted: kube-scheduler then never tries them while they wait "
        "(default true)",
    )
    group.add_argument(
        "--webhook-extra-hosts",
        default="",
        metavar="NAMES",
        help="comma-separated names or IPs the certificate is for besides the Service's (a "
        "webhook URL that reaches the extender off the cluster, e.g. 127.0.0.1)",
    )
    group.add_argument(
        "--webhook-cert-valid-days",
        type=int,
        default=MANAGED_VALID_DAYS,
        help="validity of a certificate the extender makes (default %(default)s)",
    )
    group.add_argument(
        "--webhook-cert-renew-before-days",
        type=int,
        default=defaults.renew_before_days,
        help="renew a certificate expiring within this many days (default %(default)s)",
    )
    group.add_argument(
        "--webhook-cert-check-interval",
        type=parse_duration,
        default=3600.0,
        metavar="DURATION",
        help="how often the Secret is read again: a renewal is due, or another replica "
        "renewed (default 1h)",
    )


def webhook_flag_errors(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of webhook flags, if anything."""
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        return "--tls-cert-file and --tls-private-key-file go together"
    if args.manage_webhook_certs and args.tls_cert_file:
        return "--manage-webhook-certs keeps its own certificate: drop --tls-cert-file"
    if args.webhook_port is not None and not (args.tls_cert_file or args.manage_webhook_certs):
        return (
            "--webhook-port needs --tls-cert-file and --tls-private-key-file, or "
            "--manage-webhook-certs (webhooks are served over HTTPS only)"
        )
    if args.webhook_cert_valid_days <= args.webhook_cert_renew_before_days:
        # Otherwise every check would find the certificate it just made due for renewal.
        return "--webhook-cert-valid-days must be more than --webhook-cert-renew-before-days"
    if args.webhook_cert_renew_before_days < 0:
        return "--webhook-cert-renew-before-days must not be negative"
    if args.webhook_cert_check_interval <= 0:
        return "--webhook-cert-check-interval must be positive"
    return None


def managed_cert_options(args: argparse.Namespace) -> Options:
    """Where --manage-webhook-certs keeps the certificate, and for which names."""
    extra = tuple(h.strip() for h in args.webhook_extra_hosts.split(",") if h.strip())
    return Options(
        **place_of(args, "webhook-"),
        valid_days=args.webhook_cert_valid_days,
        renew_before_days=args.webhook_cert_renew_before_days,
        extra_hosts=extra,
    )
