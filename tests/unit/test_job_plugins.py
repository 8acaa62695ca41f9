"""flow_controller.job.plugins: what Volcano's env, svc, ssh, mpi, pytorch and tensorflow
plugins put into a job's pods and objects (Volcano's pkg/controllers/job/plugins)."""

from __future__ import annotations

import base64
import json
from typing import Any

from core.api.batch import JobSpec
from core.api.defaults import default_job_spec
from flow_controller.job import objects
from flow_controller.job.plugin_registry import build_plugins
from flow_controller.job.plugins import JobContext, parse_flags

META = {"name": "tf", "namespace": "team-a", "uid": "u-1"}


def job(tasks: dict[str, int], plugins: dict[str, list[str]]) -> JobSpec:
    template = {
        "spec": {
            "containers": [{"name": "c", "image": "x"}],
            "initContainers": [{"name": "init", "image": "x"}],
        }
    }
    body = {
        "tasks": [{"name": n, "replicas": r, "template": template} for n, r in tasks.items()],
        "plugins": plugins,
    }
    return default_job_spec(JobSpec.model_validate(body))


def pods(spec: JobSpec) -> dict[str, dict[str, Any]]:
    ctx = JobContext("tf", "team-a", spec, objects.owner_reference(META))
    plugins, missing = build_plugins(spec.plugins)
    assert not missing
    built = {}
    for task in spec.tasks or ():
        for index in range(task.replicas):
            pod = objects.build_pod(META, spec, task, index, version=0, retry_count=0)
            for plugin in plugins:
                plugin.on_pod_create(pod, ctx)
            built[pod["metadata"]["name"]] = pod
    return built


def env(pod: dict[str, Any], container: int = 0) -> dict[str, Any]:
    entries = pod["spec"]["containers"][container].get("env") or ()
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in entries}


def owned(spec: JobSpec) -> dict[tuple[str, str], dict[str, Any]]:
    ctx = JobContext("tf", "team-a", spec, objects.owner_reference(META))
    plugins, _ = build_plugins(spec.plugins)
    return {(o.kind, o.body["metadata"]["name"]): o.body for p in plugins for o in p.objects(ctx)}


def test_flags_are_go_style() -> None:
    assert parse_flags(["--port=5000", "--disable-network-policy"]) == {
        "port": "5000",
        "disable-network-policy": "true",
    }


def test_env_gives_every_container_its_task_index() -> None:
    built = pods(job({"worker": 2}, {"env": []}))
    assert env(built["tf-worker-1"])["VK_TASK_INDEX"] == "1"
    init = built["tf-worker-1"]["spec"]["initContainers"][0]["env"]
    assert {"name": "VC_TASK_INDEX", "value": "1"} in init


def test_svc_names_hosts_in_a_configmap_mounted_at_etc_volcano() -> None:
    spec = job({"ps": 1, "worker": 2}, {"svc": []})
    built = pods(spec)
    pod = built["tf-worker-0"]
    assert pod["spec"]["hostname"] == "tf-worker-0" and pod["spec"]["subdomain"] == "tf"
    hosts_env = env(pod)["VC_WORKER_HOSTS"]
    assert hosts_env == {"configMapKeyRef": {"name": "tf-svc", "key": "VC_WORKER_HOSTS"}}
    assert {"name": "tf-svc", "mountPath": "/etc/volcano"} in pod["spec"]["containers"][0][
        "volumeMounts"
    ]
    objects_ = owned(spec)
    data = objects_[("ConfigMap", "tf-svc")]["data"]
    assert data["worker.host"] == "tf-worker-0.tf\ntf-worker-1.tf"
    assert data["VC_WORKER_HOSTS"] == "tf-worker-0.tf,tf-worker-1.tf"
    assert data["VC_PS_NUM"] == "1"
    service = objects_[("Service", "tf")]["spec"]
    assert service["clusterIP"] == "None"
    assert service["selector"] == {
        "volcano.sh/job-name": "tf",
        "volcano.sh/job-namespace": "team-a",
    }
    assert ("NetworkPolicy", "tf") in objects_
    assert ("NetworkPolicy", "tf") not in owned(
        job({"worker": 1}, {"svc": ["--disable-network-policy=true"]})
    )


def test_tf_config_is_valid_json_naming_every_ps_and_worker() -> None:
    built = pods(job({"ps": 1, "worker": 2}, {"tensorflow": [], "svc": []}))
    config = json.loads(env(built["tf-worker-1"])["TF_CONFIG"])
    assert config == {
        "cluster": {
            "ps": ["tf-ps-0.tf:2222"],
            "worker": ["tf-worker-0.tf:2222", "tf-worker-1.tf:2222"],
        },
        "task": {"type": "worker", "index": 1},
    }
    assert "TF_CONFIG" not in {
        e["name"] for e in built["tf-ps-0"]["spec"]["initContainers"][0].get("env") or ()
    }


def test_mpi_master_gets_its_workers_and_everyone_the_port() -> None:
    built = pods(
        job({"mpimaster": 1, "mpiworker": 2}, {"mpi": ["--master=mpimaster", "--worker=mpiworker"]})
    )
    assert env(built["tf-mpimaster-0"])["MPI_HOST"] == "tf-mpiworker-0.tf,tf-mpiworker-1.tf"
    assert "MPI_HOST" not in env(built["tf-mpiworker-0"])
    ports = built["tf-mpiworker-1"]["spec"]["containers"][0]["ports"]
    assert {"name": "mpijob-port", "containerPort": 22} in ports


def test_pytorch_ranks_world_size_and_master_address() -> None:
    built = pods(job({"master": 1, "worker": 2}, {"pytorch": ["--port=5000"]}))
    master, worker = env(built["tf-master-0"]), env(built["tf-worker-1"])
    assert master["RANK"] == "0" and worker["RANK"] == "2"
    assert worker["WORLD_SIZE"] == "3" and worker["MASTER_PORT"] == "5000"
    assert worker["MASTER_ADDR"] == "tf-master-0.tf"


def test_ssh_secret_holds_a_key_pair_and_a_config_for_every_pod() -> None:
    spec = job({"mpimaster": 1, "mpiworker": 2}, {"ssh": []})
    secret = owned(spec)[("Secret", "tf-ssh")]["data"]
    private = base64.b64decode(secret["id_rsa"]).decode()
    public = base64.b64decode(secret["id_rsa.pub"]).decode()
    assert private.startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert public.startswith("ssh-rsa ") and secret["authorized_keys"] == secret["id_rsa.pub"]
    config = base64.b64decode(secret["config"]).decode()
    assert "StrictHostKeyChecking no" in config
    assert "Host tf-mpiworker-1\n  HostName tf-mpiworker-1.tf\n  Port 22" in config
    pod = pods(spec)["tf-mpiworker-0"]
    assert {"name": "tf-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"} in pod["spec"][
        "containers"
    ][0]["volumeMounts"]
