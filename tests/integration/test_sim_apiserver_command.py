"""`vulcan sim apiserver` as a process: serves, writes a usable kubeconfig, stops on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml

from tests.helpers import REPO


def test_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vulcan",
            "sim",
            "apiserver",
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("embedded API server listening on http://127.0.0.1:"), line
        url = line.split()[-1]
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == url
        assert config["current-context"] == "vulcan"
        with urllib.request.urlopen(f"{url}/apis/scheduling.volcano.sh/v1beta1", timeout=10) as r:
            names = [res["name"] for res in json.load(r)["resources"]]
        assert "queues" in names and "podgroups" in names
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=15)
    assert code == 0
