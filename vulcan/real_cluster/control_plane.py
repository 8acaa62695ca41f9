"""A real Kubernetes control plane on loopback: etcd, kube-apiserver (HTTPS, RBAC, token
authentication), kube-controller-manager. kube-scheduler is started by the install
(`vulcan.real_cluster.install`), which knows its configuration.

Each part is a child process with its log in `<root>/logs/`; `stop()` ends every one of them by
pid and removes etcd's data. The admin's kubeconfig (`<root>/admin.kubeconfig`) carries the
token of a `system:masters` user and skips TLS verification (kube-apiserver signs its own
serving certificate, for loopback only).
"""

from __future__ import annotations

import json
import secrets
import shutil
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from vulcan.real_cluster.assets import KubeAssets
from vulcan.real_cluster.processes import Child, StartError, free_port, wait_until

SERVICE_CIDR = "10.0.0.0/24"
# Audit what vulcan's ServiceAccounts do (and nothing else): whether the install's RBAC
# refused any of their calls is then in <root>/audit.log.
AUDITED_GROUP = "system:serviceaccounts:vulcan-system"
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "userGroups": [AUDITED_GROUP]}, {"level": "None"}],
}
ISSUER = "https://kubernetes.default.svc.cluster.local"


def write_kubeconfig(path: Path, server: str, token: str, user: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "real", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": user}}],
        "current-context": "real",
    }
    path.touch(mode=0o600)  # a token: never readable by others, not even for a moment
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def _service_account_key(path: Path) -> None:
    """The RSA key that signs (and verifies) ServiceAccount tokens, as `openssl genrsa` makes."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.touch(mode=0o600)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


class ControlPlane:
    def __init__(
        self,
        assets: KubeAssets,
        root: Path,
        *,
        controller_manager: bool = True,
        apiserver_flags: tuple[str, ...] = (),
        controller_manager_flags: tuple[str, ...] = (),
        cancel: threading.Event | None = None,
    ) -> None:
        self.assets = assets
        self.apiserver_flags = apiserver_flags
        self.controller_manager_flags = controller_manager_flags
        self.cancel = cancel  # set: start-up stops waiting (Cancelled) at its next poll
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.with_controller_manager = controller_manager
        self.etcd_dir: Path | None = None
        self.etcd_url = ""
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.admin_token = secrets.token_hex(16)
        self.admin_kubeconfig = root / "admin.kubeconfig"
        self.sa_key = root / "service-account.key"
        self.audit_log = root / "audit.log"
        self.children: list[Child] = []
        # (stopped, ready again) wall-clock times of each restart: a starting kube-apiserver
        # serves requests before its authorizer has synced and refuses them meanwhile.
        self.restarts: list[tuple[float, float]] = []
        self.etcd: Child | None = None
        self.apiserver: Child | None = None
        self.controller_manager: Child | None = None
        self._ssl = ssl.create_default_context()
        self._ssl.check_hostname = False
        self._ssl.verify_mode = ssl.CERT_NONE

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 120.0) -> None:
        self.start_etcd(timeout)
        self.start_apiserver(timeout)
        if self.with_controller_manager:
            self.start_controller_manager(timeout)

    def start_etcd(self, timeout: float) -> None:
        # etcd's data in memory when the machine has a tmpfs: its fsyncs cost a busy disk
        # seconds, and the data dies with the cluster anyway.
        shm = Path("/dev/shm")
        self.etcd_dir = Path(
            tempfile.mkdtemp(prefix="vulcan-real-etcd-", dir=shm if shm.is_dir() else self.root)
        )
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self.etcd = self._child(
            "etcd",
            [
                str(self.assets.etcd),
                "--name=real",
                f"--data-dir={self.etcd_dir}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=real=http://127.0.0.1:{peer}",
                "--log-level=warn",
            ],
        )
        self.etcd.start()
        self._wait_serving(self.etcd, f"{self.etcd_url}/health", timeout)

    def start_apiserver(self, timeout: float) -> None:
        _service_account_key(self.sa_key)
        tokens = self.root / "tokens.csv"
        tokens.touch(mode=0o600)
        tokens.write_text(f'{self.admin_token},admin,admin,"system:masters"\n')
        write_kubeconfig(self.admin_kubeconfig, self.server, self.admin_token, "admin")
        audit_policy = self.root / "audit-policy.yaml"
        audit_policy.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
        self.apiserver = self._child(
            "kube-apiserver",
            [
                str(self.assets.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={self.root / 'apiserver-certs'}",
                f"--service-account-issuer={ISSUER}",
                f"--service-account-key-file={self.sa_key}",
                f"--service-account-signing-key-file={self.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=RBAC",
                f"--token-auth-file={tokens}",
                "--profiling=false",
                f"--audit-policy-file={audit_policy}",
                f"--audit-log-path={self.audit_log}",
                # No Endpoints for the `kubernetes` Service: loopback addresses are refused there
                # (an error logged every 10 s), and nothing here reaches the API server that way.
                "--endpoint-reconciler-type=none",
                *self.apiserver_flags,
            ],
        )
        self.apiserver.start()
        self.wait_ready(timeout)

    def start_controller_manager(self, timeout: float) -> None:
        self.controller_manager = self._child(
            "kube-controller-manager",
            [
                str(self.assets.kube_controller_manager),
                f"--kubeconfig={self.admin_kubeconfig}",
                "--secure-port=0",
                "--leader-elect=false",
                "--controllers=*",
                f"--service-account-private-key-file={self.sa_key}",
                "--use-service-account-credentials=false",
                f"--root-ca-file={self.root / 'apiserver-certs' / 'apiserver.crt'}",
                *self.controller_manager_flags,
            ],
        )
        self.controller_manager.start()
        # Its ServiceAccount controller makes every namespace's `default` account, without
        # which the ServiceAccount admission plugin refuses pods.
        child = self.controller_manager
        self.wait(
            "kube-controller-manager to make the default ServiceAccount",
            lambda: (
                self._alive(child)
                and self.get("/api/v1/namespaces/default/serviceaccounts/default")
            ),
            timeout,
        )

    def _child(self, name: str, argv: list[str]) -> Child:
        child = Child(name, argv, self.logs)
        self.children.append(child)
        return child

    def wait(self, what: str, probe: Any, timeout: float) -> Any:
        return wait_until(what, probe, timeout, cancel=self.cancel)

    @staticmethod
    def _alive(child: Child) -> bool:
        if not child.running:
            raise StartError(f"{child.name} exited: {child.failure()}")
        return True

    def _wait_serving(self, child: Child, url: str, timeout: float) -> None:
        self.wait(f"{child.name} to serve {url}", lambda: self._alive(child) and _ok(url), timeout)

    def wait_ready(self, timeout: float) -> None:
        """/readyz, then both OpenAPI documents (kubectl's validation downloads them; /readyz
        answers before they are served)."""
        deadline = time.monotonic() + timeout
        apiserver = self.apiserver
        assert apiserver is not None
        for path in ("/readyz", "/openapi/v2", "/openapi/v3"):
            self.wait(
                f"kube-apiserver's {path} to answer 200",
                lambda path=path: self._alive(apiserver) and self.status(path) == 200,
                max(deadline - time.monotonic(), 0.0),
            )

    def restart_apiserver(self, down_for: float = 2.0, timeout: float = 120.0) -> float:
        """Stop kube-apiserver (SIGTERM), wait `down_for`, start it again with the same flags
        and wait until it serves; returns the seconds it was unavailable."""
        assert self.apiserver is not None
        began, stopped = time.monotonic(), time.time()
        self.apiserver.stop()
        time.sleep(down_for)
        self.apiserver.start()
        self.wait_ready(timeout)
        self.restarts.append((stopped, time.time()))
        return time.monotonic() - began

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log's events (vulcan's ServiceAccounts' requests, see AUDIT_POLICY)."""
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line]

    def failed(self) -> str | None:
        """Why the control plane is down (a part exited, with its log's tail), or None."""
        for child in self.children:
            if child.process is not None and not child.running:
                return f"{child.name} exited with code {child.process.returncode}: " + (
                    child.failure()
                )
        return None

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()
        if self.etcd_dir is not None:
            shutil.rmtree(self.etcd_dir, ignore_errors=True)

    # ------------------------------------------------------------------ requests

    def status(self, path: str) -> int:
        try:
            with self._open(path) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except (urllib.error.URLError, OSError):
            return 0

    def request(self, path: str, body: Any = None, method: str | None = None) -> Any:
        with self._open(path, body, method) as response:
            return json.loads(response.read())

    def get(self, path: str) -> Any:
        """The object at `path`, or None when it does not exist."""
        try:
            return self.request(path)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def open_get(self, path: str) -> Any:
        """The answer of a GET as admin, unread (e.g. `/metrics`, which is not JSON)."""
        return self._open(path)

    def _open(self, path: str, body: Any = None, method: str | None = None) -> Any:
        headers = {"Authorization": f"Bearer {self.admin_token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = (
                "application/merge-patch+json" if method == "PATCH" else "application/json"
            )
        request = urllib.request.Request(self.server + path, data, headers, method=method)
        return urllib.request.urlopen(request, timeout=10, context=self._ssl)


def _ok(url: str) -> bool:
    """Whether a plain-HTTP GET of `url` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
