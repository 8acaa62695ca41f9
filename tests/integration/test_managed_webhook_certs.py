"""`vulcan extender --manage-webhook-certs` against the embedded API server, which calls the
webhooks over HTTPS and checks them against the configurations' caBundle: the extender makes the
certificate and the Secret, puts its CA into the caBundle, the API server trusts what it serves
(a bad Queue is refused by the webhook), and a certificate due for renewal is replaced and
served without a restart while the API server goes on trusting it."""

from __future__ import annotations

import base64
import datetime
import json
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from core.certs import issue, load_certificates
from extender.webhook_configs import MUTATING_COUNT, VALIDATING_COUNT, webhook_configurations
from tests.helpers import announced_url, sim_apiserver_process, stop_process, vulcan_process

T = TypeVar("T")
NAMESPACE = "vulcan-system"
SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/vulcan-webhook-tls"
HOSTS = (
    "vulcan-webhooks.vulcan-system.svc",
    "vulcan-webhooks.vulcan-system.svc.cluster.local",
    "vulcan-webhooks",
    "vulcan-webhooks.vulcan-system",
    "127.0.0.1",
)
WEBHOOK_LINE = "vulcan admission webhooks listening on "
CONFIGURATIONS = (
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/vulcan-admission",
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/vulcan-admission",
)


@dataclass
class Cluster:
    api: str
    port: int  # the webhooks' port, in the configurations' URLs

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.api + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def secret_files(self) -> dict[str, bytes] | None:
        status, secret = self.call("GET", SECRET_PATH)
        if status != 200:
            return None
        return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}

    def bundles(self) -> list[bytes]:
        return [
            base64.b64decode(hook["clientConfig"].get("caBundle") or "")
            for path in CONFIGURATIONS
            for hook in self.call("GET", path)[1]["webhooks"]
        ]

    def served(self) -> bytes:
        """The certificate the webhooks present now (a fresh handshake)."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with (
            socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname=HOSTS[0]) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return ssl.DER_cert_to_PEM_cert(der).encode()

    def bad_queue_refused(self) -> str:
        """A Queue deserving less than its guarantee is refused by the webhook: the API server
        reached it over TLS."""
        spec = {"guarantee": {"resource": {"cpu": "2"}}, "deserved": {"cpu": "1"}}
        body = {"metadata": {"name": "lopsided"}, "spec": spec}
        status, answer = self.call("POST", "/apis/scheduling.volcano.sh/v1beta1/queues", body)
        assert status == 403, answer
        return answer["message"]


def eventually(what: str, probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def same_cert(a: bytes, b: bytes) -> bool:
    return load_certificates(a)[0] == load_certificates(b)[0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    tmp = tmp_path_factory.mktemp("managed-certs")
    kubeconfig = tmp / "kubeconfig"
    apiserver, api = sim_apiserver_process(kubeconfig)
    extender: subprocess.Popen[str] | None = None
    try:
        cluster = Cluster(api, free_port())
        assert (
            cluster.call("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})[0] == 201
        )
        # Registered before the extender runs, trusting nothing yet (as the install applies
        # them): the extender puts its CA in.
        url = f"https://127.0.0.1:{cluster.port}"
        for config in webhook_configurations(url=url, ca_bundle=""):
            plural = config["kind"].lower() + "s"
            path = f"/apis/admissionregistration.k8s.io/v1/{plural}"
            for hook in config["webhooks"]:
                hook["clientConfig"].pop("caBundle", None)
            assert cluster.call("POST", path, config)[0] == 201
        log = tmp / "extender.log"
        with log.open("w") as handle:
            extender = vulcan_process(
                "extender",
                "--kubeconfig",
                str(kubeconfig),
                "--port",
                "0",
                "--bind-address",
                "127.0.0.1",
                "--webhook-port",
                str(cluster.port),
                "--manage-webhook-certs",
                "--webhook-namespace",
                NAMESPACE,
                "--webhook-extra-hosts",
                "127.0.0.1",
                "--webhook-cert-check-interval",
                "0.5s",
                stderr=handle.fileno(),
            )
        announced_url(extender, "vulcan extender listening on http://127.0.0.1:")
        assert extender.stdout is not None
        line = extender.stdout.readline()
        assert line.startswith(WEBHOOK_LINE), (line, log.read_text()[-2000:])
        yield cluster, log
    finally:
        if extender is not None:
            stop_process(extender, timeout=10)
        stop_process(apiserver, timeout=10)


def test_the_extender_makes_and_serves_a_certificate_the_api_server_trusts(
    cluster: tuple[Cluster, Path],
) -> None:
    api, log = cluster
    files = api.secret_files()
    assert files is not None and set(files) == {"tls.crt", "tls.key", "ca.crt"}
    cert = load_certificates(files["tls.crt"])[0]
    ca = load_certificates(files["ca.crt"])[0]
    cert.verify_directly_issued_by(ca)
    assert cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > datetime.timedelta(
        days=300
    )  # --webhook-cert-valid-days: a year by default
    assert same_cert(api.served(), files["tls.crt"])
    bundles = eventually(
        "the caBundles to trust the CA",
        lambda: (b := api.bundles()) and all(ca in load_certificates(x) for x in b) and b,
    )
    assert len(bundles) == MUTATING_COUNT + VALIDATING_COUNT  # every webhook of both
    assert "denied the request" in api.bad_queue_refused()
    assert "serving the webhook certificate of Secret vulcan-system/vulcan-webhook-tls" in (
        log.read_text()
    )


def test_a_certificate_due_for_renewal_is_renewed_and_served_without_a_restart(
    cluster: tuple[Cluster, Path],
) -> None:
    api, _ = cluster
    # What another run left: a certificate for the right names that expires in ten days, within
    # the 30 days before expiry when it is renewed.
    ca, cert, key = issue(HOSTS, validity=datetime.timedelta(days=10))
    status, secret = api.call("GET", SECRET_PATH)
    assert status == 200
    secret["data"] = {
        "tls.crt": base64.b64encode(cert).decode(),
        "tls.key": base64.b64encode(key).decode(),
        "ca.crt": base64.b64encode(ca).decode(),
    }
    assert api.call("PUT", SECRET_PATH, secret)[0] == 200
    renewed = eventually(
        "the extender to renew the certificate",
        lambda: (f := api.secret_files()) and not same_cert(f["tls.crt"], cert) and f,
    )
    eventually("the renewal to be served", lambda: same_cert(api.served(), renewed["tls.crt"]))
    new_ca = load_certificates(renewed["ca.crt"])[0]
    eventually(
        "the caBundles to trust the new CA",
        lambda: all(new_ca in load_certificates(b) for b in api.bundles()),
    )
    assert "denied the request" in api.bad_queue_refused()
