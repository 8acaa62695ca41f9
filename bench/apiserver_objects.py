"""The objects the API-server benchmark creates, as pre-encoded orjson request bodies: nodes as
a kubelet registers them, the pods of Volcano jobs (and their PodRef), and namespaces."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

NAMESPACES = tuple(f"bench-{i}" for i in range(10))
JOB_SIZE = 100  # pods per Volcano job: 1 master + 99 workers


# ------------------------------------------------------------------------------- objects


def node_body(index: int) -> tuple[str, bytes]:
    """A node as a kubelet registers it (~1.2 KB)."""
    name = f"node-{index:05d}"
    zone = f"zone-{index % 3}"
    resources = {
        "cpu": "32",
        "memory": "128Gi",
        "pods": "110",
        "ephemeral-storage": "500Gi",
        "hugepages-2Mi": "0",
    }
    heartbeat = "2024-01-01T00:00:00Z"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.8xlarge",
                "topology.kubernetes.io/region": "region-1",
                "topology.kubernetes.io/zone": zone,
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": f"10.{index // 256 % 256}.{index % 256}.0/24"},
        "status": {
            "capacity": resources,
            "allocatable": {**resources, "cpu": "31500m", "memory": "127Gi"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": heartbeat,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index // 256 % 256}.{index % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{index:032x}",
                "systemUUID": f"{index:08x}-0000-0000-0000-000000000000",
                "bootID": f"{index:08x}-boot",
                "kernelVersion": "6.1.0-18-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.29.2",
                "kubeProxyVersion": "v1.29.2",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
    return "/api/v1/nodes", orjson.dumps(node)


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{self.name}"


def pod_body(index: int) -> tuple[PodRef, bytes]:
    """The pod a Volcano job controller creates for task replica `index` of its job (~2 KB)."""
    job_index, replica = divmod(index, JOB_SIZE)
    job = f"job-{job_index:05d}"
    namespace = NAMESPACES[job_index % len(NAMESPACES)]
    task = "master" if replica == 0 else "worker"
    task_index = 0 if replica == 0 else replica - 1
    name = f"{job}-{task}-{task_index}"
    job_uid = f"00000000-0000-4000-8000-{job_index:012d}"
    requests = {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "volcano.sh/job-name": job,
                "volcano.sh/job-namespace": namespace,
                "volcano.sh/queue-name": "default",
                "volcano.sh/task-spec": task,
                "volcano.sh/job-version": "0",
                "app": "training",
            },
            "annotations": {
                "scheduling.k8s.io/group-name": f"{job}-{job_uid}",
                "volcano.sh/job-name": job,
                "volcano.sh/job-version": "0",
                "volcano.sh/queue-name": "default",
                "volcano.sh/task-spec": task,
                "volcano.sh/task-index": str(task_index),
                "volcano.sh/template-uid": f"{job}-{task}",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": job,
                    "uid": job_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "OnFailure",
            "hostname": name,
            "subdomain": job,
            "containers": [
                {
                    "name": task,
                    "image": "registry.example.com/ml/trainer:2024.03",
                    "command": ["python", "-m", "trainer", "--role", task],
                    "env": [
                        {"name": "VC_TASK_INDEX", "value": str(task_index)},
                        {"name": "VC_JOB_NAME", "value": job},
                    ],
                    "ports": [{"name": "nccl", "containerPort": 29500, "protocol": "TCP"}],
                    "resources": {"requests": requests, "limits": requests},
                    "volumeMounts": [
                        {"name": "svc", "mountPath": "/etc/volcano"},
                        {"name": "data", "mountPath": "/data", "readOnly": True},
                    ],
                }
            ],
            "volumes": [
                {"name": "svc", "configMap": {"name": f"{job}-svc"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "training-data"}},
            ],
        },
    }
    return PodRef(namespace, name), orjson.dumps(pod)


def namespace_body(name: str) -> tuple[str, bytes]:
    return "/api/v1/namespaces", orjson.dumps({"metadata": {"name": name}})
