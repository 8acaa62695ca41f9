"""Placement comparisons on the real tier: a workload scheduled by a kube-scheduler with a given
configuration beside vulcan's install, pod by pod, and where each pod went (issue 37: the same
pods on the same nodes with and without the extender's prioritize call)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml

from tests.e2e.conftest import wait_for
from tests.real.conftest import RealCluster
from vulcan.real_cluster.manifests import find
from vulcan.real_cluster.processes import Child

PODS = "/api/v1/namespaces/default/pods"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"


def install_config(cluster: RealCluster) -> dict[str, Any]:
    """The second-scheduler install's KubeSchedulerConfiguration (its ConfigMap)."""
    text = find(cluster.install.docs, "ConfigMap", "vulcan-scheduler-config")["data"]
    return dict(yaml.safe_load(text["config.yaml"]))


def local_config(
    cluster: RealCluster, profiles: list[dict[str, Any]], extenders: list[dict[str, Any]]
) -> dict[str, Any]:
    """A configuration for this cluster: the extender's local URL, no leader election."""
    install = install_config(cluster)
    entries = [{**e, "urlPrefix": f"{cluster.install.extender_url}/v1"} for e in extenders]
    return {
        "apiVersion": install["apiVersion"],
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {
            "kubeconfig": str(cluster.control_plane.admin_kubeconfig),
            **install["clientConnection"],
        },
        "profiles": profiles,
        "extenders": entries,
    }


def with_prioritize(extenders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries as the install had them before issue 37: the first one also prioritizes."""
    return [{**extenders[0], "prioritizeVerb": "prioritize", "weight": 1}, *extenders[1:]]


def pod(name: str, cpu: str, memory: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"workload": "placements"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
            **spec,
        },
    }


def member(name: str, group: str, cpu: str, memory: str) -> dict[str, Any]:
    body = pod(name, cpu, memory, schedulerName="volcano")
    body["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
    return body


def create_group(cluster: RealCluster, name: str, min_member: int) -> None:
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }
    cluster.request(PODGROUPS, group, "POST")


def node_of(cluster: RealCluster, name: str) -> str:
    return wait_for(
        f"pod {name} to be bound",
        lambda: ((cluster.pod(name) or {}).get("spec") or {}).get("nodeName"),
        60,
    )


@contextmanager
def scheduler(cluster: RealCluster, config: dict[str, Any], tag: str) -> Iterator[None]:
    """A kube-scheduler with `config` while the block runs; then every pod and PodGroup is
    deleted and gone, so the next phase starts on empty nodes."""
    path = cluster.install.root / f"placement-{tag}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    child = Child(
        f"placement-scheduler-{tag}",
        [str(cluster.control_plane.assets.kube_scheduler), f"--config={path}", "--secure-port=0"],
        cluster.control_plane.logs,
    )
    child.start()
    try:
        yield
    finally:
        child.stop()
        cluster.kubectl("delete", "pods,podgroups", "--all", "--wait=true", "--timeout=120s")
        wait_for("the phase's pods to be gone", lambda: not cluster.pods(), 120)


def stop_install_schedulers(cluster: RealCluster) -> None:
    """The install's own kube-schedulers stopped: the test's one scheduler takes every pod."""
    for child in cluster.install.children:
        if child.name in ("kube-scheduler", "vulcan-scheduler"):
            child.stop()


def differences(before: dict[str, str], after: dict[str, str]) -> dict[str, tuple[str, str]]:
    return {n: (before[n], after.get(n, "")) for n in before if before[n] != after.get(n)}
