"""`vulcan webhook-certs` flags and options, free of heavy imports so `vulcan --help` stays fast
(the command itself is vulcan/webhook_certs.py)."""

from __future__ import annotations

import argparse

from core.durations import parse_duration
from core.kube.flags import add_client_flags
from core.webhook_tls_options import Options, add_place_flags, place_of


def add_webhook_certs_flags(parser: argparse.ArgumentParser) -> None:
    add_client_flags(parser)
    defaults = Options()
    add_place_flags(parser)
    parser.add_argument(
        "--valid-days",
        type=int,
        default=defaults.valid_days,
        help="validity of a new CA and certificate (default %(default)s: nothing renews them "
        "on a schedule, and once expired the webhooks refuse every Volcano write)",
    )
    parser.add_argument(
        "--renew-before-days",
        type=int,
        default=defaults.renew_before_days,
        help="replace a certificate expiring within this many days (default %(default)s)",
    )
    parser.add_argument(
        "--wait",
        type=parse_duration,
        default=defaults.wait,
        help="how long to wait for the webhook configurations to exist (default 120s)",
    )
    parser.add_argument("--log-format", choices=("text", "json"), default="text")


def options_of(args: argparse.Namespace) -> Options:
    """The options, or ValueError for a combination that cannot work."""
    if args.renew_before_days < 0 or args.wait < 0:
        raise ValueError("--renew-before-days and --wait must not be negative")
    if args.valid_days <= args.renew_before_days:
        # Otherwise every run would find the certificate it just made due for renewal.
        raise ValueError("--valid-days must be more than --renew-before-days")
    return Options(
        **place_of(args),
        valid_days=args.valid_days,
        renew_before_days=args.renew_before_days,
        wait=args.wait,
    )
