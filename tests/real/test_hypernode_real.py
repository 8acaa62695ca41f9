"""HyperNodes on a real kube-apiserver: the generated CRD is accepted (within the CEL cost
budget), its rules refuse a member with two selectors in Volcano's words, and `vulcan
controllers` with Volcano's documented label configuration builds, changes and deletes the
tree as nodes are labelled. A bare control plane: nodes are created as objects."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, announced_url, stop_process, vulcan_process
from vulcan.real_cluster.control_plane import ControlPlane
from vulcan.real_cluster.manifests import kubectl

pytestmark = pytest.mark.real

CONTROLLER_MANAGER = False
CRD = REPO / "manifests" / "crds" / "topology.volcano.sh_hypernodes.yaml"
CONF = """
networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        topologyA3:
          - nodeLabel: "volcano.sh/hypercluster"
          - nodeLabel: "volcano.sh/hypernode"
          - nodeLabel: "kubernetes.io/hostname"
"""


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def hypernodes(config: Path) -> dict[tuple[int, str], dict[str, Any]]:
    items = json.loads(kubectl(config, "get", "hypernodes", "-o", "json"))["items"]
    return {
        (h["spec"]["tier"], h["metadata"]["labels"][h["spec"]["tierName"]]): h
        for h in items
        if h["metadata"].get("labels", {}).get("volcano.sh/network-topology-source") == "label"
    }


def members(h: dict[str, Any]) -> list[str]:
    return [m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]]


def test_the_crd_and_label_discovery_on_a_real_api_server(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    config = control_plane.admin_kubeconfig
    kubectl(config, "apply", "-f", str(CRD))
    kubectl(config, "wait", "--for=condition=Established", "-f", str(CRD))
    both = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "both"},
        "spec": {
            "tier": 1,
            "members": [
                {
                    "type": "Node",
                    "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "a"}},
                }
            ],
        },
    }
    refused = subprocess.run(
        ["kubectl", "--kubeconfig", str(config), "create", "-f", "-"],
        input=json.dumps(both),
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0
    assert "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified" in refused.stderr

    (tmp_path / "controller.conf").write_text(CONF)
    process = vulcan_process(
        "controllers",
        "--kubeconfig",
        str(config),
        "--controllers",
        "hypernode-controller",
        "--hypernode-discovery-config",
        str(tmp_path / "controller.conf"),
        "--bind-address",
        "127.0.0.1",
        "--port",
        "0",
        "--leader-elect=false",
    )
    try:
        announced_url(process, "vulcan controllers listening on ")
        for i in range(4):
            labels = {
                "kubernetes.io/hostname": f"node{i}",
                "volcano.sh/hypernode": f"s{i // 2}",
                "volcano.sh/hypercluster": "s4",
            }
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node{i}", "labels": labels},
            }
            subprocess.run(
                ["kubectl", "--kubeconfig", str(config), "create", "-f", "-"],
                input=json.dumps(node),
                check=True,
                capture_output=True,
                text=True,
            )
        wait_for(
            "two tier-1 HyperNodes under a tier-2 one",
            lambda: sorted(hypernodes(config)) == [(1, "s0"), (1, "s1"), (2, "s4")],
        )
        tree = hypernodes(config)
        assert members(tree[(1, "s0")]) == ["node0", "node1"]
        assert sorted(members(tree[(2, "s4")])) == sorted(
            tree[k]["metadata"]["name"] for k in ((1, "s0"), (1, "s1"))
        )
        kubectl(config, "label", "node", "node1", "volcano.sh/hypernode=s1", "--overwrite")
        wait_for(
            "node1 moved to s1",
            lambda: members(hypernodes(config)[(1, "s0")]) == ["node0"],
        )
        kubectl(config, "delete", "node", "node0", "node1", "node2", "node3")
        wait_for("every discovered HyperNode deleted", lambda: hypernodes(config) == {})
    finally:
        stop_process(process)
