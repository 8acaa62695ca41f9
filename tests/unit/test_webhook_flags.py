"""The extender's webhook flags: which combinations serve, which are refused with the flag to
change, and where --manage-webhook-certs keeps its certificate."""

from __future__ import annotations

import argparse

import pytest

from extender.flags import add_extender_flags
from extender.webhook_flags import managed_cert_options, webhook_flag_errors


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_extender_flags(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        ((), None),
        (("--tls-cert-file", "c", "--tls-private-key-file", "k"), None),
        (("--manage-webhook-certs",), None),
        (("--manage-webhook-certs", "--webhook-port", "0"), None),
        (("--tls-cert-file", "c"), "--tls-cert-file and --tls-private-key-file go together"),
        (("--webhook-port", "8443"), "--webhook-port needs --tls-cert-file"),
        (
            ("--manage-webhook-certs", "--tls-cert-file", "c", "--tls-private-key-file", "k"),
            "drop --tls-cert-file",
        ),
        (
            ("--manage-webhook-certs", "--webhook-cert-valid-days", "30"),
            "--webhook-cert-valid-days must be more than --webhook-cert-renew-before-days",
        ),
        (
            ("--manage-webhook-certs", "--webhook-cert-renew-before-days", "-1"),
            "must not be negative",
        ),
        (("--webhook-cert-check-interval", "0s"), "must be positive"),
    ],
)
def test_flag_combinations(argv: tuple[str, ...], problem: str | None) -> None:
    found = webhook_flag_errors(parse(*argv))
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_managed_certificate_names_and_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "batch-system")
    opts = managed_cert_options(
        parse("--manage-webhook-certs", "--webhook-extra-hosts", "127.0.0.1, localhost,")
    )
    assert opts.namespace == "batch-system"  # the Deployment's own namespace
    assert (opts.secret, opts.configuration) == ("vulcan-webhook-tls", "vulcan-admission")
    assert opts.hosts == (
        "vulcan-webhooks.batch-system.svc",
        "vulcan-webhooks.batch-system.svc.cluster.local",
        "vulcan-webhooks",
        "vulcan-webhooks.batch-system",
        "127.0.0.1",
        "localhost",
    )
    assert (opts.valid_days, opts.renew_before_days) == (365, 30)
