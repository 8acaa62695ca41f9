"""Volcano's `ray` and `hcclrank` job plugins: what they put into a job's pods and objects
(pkg/controllers/job/plugins/distributed-framework/ray and hcclrank)."""

from __future__ import annotations

from typing import Any

import pytest

from core.api.batch import JobSpec
from core.api.defaults import default_job_spec
from flow_controller.job import objects
from flow_controller.job.plugin_registry import build_plugins
from flow_controller.job.plugins import JobContext, PluginFailed

META = {"name": "rc", "namespace": "team-a", "uid": "u-1"}


def job(
    tasks: dict[str, tuple[int, str]],
    plugins: dict[str, list[str]],
    env: dict[str, list[dict[str, Any]]] | None = None,
) -> JobSpec:
    """tasks: name -> (replicas, container name)."""
    body = {
        "tasks": [
            {
                "name": name,
                "replicas": replicas,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": container, "image": "rayproject/ray", "args": ["x"]},
                            {"name": "sidecar", "image": "s"},
                        ]
                        if not (env or {}).get(name)
                        else [{"name": container, "image": "i", "env": env[name]}]  # type: ignore[index]
                    }
                },
            }
            for name, (replicas, container) in tasks.items()
        ],
        "plugins": plugins,
    }
    return default_job_spec(JobSpec.model_validate(body))


def context(spec: JobSpec) -> JobContext:
    return JobContext("rc", "team-a", spec, objects.owner_reference(META))


def pods(spec: JobSpec) -> dict[str, dict[str, Any]]:
    plugins, missing = build_plugins(spec.plugins)
    assert not missing
    built = {}
    for task in spec.tasks or ():
        for index in range(task.replicas):
            pod = objects.build_pod(META, spec, task, index, version=0, retry_count=0)
            for plugin in plugins:
                plugin.on_pod_create(pod, context(spec))
            built[pod["metadata"]["name"]] = pod
    return built


RAY = {"head": (1, "head"), "worker": (2, "worker")}


def test_ray_head_starts_the_cluster_with_its_three_ports() -> None:
    head = pods(job(RAY, {"ray": []}))["rc-head-0"]["spec"]["containers"]
    assert head[0]["command"] == [
        "sh",
        "-c",
        "ray start --head --block --dashboard-host=0.0.0.0 --port=6379 --dashboard-port=8265 "
        "--ray-client-server-port=10001",
    ]
    assert head[0]["args"] == ["x"]  # Volcano sets the command only
    assert head[0]["ports"] == [
        {"name": "gcs", "containerPort": 6379},
        {"name": "dashboard", "containerPort": 8265},
        {"name": "client-server", "containerPort": 10001},
    ]
    assert "command" not in head[1] and "ports" not in head[1]  # only the head container


def test_ray_workers_join_the_head_pod_by_its_dns_name() -> None:
    built = pods(job(RAY, {"ray": [], "svc": []}))
    for index in range(2):
        container = built[f"rc-worker-{index}"]["spec"]["containers"][0]
        assert container["command"] == [
            "sh",
            "-c",
            "ray start --block --address=rc-head-0.rc:6379",
        ]
        assert "ports" not in container
    # svc gives the head pod that name.
    assert built["rc-head-0"]["spec"]["hostname"] == "rc-head-0"
    assert built["rc-head-0"]["spec"]["subdomain"] == "rc"


def test_ray_flags_rename_tasks_containers_and_ports() -> None:
    spec = job(
        {"boss": (1, "main"), "crew": (1, "main")},
        {
            "ray": [
                "--head=boss",
                "--headContainer=main",
                "--worker=crew",
                "--workerContainer=main",
                "--port=7000",
                "--dashboardPort=7001",
                "--clientPort=7002",
            ]
        },
    )
    built = pods(spec)
    head = built["rc-boss-0"]["spec"]["containers"][0]
    assert "--port=7000 --dashboard-port=7001 --ray-client-server-port=7002" in head["command"][2]
    assert [p["containerPort"] for p in head["ports"]] == [7000, 7001, 7002]
    worker = built["rc-crew-0"]["spec"]["containers"][0]
    assert worker["command"][2] == "ray start --block --address=rc-boss-0.rc:7000"


def test_ray_keeps_a_port_the_head_container_already_declares() -> None:
    spec = job(RAY, {"ray": []})
    spec.tasks[0].template["spec"]["containers"][0]["ports"] = [  # type: ignore[index]
        {"name": "redis", "containerPort": 6379}
    ]
    head = pods(spec)["rc-head-0"]["spec"]["containers"][0]
    assert [(p["name"], p["containerPort"]) for p in head["ports"]] == [
        ("redis", 6379),
        ("dashboard", 8265),
        ("client-server", 10001),
    ]


def test_ray_head_service() -> None:
    spec = job(RAY, {"ray": []})
    plugins, _ = build_plugins(spec.plugins)
    ray = next(p for p in plugins if p.name == "ray")
    (service,) = ray.objects(context(spec))
    assert ray.names(context(spec)) == [("Service", "rc-head-svc")]
    assert service.kind == "Service" and not service.refresh
    body = service.body
    assert body["metadata"]["name"] == "rc-head-svc"
    assert body["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert body["spec"]["selector"] == {
        "volcano.sh/job-name": "rc",
        "volcano.sh/job-namespace": "team-a",
        "volcano.sh/task-spec": "head",
    }
    assert "clusterIP" not in body["spec"]  # a ClusterIP Service, not headless
    assert body["spec"]["ports"] == [
        {"name": "gcs", "port": 6379, "targetPort": "gcs", "protocol": "TCP"},
        {"name": "dashboard", "port": 8265, "targetPort": "dashboard", "protocol": "TCP"},
        {"name": "client-server", "port": 10001, "targetPort": "client-server", "protocol": "TCP"},
    ]


def test_ray_without_its_head_task_cannot_build_pods() -> None:
    with pytest.raises(PluginFailed, match="job rc doesn't have head task head"):
        pods(job({"worker": (2, "worker")}, {"ray": []}))


def ranks(spec: JobSpec) -> dict[str, str | None]:
    return {
        name: pod["metadata"].get("annotations", {}).get("hccl/rankIndex")
        for name, pod in pods(spec).items()
    }


def test_hcclrank_ranks_masters_by_index_then_workers_after_them() -> None:
    spec = job({"master": (2, "c"), "worker": (3, "c"), "ps": (1, "c")}, {"hcclrank": []})
    assert ranks(spec) == {
        "rc-master-0": "0",
        "rc-master-1": "1",
        "rc-worker-0": "2",
        "rc-worker-1": "3",
        "rc-worker-2": "4",
        "rc-ps-0": None,  # neither master nor worker
    }


def test_hcclrank_role_flags_and_a_job_without_master() -> None:
    spec = job(
        {"chief": (1, "c"), "node": (2, "c")}, {"hcclrank": ["--master=chief", "--worker=node"]}
    )
    assert ranks(spec) == {"rc-chief-0": "0", "rc-node-0": "1", "rc-node-1": "2"}
    only_workers = job({"worker": (2, "c")}, {"hcclrank": []})
    assert ranks(only_workers) == {"rc-worker-0": "0", "rc-worker-1": "1"}


def test_hcclrank_takes_a_rank_the_pod_already_has() -> None:
    spec = job(
        {"master": (1, "c"), "worker": (1, "c")},
        {"hcclrank": []},
        env={"worker": [{"name": "RANK", "value": "7"}]},
    )
    assert ranks(spec) == {"rc-master-0": "0", "rc-worker-0": "7"}
    # With pytorch, the RANK pytorch sets is the one annotated (pytorch: master 0, workers
    # index + 1; hcclrank runs after it).
    both = job({"master": (1, "c"), "worker": (2, "c")}, {"hcclrank": [], "pytorch": []})
    assert ranks(both) == {"rc-master-0": "0", "rc-worker-0": "1", "rc-worker-1": "2"}


def test_hcclrank_annotates_the_rank_pytorch_set_even_where_its_own_would_differ() -> None:
    # Two masters: pytorch gives both RANK 0; the annotation follows the pod's RANK.
    both = job({"master": (2, "c"), "worker": (1, "c")}, {"pytorch": [], "hcclrank": []})
    built = pods(both)
    for name, pod in built.items():
        rank = next(e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == "RANK")
        assert pod["metadata"]["annotations"]["hccl/rankIndex"] == rank, name
    assert ranks(both)["rc-master-1"] == "0"
