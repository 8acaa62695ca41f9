"""The objects of the extender-latency benchmark: the EKS GPU nodes and where the bound pods
sit, the pod kube-scheduler asks about, and the ExtenderArgs body it sends."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import orjson

from bench.apiserver_common import BenchError
from bench.apiserver_objects import JOB_SIZE, node_body, pod_body
from bench.extender_settings import FULL_NODE_EVERY, GPUS_PER_NODE, REGION, SEED

# What kube-apiserver's DefaultTolerationSeconds admission adds to every pod.
DEFAULT_TOLERATIONS: tuple[dict[str, Any], ...] = tuple(
    {
        "key": f"node.kubernetes.io/{taint}",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    for taint in ("not-ready", "unreachable")
)

# ------------------------------------------------------------------------------- objects


def node_names(count: int) -> list[str]:
    """`count` distinct EKS node names (`ip-10-12-34-56.us-west-2.compute.internal`), the same
    list on every call: the extender child and this client build it independently."""
    rng = random.Random(SEED)
    names: dict[str, None] = {}
    for _ in range(4 * count):  # bounded; collisions among 16M addresses are rare
        if len(names) == count:
            break
        octets = f"{rng.randrange(256)}-{rng.randrange(256)}-{rng.randrange(1, 255)}"
        names[f"ip-10-{octets}.{REGION}.compute.internal"] = None
    if len(names) != count:
        raise BenchError(f"could not draw {count} distinct node names")
    return list(names)


def node_object(index: int, name: str) -> dict[str, Any]:
    """A p4d.24xlarge EKS node as its kubelet registers it (~1.6 KB): 8 GPUs, 96 cores."""
    node: dict[str, Any] = orjson.loads(node_body(index)[1])
    zone = f"{REGION}{'abc'[index % 3]}"
    address = name.split(".", 1)[0][3:].replace("-", ".")
    meta = node["metadata"]
    meta["name"] = name
    meta["labels"].update(
        {
            "kubernetes.io/hostname": name,
            "node.kubernetes.io/instance-type": "p4d.24xlarge",
            "beta.kubernetes.io/instance-type": "p4d.24xlarge",
            "topology.kubernetes.io/region": REGION,
            "topology.kubernetes.io/zone": zone,
            "eks.amazonaws.com/nodegroup": f"gpu-{zone}",
            "eks.amazonaws.com/capacityType": "ON_DEMAND",
            "nvidia.com/gpu.present": "true",
        }
    )
    node["spec"] = {"providerID": f"aws:///{zone}/i-{index:017x}"}
    # The kubelet reports MemTotal, which differs by some KiB between machines of one type, so
    # (like in a real cluster) no two nodes have quite the same allocatable memory.
    memory_kib = 1_187_635_000 + index * 7_919 % 65_536
    capacity = {
        "cpu": "96",
        "memory": f"{memory_kib}Ki",
        "pods": "110",
        "ephemeral-storage": "500Gi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "nvidia.com/gpu": str(GPUS_PER_NODE),
    }
    status = node["status"]
    status["capacity"] = capacity
    status["allocatable"] = {**capacity, "cpu": "95690m", "memory": f"{memory_kib - 12_163_072}Ki"}
    status["addresses"] = [
        {"type": "InternalIP", "address": address},
        {"type": "Hostname", "address": name},
        {"type": "InternalDNS", "address": name},
    ]
    return node


def placements(names: Sequence[str], pods: int) -> list[str]:
    """The node of each bound pod: every FULL_NODE_EVERY-th node gets GPUS_PER_NODE pods (one
    GPU each, so it is full), the rest are spread round-robin over the other nodes."""
    full = [name for name in names[::FULL_NODE_EVERY] for _ in range(GPUS_PER_NODE)]
    rest = [name for index, name in enumerate(names) if index % FULL_NODE_EVERY]
    spread = [rest[i % len(rest)] for i in range(max(0, pods - len(full)))] if rest else []
    return (full + spread)[:pods]


def scheduling_pod(cpu: str = "4") -> dict[str, Any]:
    """The pod in ExtenderArgs as kube-scheduler sends it: from its informer cache, so no
    kind/apiVersion and no managedFields, with the API server's defaults, Pending after an
    earlier unschedulable attempt. A Volcano worker asking for 4 cores (or `cpu`), 8Gi and 1 GPU."""
    pod: dict[str, Any] = orjson.loads(pod_body(JOB_SIZE * 9_000 + 7)[1])
    del pod["apiVersion"], pod["kind"]
    pod["metadata"].update(
        {
            "uid": "6f1c2b9e-3d4a-4c8e-9b7a-1e2f3a4b5c6d",
            "resourceVersion": "48213377",
            "creationTimestamp": "2024-03-01T12:00:00Z",
        }
    )
    spec = pod["spec"]
    container = spec["containers"][0]
    for amounts in container["resources"].values():  # requests and limits (Guaranteed QoS)
        amounts["cpu"] = cpu
    container.update(
        {
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }
    )
    token_volume = "kube-api-access-x7k2p"
    container["volumeMounts"].append(
        {
            "name": token_volume,
            "readOnly": True,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        }
    )
    spec["volumes"].append(
        {
            "name": token_volume,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {
                                        "apiVersion": "v1",
                                        "fieldPath": "metadata.namespace",
                                    },
                                }
                            ]
                        }
                    },
                ],
                "defaultMode": 420,
            },
        }
    )
    spec.update(
        {
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                *(dict(t) for t in DEFAULT_TOLERATIONS),
            ],
        }
    )
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": "2024-03-01T12:00:01Z",
                "reason": "Unschedulable",
                "message": "0/10000 nodes are available: 10000 Insufficient nvidia.com/gpu.",
            }
        ],
        "qosClass": "Guaranteed",
    }
    return pod


def extender_args(pod: dict[str, Any], names: list[str]) -> bytes:
    # Go's encoder emits every field of ExtenderArgs, in struct order, unused ones as null.
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
