"""End-to-end: `vulcan sim up` as a user starts it, kubectl as a user types it.

Each cluster is a real `vulcan sim up` process tree (API server, hollow kubelets, node lifecycle,
kube-scheduler stand-in, and vulcan's extender where asked), shared by the tests of a module.
Waiting is done by polling the API for the awaited state with a deadline (never a bare sleep).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from extender import gang_options as gangs
from tests.helpers import REPO

KUBECTL = shutil.which("kubectl")
T = TypeVar("T")


class SimCluster:
    def __init__(self, process: subprocess.Popen[str], lines: list[str], state: Path) -> None:
        self.process = process
        self.lines = lines
        self.state = state
        self.kubeconfig = state / "kubeconfig"
        config = yaml.safe_load(self.kubeconfig.read_text())
        self.api = config["clusters"][0]["cluster"]["server"].rstrip("/")
        # With `--rbac` the admin kubeconfig carries a token (kubectl sends it only over HTTPS;
        # the tests' own requests send it).
        self.token: str | None = (config["users"][0].get("user") or {}).get("token")
        # ... and then the server speaks HTTPS, its CA in the kubeconfig.
        ca = config["clusters"][0]["cluster"].get("certificate-authority-data")
        self.ssl = ssl.create_default_context(cadata=base64.b64decode(ca).decode()) if ca else None
        self.extender: str | None = None
        for line in lines:
            if line.startswith("vulcan extender:"):
                self.extender = line.split()[2].removesuffix("/v1")

    # ------------------------------------------------------------------ kubectl

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        if KUBECTL is None:
            pytest.skip("kubectl is not installed (make test installs Debian's kubernetes-client)")
        result = subprocess.run(
            [
                KUBECTL,
                "--kubeconfig",
                str(self.kubeconfig),
                "--cache-dir",
                str(self.state / "kubectl-cache"),
                "--request-timeout=20s",
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result.stdout

    def apply(self, manifest: dict[str, Any] | list[dict[str, Any]]) -> None:
        docs = manifest if isinstance(manifest, list) else [manifest]
        self.kubectl(
            "create", "--validate=false", "-f", "-", stdin=yaml.safe_dump_all(docs, sort_keys=False)
        )

    # ------------------------------------------------------------------ direct reads

    def request(self, path: str, body: Any = None, method: str | None = None) -> Any:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.api + path, data, headers, method=method)
        with urllib.request.urlopen(request, timeout=10, context=self.ssl) as response:
            return json.loads(response.read())

    def get(self, path: str) -> Any:
        try:
            return self.request(path)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def pods(self, namespace: str = "default", selector: str = "") -> list[dict[str, Any]]:
        query = f"?labelSelector={selector}" if selector else ""
        return self.get(f"/api/v1/namespaces/{namespace}/pods{query}")["items"]

    def node(self, name: str) -> dict[str, Any]:
        return self.get(f"/api/v1/nodes/{name}")

    def events(self, name: str, namespace: str = "default") -> list[dict[str, Any]]:
        items = self.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        return [e for e in items if e.get("regarding", {}).get("name") == name]

    def metrics(self) -> str:
        assert self.extender is not None
        with urllib.request.urlopen(self.extender + "/metrics", timeout=10) as response:
            return response.read().decode()

    def component_pid(self, subcommand: str) -> int:
        """The pid of this cluster's `vulcan <subcommand>` child (found by its kubeconfig)."""
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            words = [a.decode(errors="replace") for a in argv]
            if subcommand in words and str(self.kubeconfig) in words and "vulcan" in words:
                return int(entry.name)
        raise AssertionError(f"no vulcan {subcommand} process of this cluster")


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of a Prometheus metric's samples that carry `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        match = re.match(rf"{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            total += float(match.group(2))
    return total


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def phase(pod: dict[str, Any] | None) -> str | None:
    return None if pod is None else pod.get("status", {}).get("phase")


def scheduled_condition(pod: dict[str, Any] | None) -> dict[str, Any]:
    for condition in (pod or {}).get("status", {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return condition
    return {}


def start_cluster(tmp: Path, *args: str) -> Iterator[SimCluster]:
    if "--with-extender" in args and gangs.DEFAULT_MEMO != "on":
        args = (*args, "--scheduler-memo", gangs.DEFAULT_MEMO)  # the suite's --scheduler-memo
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vulcan",
            "sim",
            "up",
            "--state-dir",
            str(tmp),
            "--kubeconfig-out",
            str(tmp / "kubeconfig"),
            *args,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line.rstrip())
        if line.startswith("cluster ready"):
            break
    else:
        process.wait(10)
        raise AssertionError(f"vulcan sim up failed: {lines} {process.stderr.read()}")  # type: ignore[union-attr]
    cluster = SimCluster(process, lines, tmp)
    try:
        yield cluster
    finally:
        process.send_signal(signal.SIGINT)
        try:
            out, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        # Stopping cleanly is part of the contract: exit 0 and say so.
        assert process.returncode == 0, out
        assert "stopped" in out


def pod_manifest(
    name: str,
    *,
    cpu: str = "500m",
    duration: str | None = "0.3s",
    exit_code: int | None = None,
    restart: str = "Never",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    notes = dict(annotations or {})
    if duration is not None:
        notes["vulcan.sh/sim-duration"] = duration
    if exit_code is not None:
        notes["vulcan.sh/sim-exit-code"] = str(exit_code)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": notes},
        "spec": {
            "restartPolicy": restart,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
                }
            ],
            **spec,
        },
    }
