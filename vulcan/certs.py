"""A private CA and a serving certificate for vulcan's admission webhooks on this machine.

kube-apiserver calls webhooks over HTTPS only and verifies them against the configuration's
`caBundle`; `vulcan sim up --with-extender` therefore makes a CA, signs a certificate for
`localhost`/`127.0.0.1` with it, serves the webhooks with that certificate and puts the CA in
the webhook configurations. (On a real cluster, cert-manager or an init Job does this.)
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
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
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"), *, now: datetime.datetime | None = None
) -> tuple[bytes, bytes, bytes]:
    """(CA certificate, serving certificate, serving key), PEM. ECDSA P-256: small and quick
    to make, and accepted by Go's TLS stack (a real kube-apiserver) and OpenSSL alike."""
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
        .not_valid_after(now + VALIDITY)
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
        .not_valid_after(now + VALIDITY)
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
