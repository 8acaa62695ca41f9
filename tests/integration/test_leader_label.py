"""Two extender replicas under leader election with their pods named (as the install runs them):
both are ready once synced, the leader's pod alone carries vulcan.sh/leader=true (which the
Services select), a stale "true" left on a standby's pod is cleared, and when the leader goes
the standby marks itself."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers import announced_url, sim_apiserver_process, stop_process, vulcan_process
from tests.integration.test_lost_leadership import LEASE_FLAGS, _ready

NAMESPACE = "kube-system"
LABEL = "vulcan.sh/leader"


def _api(server: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{server}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _pod(server: str, name: str, leader: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {LABEL: leader}},
        "spec": {"containers": [{"name": "extender", "image": "vulcan:dev"}]},
    }
    _api(server, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body)


def _labels(server: str) -> dict[str, str]:
    pods = _api(server, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    return {p["metadata"]["name"]: p["metadata"].get("labels", {}).get(LABEL) for p in pods}


def _until(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_both_replicas_are_ready_and_the_label_follows_the_lease(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    apiserver, server = sim_apiserver_process(kubeconfig)
    processes = []
    try:
        _pod(server, "ext-a", "false")
        _pod(server, "ext-b", "true")  # stale: b led before its container restarted

        def start(pod: str) -> str:
            log = (tmp_path / f"{pod}.log").open("w")
            process = vulcan_process(
                "extender",
                "--kubeconfig",
                str(kubeconfig),
                "--bind-address",
                "127.0.0.1",
                "--port",
                "0",
                "--pod-name",
                pod,
                "--pod-namespace",
                NAMESPACE,
                *LEASE_FLAGS,
                stderr=log.fileno(),
            )
            processes.append(process)
            return announced_url(process, "vulcan extender listening on http://").removesuffix(
                "/v1"
            )

        a = start("ext-a")
        _until("a leads", lambda: _labels(server) == {"ext-a": "true", "ext-b": "false"})
        _until("a is ready", lambda: _ready(a))
        b = start("ext-b")
        _until("the standby b is ready too", lambda: _ready(b))
        assert _labels(server) == {"ext-a": "true", "ext-b": "false"}

        stop_process(processes[0])  # a steps down and releases the Lease
        _until("b leads", lambda: _labels(server) == {"ext-a": "false", "ext-b": "true"})
        assert _ready(b)
    finally:
        for process in processes:
            stop_process(process)
        stop_process(apiserver)
