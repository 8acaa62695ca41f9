"""`vulcan sim apiserver` as a process: serves, writes a usable kubeconfig, stops on SIGTERM."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path

import yaml

from tests.helpers import sim_apiserver_process


def test_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process, url = sim_apiserver_process(kubeconfig)
    try:
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
