"""`vulcan webhook-certs`' decisions without an API server: when a certificate made by
core/certs.py may go on being served (names, key, CA, expiry against renew-before), which CAs
a caBundle carries, and the flags it refuses."""

from __future__ import annotations

import argparse
import datetime

import pytest
from cryptography import x509

from core.certs import issue, load_certificates, serving_problem
from core.webhook_tls import bundle_for
from vulcan.webhook_certs_flags import Options, add_webhook_certs_flags, options_of

HOSTS = Options().hosts
DAY = datetime.timedelta(days=1)
NOW = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)


def made(days: float = 365, hosts: tuple[str, ...] = HOSTS) -> tuple[bytes, bytes, bytes]:
    """(tls.crt, tls.key, ca.crt) as the Secret holds them, issued at NOW."""
    ca, cert, key = issue(hosts, now=NOW, validity=days * DAY)
    return cert, key, ca


def test_the_service_names_are_the_four_a_client_may_dial() -> None:
    assert HOSTS == (
        "vulcan-webhooks.vulcan-system.svc",
        "vulcan-webhooks.vulcan-system.svc.cluster.local",
        "vulcan-webhooks",
        "vulcan-webhooks.vulcan-system",
    )


def test_a_fresh_certificate_for_the_service_is_kept() -> None:
    assert serving_problem(*made(), HOSTS, now=NOW, renew_before=30 * DAY) is None
    cert = x509.load_pem_x509_certificate(made()[0])
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == list(HOSTS)


def test_a_certificate_expiring_within_renew_before_is_renewed() -> None:
    cert, key, ca = made(days=40)
    assert serving_problem(cert, key, ca, HOSTS, now=NOW, renew_before=30 * DAY) is None
    later = NOW + 11 * DAY  # 29 days left
    problem = serving_problem(cert, key, ca, HOSTS, now=later, renew_before=30 * DAY)
    assert problem is not None and problem.startswith("tls.crt expires 2030-02-10")
    # Without renew-before only expiry itself counts.
    assert serving_problem(cert, key, ca, HOSTS, now=later) is None
    assert serving_problem(cert, key, ca, HOSTS, now=NOW + 41 * DAY) is not None


def test_a_certificate_not_yet_valid_is_renewed() -> None:
    problem = serving_problem(*made(), HOSTS, now=NOW - DAY)
    assert problem is not None and "not valid before" in problem


def test_a_certificate_missing_one_of_the_names_is_renewed() -> None:
    cert, key, ca = made(hosts=HOSTS[:2])
    problem = serving_problem(cert, key, ca, HOSTS, now=NOW)
    assert problem == "tls.crt is not for vulcan-webhooks, vulcan-webhooks.vulcan-system"
    other = Options(service="other").hosts
    assert serving_problem(*made(), other, now=NOW) is not None


def test_a_key_or_ca_that_does_not_belong_to_the_certificate_is_renewed() -> None:
    cert, key, ca = made()
    _, other_key, other_ca = made()
    assert serving_problem(cert, other_key, ca, HOSTS, now=NOW) == (
        "tls.key is not the key of tls.crt"
    )
    assert serving_problem(cert, key, other_ca, HOSTS, now=NOW) == "tls.crt is not signed by ca.crt"


@pytest.mark.parametrize(
    ("which", "expected"),
    [
        (0, "tls.crt holds no certificate"),
        (1, "tls.key holds no private key"),
        (2, "ca.crt holds no certificate"),
    ],
)
def test_missing_or_garbled_keys_are_renewed(which: int, expected: str) -> None:
    files = list(made())
    files[which] = b"not PEM"
    assert serving_problem(*files, HOSTS, now=NOW) == expected


def test_a_bundle_is_the_new_ca_then_the_unexpired_previous_cas_of_vulcan() -> None:
    new_ca = made()[2]
    old_ca = made(days=20)[2]
    expired_ca = issue(HOSTS, now=NOW - 30 * DAY, validity=10 * DAY)[0]
    # What is not a CA of vulcan's (here a serving certificate) is not carried over.
    foreign = made()[0]
    bundle = bundle_for(new_ca, [old_ca, expired_ca, foreign, b"garbage", new_ca, old_ca], NOW)
    assert [c.fingerprint(c.signature_hash_algorithm) for c in load_certificates(bundle)] == [
        c.fingerprint(c.signature_hash_algorithm)
        for c in load_certificates(new_ca) + load_certificates(old_ca)
    ]
    assert bundle_for(new_ca, [], NOW) == new_ca
    # Once the old CA has expired it is dropped.
    assert bundle_for(new_ca, [bundle], NOW + 21 * DAY) == new_ca


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_webhook_certs_flags(parser)
    return parser.parse_args(argv)


def test_the_defaults_and_the_refused_combinations() -> None:
    assert options_of(parse()) == Options()
    assert options_of(parse("--wait", "1m30s", "--service", "s")).wait == 90.0
    with pytest.raises(ValueError, match="--valid-days must be more than --renew-before-days"):
        options_of(parse("--valid-days", "30"))
    with pytest.raises(ValueError, match="must not be negative"):
        options_of(parse("--renew-before-days", "-1"))
