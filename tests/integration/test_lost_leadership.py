"""Losing the Lease during an API server outage ends the extender and the controllers alike with
status 1 and "leaderelection lost" (kube-scheduler's and kube-controller-manager's behaviour),
so the Deployment restarts them and a restart rebuilds their state from the API server; a clean
stop (SIGTERM) still exits 0."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import announced_url, sim_apiserver_process, stop_process, vulcan_process

LEASE_FLAGS = (
    "--leader-elect=true",
    "--leader-elect-resource-namespace",
    "kube-system",
    "--leader-elect-lease-duration",
    "2s",
    "--leader-elect-renew-deadline",
    "1s",
    "--leader-elect-retry-period",
    "200ms",
)
COMMANDS = {
    "extender": ("vulcan extender listening on http://127.0.0.1:", ("--port", "0")),
    "controllers": ("vulcan controllers listening on http://127.0.0.1:", ("--port", "0")),
}


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _start(command: str, kubeconfig: Path, log: Path) -> tuple[subprocess.Popen[str], str]:
    prefix, flags = COMMANDS[command]
    with log.open("w") as handle:
        process = vulcan_process(
            command,
            "--kubeconfig",
            str(kubeconfig),
            "--bind-address",
            "127.0.0.1",
            *flags,
            *LEASE_FLAGS,
            stderr=handle.fileno(),
        )
    base = announced_url(process, prefix).removesuffix("/v1")
    deadline = time.monotonic() + 30
    while not _ready(base):  # ready = leading (and synced)
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{command} did not become leader"
        time.sleep(0.05)
    return process, base


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_losing_the_lease_in_an_outage_exits_1_and_sigterm_exits_0(
    command: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    apiserver, _ = sim_apiserver_process(kubeconfig)
    process = None
    try:
        process, _ = _start(command, kubeconfig, tmp_path / "first.log")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, (tmp_path / "first.log").read_text()

        process, _ = _start(command, kubeconfig, tmp_path / "second.log")
        apiserver.send_signal(signal.SIGSTOP)  # an outage: requests hang, renewals time out
        try:
            code = process.wait(timeout=30)
        finally:
            apiserver.send_signal(signal.SIGCONT)
        log = (tmp_path / "second.log").read_text()
        assert code == 1, log
        assert f"vulcan {command}: leaderelection lost" in log
    finally:
        for child in (process, apiserver):
            if child is not None:
                stop_process(child)
