"""The extender against the embedded API server as a user sees it: a pod bound through /v1/bind
shows its node in `kubectl get`, and a node without room is filtered with a reason."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from core.resources import ResourceVector
from extender.ledger import Reservation
from tests.integration.extender_harness import extender_harness

KUBECTL = shutil.which("kubectl")


async def kubectl(kubeconfig: Path, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        KUBECTL or "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.skipif(
    KUBECTL is None,
    reason="kubectl is not installed (make test installs Debian's kubernetes-client when it can)",
)
async def test_bound_pod_shows_node_and_full_node_is_explained(tmp_path: Path) -> None:
    from sim.apiserver.server import write_kubeconfig

    async with extender_harness() as h:
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, h.apiserver.url)
        await h.add_node("small", cpu="1")
        await h.add_node("big", cpu="16")
        pod = await h.add_pod("train", cpu="2")
        await h.settle()
        # Another gang's member holds room on a candidate, so vulcan checks every one's fit.
        h.server.ledger.reserve(
            Reservation("default/gang-0", "small", ResourceVector({"cpu": 500}))
        )
        request = {
            "Pod": {k: v for k, v in pod.items() if k not in ("kind", "apiVersion")},
            "Nodes": None,
            "NodeNames": ["small", "big"],
        }
        status, answer = await h.post("filter", request)
        assert status == 200
        assert answer["NodeNames"] == ["big"]
        assert answer["FailedNodes"] == {"small": "Insufficient cpu"}
        status, answer = await h.post(
            "bind",
            {
                "PodName": "train",
                "PodNamespace": "default",
                "PodUID": pod["metadata"]["uid"],
                "Node": "big",
            },
        )
        assert (status, answer) == (200, {})
        out = await kubectl(kubeconfig, "get", "pod", "train", "-o", "jsonpath={.spec.nodeName}")
        assert out == "big"
        wide = await kubectl(kubeconfig, "get", "pods", "-o", "wide")
        assert "big" in wide.splitlines()[1].split()
