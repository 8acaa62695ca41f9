"""`vulcan webhook-certs` (the self-signed bootstrap of the webhooks' certificate) as a process
against the embedded API server: the Secret it writes, the caBundle it sets on every webhook,
a real TLS handshake with the certificate for the Service's name, idempotent re-runs, renewal,
waiting for the configurations, concurrent runs, and the component's RBAC being enough."""

from __future__ import annotations

import asyncio
import base64
import datetime
import shutil
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from core.certs import issue, load_certificates
from core.kube.client import NAMESPACES, SECRETS, ClientOptions, KubeClient, Resource
from core.webhook_tls import CONFIGURATIONS
from extender.webhook_configs import MUTATING_COUNT, VALIDATING_COUNT
from sim.apiserver.server import EmbeddedApiServer, write_kubeconfig
from tests.helpers import REPO
from vulcan.webhook_certs_flags import Options

NAMESPACE = "vulcan-system"
SECRET = "vulcan-webhook-tls"
HOST = "vulcan-webhooks.vulcan-system.svc"
COMPONENT = REPO / "manifests" / "components" / "self-signed-webhooks"
OVERLAY = REPO / "manifests" / "overlays" / "second-scheduler-self-signed-webhooks"
KUBECTL = shutil.which("kubectl")
WEBHOOKS = MUTATING_COUNT + VALIDATING_COUNT  # every caBundle of the two configurations
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def configurations() -> list[dict[str, Any]]:
    """manifests/deploy/webhooks.yaml as components/webhook-serving renders it (no caBundle),
    with each Service clientConfig written as the URL it stands for: the embedded API server
    refuses Service clientConfigs (it has no cluster network). Never called here: the tests
    write no Volcano objects."""
    text = (REPO / "manifests" / "deploy" / "webhooks.yaml").read_text()
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    for doc in docs:
        for hook in doc["webhooks"]:
            config = hook["clientConfig"]
            service = config.pop("service")
            del config["caBundle"]
            config["url"] = (
                f"https://{service['name']}.{service['namespace']}.svc:{service['port']}"
                f"{service['path']}"
            )
    return docs


@dataclass
class Cluster:
    server: EmbeddedApiServer
    client: KubeClient  # the admin
    kubeconfig: Path
    tmp: Path

    async def register(self) -> None:
        for resource, doc in zip(CONFIGURATIONS, configurations(), strict=True):
            await self.client.create(resource, doc)

    async def secret(self) -> dict[str, Any]:
        return await self.client.get(SECRETS, SECRET, NAMESPACE)

    async def files(self) -> dict[str, bytes]:
        data = (await self.secret())["data"]
        return {key: base64.b64decode(value) for key, value in data.items()}

    async def bundles(self) -> list[str]:
        """Every webhook's caBundle, both configurations."""
        return [
            hook["clientConfig"].get("caBundle", "")
            for resource in CONFIGURATIONS
            for hook in (await self.client.get(resource, "vulcan-admission"))["webhooks"]
        ]

    async def versions(self) -> list[str]:
        objects = [await self.secret()] + [
            await self.client.get(resource, "vulcan-admission") for resource in CONFIGURATIONS
        ]
        return [obj["metadata"]["resourceVersion"] for obj in objects]


async def start_certs(kubeconfig: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vulcan",
        "webhook-certs",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def run_certs(kubeconfig: Path, *args: str) -> tuple[int, str]:
    """`vulcan webhook-certs --kubeconfig ... ARGS`: (exit status, its log on stderr). Awaited,
    not run blocking, so that the in-process API server keeps serving it."""
    process = await start_certs(kubeconfig, *args)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, err.decode()


@pytest_asyncio.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with EmbeddedApiServer() as server:
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, server.url)
        client = await KubeClient.connect(ClientOptions(kubeconfig=str(kubeconfig), qps=0))
        await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        try:
            yield Cluster(server, client, kubeconfig, tmp_path)
        finally:
            await client.close()


async def handshake(tmp: Path, cert: bytes, key: bytes, bundle: bytes) -> None:
    """Serve `cert` over TLS and connect as the API server calls a webhook: trusting only
    `bundle` (the caBundle) and checking the name HOST. Raises ssl.SSLError when refused."""
    (tmp / "serve.crt").write_bytes(cert)
    (tmp / "serve.key").write_bytes(key)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(tmp / "serve.crt", tmp / "serve.key")

    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=served)
    async with server:
        port = server.sockets[0].getsockname()[1]
        trusting = ssl.create_default_context(cadata=bundle.decode())
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=trusting, server_hostname=HOST
        )
        assert await reader.read() == b"ok"
        writer.close()


async def test_a_first_run_writes_the_secret_and_every_ca_bundle_and_a_rerun_changes_nothing(
    cluster: Cluster,
) -> None:
    await cluster.register()
    status, log = await run_certs(cluster.kubeconfig)
    assert status == 0, log
    assert "created Secret vulcan-system/vulcan-webhook-tls (it does not exist)" in log
    mutating = MUTATING_COUNT
    assert (
        f"patched MutatingWebhookConfiguration vulcan-admission: caBundle of {mutating} of its "
        f"{mutating}"
    ) in log
    assert (
        f"patched ValidatingWebhookConfiguration vulcan-admission: caBundle of {VALIDATING_COUNT} "
        f"of its {VALIDATING_COUNT}"
    ) in log

    secret = await cluster.secret()
    assert secret["type"] == "kubernetes.io/tls"
    files = await cluster.files()
    assert set(files) == {"tls.crt", "tls.key", "ca.crt"}
    assert await cluster.bundles() == [base64.b64encode(files["ca.crt"]).decode()] * WEBHOOKS
    await handshake(cluster.tmp, files["tls.crt"], files["tls.key"], files["ca.crt"])

    versions = await cluster.versions()
    status, log = await run_certs(cluster.kubeconfig)
    assert status == 0, log
    assert "kept Secret vulcan-system/vulcan-webhook-tls" in log
    assert "kept MutatingWebhookConfiguration vulcan-admission" in log
    assert "kept ValidatingWebhookConfiguration vulcan-admission" in log
    assert await cluster.versions() == versions  # nothing written
    assert await cluster.files() == files


async def test_an_expiring_certificate_is_renewed_and_its_ca_stays_trusted_until_it_expires(
    cluster: Cluster,
) -> None:
    old_ca, old_cert, old_key = issue(Options().hosts, validity=datetime.timedelta(days=10))
    old = {"tls.crt": old_cert, "tls.key": old_key, "ca.crt": old_ca}
    await cluster.client.create(
        SECRETS,
        {
            "metadata": {"name": SECRET, "namespace": NAMESPACE, "labels": {"keep": "me"}},
            "type": "kubernetes.io/tls",
            "data": {key: base64.b64encode(value).decode() for key, value in old.items()},
        },
    )
    await cluster.register()

    status, log = await run_certs(cluster.kubeconfig)  # renew-before: 30 days
    assert status == 0, log
    assert "renewed Secret vulcan-system/vulcan-webhook-tls (tls.crt expires" in log
    assert "rollout restart deployment/vulcan-extender" in log
    files = await cluster.files()
    assert files["tls.crt"] != old_cert and files["ca.crt"] != old_ca
    assert (await cluster.secret())["metadata"]["labels"] == {"keep": "me"}
    (new,) = load_certificates(files["tls.crt"])
    assert (new.not_valid_after_utc - new.not_valid_before_utc).days >= 3650

    # The new CA first, then the old one: the extender still serving the old certificate (it
    # has not restarted yet) is trusted, and so is the new certificate.
    (bundle,) = set(await cluster.bundles())
    assert base64.b64decode(bundle) == files["ca.crt"] + old_ca
    await handshake(cluster.tmp, files["tls.crt"], files["tls.key"], base64.b64decode(bundle))
    await handshake(cluster.tmp, old_cert, old_key, base64.b64decode(bundle))
    with pytest.raises(ssl.SSLCertVerificationError):
        await handshake(cluster.tmp, old_cert, old_key, files["ca.crt"])

    # Renewed, it is kept; the old CA, unexpired, stays in the bundle.
    versions = await cluster.versions()
    status, log = await run_certs(cluster.kubeconfig)
    assert status == 0 and "kept Secret" in log, log
    assert await cluster.versions() == versions


async def test_a_certificate_for_other_names_is_replaced(cluster: Cluster) -> None:
    await cluster.register()
    status, log = await run_certs(cluster.kubeconfig, "--service", "elsewhere")
    assert status == 0, log
    status, log = await run_certs(cluster.kubeconfig)
    assert status == 0, log
    assert "(tls.crt is not for vulcan-webhooks.vulcan-system.svc," in log
    files = await cluster.files()
    await handshake(cluster.tmp, files["tls.crt"], files["tls.key"], files["ca.crt"])


async def test_a_missing_configuration_is_a_one_line_error_after_the_wait(
    cluster: Cluster,
) -> None:
    started = asyncio.get_running_loop().time()
    status, log = await run_certs(cluster.kubeconfig, "--wait", "1s")
    assert status == 1
    assert log.splitlines()[-1] == (
        "vulcan webhook-certs: error: MutatingWebhookConfiguration vulcan-admission not found "
        "after waiting 1s: apply the install's webhook configurations first"
    )
    assert "Traceback" not in log
    assert asyncio.get_running_loop().time() - started < 30


async def test_it_waits_for_configurations_applied_after_it_started(cluster: Cluster) -> None:
    process = await start_certs(cluster.kubeconfig, "--wait", "60s")
    assert process.stderr is not None
    lines: list[str] = []
    async with asyncio.timeout(30):
        while "waiting up to 60s for MutatingWebhookConfiguration" not in "".join(lines):
            line = (await process.stderr.readline()).decode()
            assert line, "".join(lines)
            lines.append(line)
    await cluster.register()
    rest = await asyncio.wait_for(process.stderr.read(), 30)
    assert await process.wait() == 0, "".join(lines) + rest.decode()
    ca = (await cluster.files())["ca.crt"]
    assert await cluster.bundles() == [base64.b64encode(ca).decode()] * WEBHOOKS


async def test_concurrent_runs_agree_on_one_certificate(cluster: Cluster) -> None:
    await cluster.register()
    results = await asyncio.gather(*(run_certs(cluster.kubeconfig) for _ in range(3)))
    assert [status for status, _ in results] == [0, 0, 0], results
    files = await cluster.files()
    assert await cluster.bundles() == [base64.b64encode(files["ca.crt"]).decode()] * WEBHOOKS
    await handshake(cluster.tmp, files["tls.crt"], files["tls.key"], files["ca.crt"])


def rbac_resource(kind: str) -> Resource:
    if kind == "ServiceAccount":
        return Resource("", "v1", "serviceaccounts", True, kind)
    namespaced = kind in ("Role", "RoleBinding")
    return Resource("rbac.authorization.k8s.io", "v1", kind.lower() + "s", namespaced, kind)


async def test_the_components_rbac_is_all_it_needs(tmp_path: Path) -> None:
    account = "system:serviceaccount:vulcan-system:vulcan-webhook-certs"
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(
        f'admin-token,admin,1,"system:masters"\ncerts-token,{account},2,"system:serviceaccounts"\n'
    )
    async with EmbeddedApiServer(token_auth_file=tokens) as server:
        admin_config, certs_config = tmp_path / "admin", tmp_path / "certs"
        write_kubeconfig(admin_config, server.url, "admin-token")
        write_kubeconfig(certs_config, server.url, "certs-token")
        admin = await KubeClient.connect(ClientOptions(kubeconfig=str(admin_config), qps=0))
        try:
            await admin.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            for doc in yaml.safe_load_all((COMPONENT / "rbac.yaml").read_text()):
                await admin.create(rbac_resource(doc["kind"]), doc)
            cluster = Cluster(server, admin, certs_config, tmp_path)
            await cluster.register()

            status, log = await run_certs(certs_config)
            assert status == 0, log
            status, log = await run_certs(certs_config)  # the keep path: get only
            assert status == 0 and "kept Secret" in log, log
            files = await cluster.files()
            assert (
                await cluster.bundles() == [base64.b64encode(files["ca.crt"]).decode()] * WEBHOOKS
            )

            # Limited to its names: another Secret is refused, with the server's reason.
            status, log = await run_certs(certs_config, "--secret", "other")
            assert status == 1
            assert log.splitlines()[-1].startswith("vulcan webhook-certs: error: 403 Forbidden:")
            assert 'cannot get resource "secrets"' in log
        finally:
            await admin.close()


async def test_the_secret_of_another_type_is_left_alone(cluster: Cluster) -> None:
    await cluster.client.create(
        SECRETS,
        {"metadata": {"name": SECRET, "namespace": NAMESPACE}, "type": "Opaque", "data": {}},
    )
    status, log = await run_certs(cluster.kubeconfig, "--wait", "1s")
    assert status == 1
    assert log.splitlines()[-1] == (
        "vulcan webhook-certs: error: Secret vulcan-system/vulcan-webhook-tls has type 'Opaque', "
        "not kubernetes.io/tls"
    )
    secret = await cluster.secret()
    assert secret["type"] == "Opaque" and not secret.get("data")


async def kubectl(kubeconfig: Path, *args: str, stdin: str = "") -> str:
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


@needs_kubectl
async def test_re_applying_the_configurations_keeps_the_ca_the_command_set(
    cluster: Cluster,
) -> None:
    """What the component's header promises: the manifests carry no caBundle, so kubectl
    apply's three-way merge leaves the one the command set in place."""
    manifest = yaml.safe_dump_all(configurations())
    await kubectl(cluster.kubeconfig, "apply", "-f", "-", stdin=manifest)
    status, log = await run_certs(cluster.kubeconfig)
    assert status == 0, log
    bundles = await cluster.bundles()
    assert all(bundles)
    out = await kubectl(cluster.kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert out.count("unchanged") == 2, out
    assert await cluster.bundles() == bundles


@needs_kubectl
def test_the_overlay_runs_the_job_as_the_extender_serves_its_secret() -> None:
    """The rendered install: configurations without a CA or cert-manager's annotation, the Job
    on the extender's image with flags `vulcan webhook-certs` accepts, naming the Secret the
    extender mounts, under its own ServiceAccount."""
    from vulcan.cli import build_parser

    assert KUBECTL is not None
    rendered = subprocess.run(
        [KUBECTL, "kustomize", str(OVERLAY)], capture_output=True, text=True, check=True
    ).stdout
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered) if d}
    for resource in CONFIGURATIONS:
        config = docs[(resource.kind, "vulcan-admission")]
        assert "annotations" not in config["metadata"]
        assert all("caBundle" not in hook["clientConfig"] for hook in config["webhooks"])
    assert ("Certificate", "vulcan-webhook") not in docs

    job = docs[("Job", "vulcan-webhook-certs")]["spec"]["template"]["spec"]
    extender = docs[("Deployment", "vulcan-extender")]["spec"]["template"]["spec"]
    (job_container,) = job["containers"]
    (extender_container,) = extender["containers"]
    assert job_container["image"] == extender_container["image"]
    assert job["serviceAccountName"] == "vulcan-webhook-certs"
    assert ("ServiceAccount", "vulcan-webhook-certs") in docs
    assert job_container["securityContext"]["readOnlyRootFilesystem"] is True
    assert job["securityContext"]["runAsNonRoot"] is True

    args = build_parser().parse_args(job_container["args"])
    assert args.command == "webhook-certs"
    mounted = {v["secret"]["secretName"] for v in extender["volumes"] if "secret" in v}
    assert mounted == {args.secret}
    assert "--tls-cert-file=/etc/vulcan/tls/tls.crt" in extender_container["args"]
    service = docs[("Service", "vulcan-webhooks")]
    assert (args.service, args.namespace) == (
        service["metadata"]["name"],
        service["metadata"]["namespace"],
    )
