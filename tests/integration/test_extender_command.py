"""`vulcan extender` as a process against `vulcan sim apiserver`: it syncs, serves the verbs and
/readyz, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from pathlib import Path

from tests.helpers import announced_url, sim_apiserver_process, vulcan_process


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_extender_process(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    apiserver, _ = sim_apiserver_process(kubeconfig)
    extender = None
    try:
        extender = vulcan_process(
            "extender",
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--log-format",
            "json",
            # Events paced as kubelet paces them (its flag names).
            "--event-qps",
            "20",
            "--event-burst",
            "40",
        )
        base = announced_url(extender, "vulcan extender listening on http://127.0.0.1:")
        base = base.removesuffix("/v1")
        assert _get(f"{base}/healthz")[0] == 200
        assert extender.stderr is not None
        for log_line in extender.stderr:  # structured logs: wait for the sync to be reported
            if json.loads(log_line).get("msg") == "cache synced":
                break
        assert _get(f"{base}/readyz")[0] == 200
        request = json.dumps(
            {
                "Pod": {
                    "metadata": {"name": "p", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
                "Nodes": None,
                "NodeNames": ["nowhere"],
            }
        ).encode()
        post = urllib.request.Request(
            f"{base}/v1/filter", data=request, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(post, timeout=5) as response:
            answer = json.load(response)
        # No gang holds room anywhere: the candidate passes as kube-scheduler offered it.
        assert answer == {
            "NodeNames": ["nowhere"],
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
        status, metrics = _get(f"{base}/metrics")
        assert status == 200 and b"vulcan_extender_requests_total" in metrics
        extender.send_signal(signal.SIGTERM)
        assert extender.wait(timeout=20) == 0
    finally:
        for process in (extender, apiserver):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)


def test_two_extenders_with_leader_election_one_leads_and_the_other_takes_over(
    tmp_path: Path,
) -> None:
    """The install runs two extender replicas with --leader-elect: the gang ledger lives in one
    process, so only the leader schedules and only it is ready (kube-scheduler's Service sends
    its calls there); when it goes, the standby takes the Lease and becomes ready."""
    import time

    kubeconfig = tmp_path / "kubeconfig"
    apiserver, _ = sim_apiserver_process(kubeconfig)
    extenders = []
    try:
        for _ in range(2):
            process = vulcan_process(
                "extender",
                "--kubeconfig",
                str(kubeconfig),
                "--port",
                "0",
                "--bind-address",
                "127.0.0.1",
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
            base = announced_url(process, "vulcan extender listening on http://127.0.0.1:")
            extenders.append((process, base.removesuffix("/v1")))

        def ready() -> list[int]:
            return [_get(f"{base}/readyz")[0] for _, base in extenders]

        def standby_says() -> bytes:
            # The standby answers 503 first for its informers' sync, then for not leading.
            statuses = ready()
            if sorted(statuses) != [200, 503]:
                return b""
            return _get(f"{extenders[1 - statuses.index(200)][1]}/readyz")[1]

        deadline = time.monotonic() + 20
        while b"not the leader" not in (said := standby_says()):
            assert time.monotonic() < deadline, (ready(), said)
            time.sleep(0.05)
        statuses = ready()
        leader = statuses.index(200)
        standby = 1 - leader
        assert b"not the leader" in _get(f"{extenders[standby][1]}/readyz")[1]
        extenders[leader][0].send_signal(signal.SIGTERM)
        assert extenders[leader][0].wait(timeout=20) == 0  # releases the Lease on its way out
        deadline = time.monotonic() + 20
        while _get(f"{extenders[standby][1]}/readyz")[0] != 200:
            assert time.monotonic() < deadline, "the standby did not take over"
            time.sleep(0.05)
    finally:
        for process in [p for p, _ in extenders] + [apiserver]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)
