"""`vulcan sim kubelets` as a process against an API server it did not start (here the
embedded one; tests/real runs it against a real kube-apiserver): nodes of several profiles
register with their labels and capacity, run the pods bound to them, and on SIGTERM stay
registered (as a stopped kubelet's Node does), or with --delete-nodes are deleted on SIGINT."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import sim_apiserver_process, vulcan_process

READY = "hollow nodes ready:"


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    kubeconfig = tmp_path / "kubeconfig"
    process, url = sim_apiserver_process(kubeconfig)
    try:
        yield url, kubeconfig
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)


def get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def post(url: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    urllib.request.urlopen(request, timeout=10).close()


def kubelets(kubeconfig: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    process = vulcan_process("sim", "kubelets", "--kubeconfig", str(kubeconfig), *args)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith(READY):
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"vulcan sim kubelets did not come up: {line!r} {err}")
    return process, line.strip()


def stop(process: subprocess.Popen[str], sig: signal.Signals) -> str:
    process.send_signal(sig)
    out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    return out


def wait_for(what: str, probe: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := probe():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_nodes_of_two_profiles_run_pods_and_stay_registered_after_sigterm(
    apiserver: tuple[str, Path],
) -> None:
    url, kubeconfig = apiserver
    process, line = kubelets(
        kubeconfig,
        "--node-profile",
        "count=2,cpu=4,memory=8Gi,label.topology.kubernetes.io/zone=a",
        "--node-profile",
        "count=1,cpu=8,nvidia.com/gpu=2",
        "--pod-duration",
        "0.2s",
    )
    try:
        assert line == f"{READY} 3 (hollow-node-0 .. hollow-node-2)"
        nodes = {n["metadata"]["name"]: n for n in get(f"{url}/api/v1/nodes")["items"]}
        assert sorted(nodes) == ["hollow-node-0", "hollow-node-1", "hollow-node-2"]
        labels = nodes["hollow-node-1"]["metadata"]["labels"]
        assert labels["topology.kubernetes.io/zone"] == "a"
        assert nodes["hollow-node-0"]["status"]["capacity"]["cpu"] == "4"
        assert nodes["hollow-node-2"]["status"]["allocatable"]["nvidia.com/gpu"] == "2"
        assert "topology.kubernetes.io/zone" not in nodes["hollow-node-2"]["metadata"]["labels"]
        # A pod bound to a hollow node runs for the default duration and succeeds.
        post(
            f"{url}/api/v1/namespaces/default/pods",
            {
                "metadata": {"name": "hello"},
                "spec": {
                    "nodeName": "hollow-node-2",
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                },
            },
        )
        pod_url = f"{url}/api/v1/namespaces/default/pods/hello"
        wait_for("the pod to succeed", lambda: get(pod_url)["status"].get("phase") == "Succeeded")
    finally:
        out = stop(process, signal.SIGTERM)
    assert "stopped; 3 nodes left registered" in out
    # The Nodes stay, as a stopped kubelet's do (the node lifecycle controller marks them).
    assert len(get(f"{url}/api/v1/nodes")["items"]) == 3


def test_restarted_kubelets_adopt_their_nodes_and_delete_nodes_removes_them(
    apiserver: tuple[str, Path],
) -> None:
    url, kubeconfig = apiserver
    first, _ = kubelets(kubeconfig, "--nodes", "2", "--node-profile", "cpu=2")
    uids = {n["metadata"]["uid"] for n in get(f"{url}/api/v1/nodes")["items"]}
    stop(first, signal.SIGTERM)
    again, line = kubelets(kubeconfig, "--nodes", "2", "--node-profile", "cpu=2", "--delete-nodes")
    assert line == f"{READY} 2 (hollow-node-0 .. hollow-node-1)"
    # The same Nodes, adopted rather than made anew.
    assert {n["metadata"]["uid"] for n in get(f"{url}/api/v1/nodes")["items"]} == uids
    out = stop(again, signal.SIGINT)
    assert "stopped; deleted 2 nodes" in out
    assert get(f"{url}/api/v1/nodes")["items"] == []


def test_a_bad_profile_is_refused_naming_the_item(apiserver: tuple[str, Path]) -> None:
    _, kubeconfig = apiserver
    process = vulcan_process(
        "sim", "kubelets", "--kubeconfig", str(kubeconfig), "--node-profile", "count=2,cpu=lots"
    )
    out, err = process.communicate(timeout=30)
    assert process.returncode == 1
    assert out == ""
    assert err.startswith("error: node profile item 'cpu=lots'"), err
