"""A private CA and a serving certificate for vulcan's admission webhooks on this machine.

kube-apiserver calls webhooks over HTTPS only and verifies them against the configuration's
`caBundle`; `vulcan sim up --with-extender` therefore makes a CA, signs a certificate for
`localhost`/`127.0.0.1` with it, serves the webhooks with that certificate and puts the CA in
the webhook configurations. On a real cluster cert-manager does this, or vulcan itself with
`issue` and `serving_problem` here (core/webhook_tls.py: `vulcan webhook-certs`, the extender's
--manage-webhook-certs).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True, slots=True)
class ServingCerts:
    ca_pem: bytes  # what goes (base64) into clientConfig.caBundle
    cert_file: Path
    key_file: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "vulcan"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def issue(
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
    *,
    now: datetime.datetime | None = None,
    validity: datetime.timedelta = VALIDITY,
) -> tuple[bytes, bytes, bytes]:
    """(CA certificate, serving certificate, serving key), PEM. ECDSA P-256: small and quick
    to make, and accepted by Go's TLS stack (a real kube-apiserver) and OpenSSL alike.

    The CA's key is not returned: it signs this one certificate and is dropped, so the CA in a
    caBundle vouches for nothing else, and a CA left in a bundle after a renewal is harmless.
    Both certificates expire together (`validity` from `now`)."""
    now = now or datetime.datetime.now(datetime.UTC)
    start = now - datetime.timedelta(minutes=5)  # tolerate a little clock skew
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("vulcan-webhook-ca")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return (
        ca.public_bytes(serialization.Encoding.PEM),
        cert.public_bytes(serialization.Encoding.PEM),
        _pem_key(key),
    )


def write_serving_certs(
    directory: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")
) -> ServingCerts:
    """Issue a CA and serving certificate into `directory` (ca.crt, tls.crt, tls.key)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem, cert_pem, key_pem = issue(hosts)
    (directory / "ca.crt").write_bytes(ca_pem)
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert_pem)
    key_file.touch(mode=0o600)
    key_file.write_bytes(key_pem)
    return ServingCerts(ca_pem, cert_file, key_file)


def load_certificates(pem: bytes) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle; [] when there is none or it does not parse."""
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        return []


def serving_problem(
    cert_pem: bytes,
    key_pem: bytes,
    ca_pem: bytes,
    hosts: tuple[str, ...],
    *,
    now: datetime.datetime | None = None,
    renew_before: datetime.timedelta = datetime.timedelta(0),
) -> str | None:
    """Why this serving certificate, key and CA cannot go on being served for `hosts` (one
    line), or None when they can: the certificate is for every host (DNS or IP SANs; a client
    checks the name it dialled), the key is its key, the CA signed it, and neither certificate
    expires within `renew_before` (nor has yet to start)."""
    now = now or datetime.datetime.now(datetime.UTC)
    certs, cas = load_certificates(cert_pem), load_certificates(ca_pem)
    if not certs:
        return "tls.crt holds no certificate"
    if not cas:
        return "ca.crt holds no certificate"
    cert, ca = certs[0], cas[0]
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return "tls.key holds no private key"
    if key.public_key() != cert.public_key():
        return "tls.key is not the key of tls.crt"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "tls.crt is not signed by ca.crt"
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = set(sans.get_values_for_type(x509.DNSName))
        names.update(str(ip) for ip in sans.get_values_for_type(x509.IPAddress))
    except x509.ExtensionNotFound:
        names = set()
    missing = [host for host in hosts if host not in names]
    if missing:
        return f"tls.crt is not for {', '.join(missing)}"
    for what, certificate in (("tls.crt", cert), ("ca.crt", ca)):
        if certificate.not_valid_before_utc > now:
            return f"{what} is not valid before {certificate.not_valid_before_utc:%Y-%m-%d %H:%M}Z"
        if certificate.not_valid_after_utc - renew_before <= now:
            return f"{what} expires {certificate.not_valid_after_utc:%Y-%m-%d %H:%M}Z"
    return None
