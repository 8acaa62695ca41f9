"""Volcano's `ray` and `hcclrank` job plugins through the job controller on the embedded API
server (the test plays the scheduler and the kubelet, as test_job_controller does)."""

from __future__ import annotations

from typing import Any

from core.kube.client import PODGROUPS, SERVICES, VCJOBS, KubeClient
from tests.integration.controller_harness import events_about, eventually, get_or_none, running
from tests.integration.test_job_controller import admit, job_pods, phase_of, set_phase

JOB = "job-controller"


def framework_job(name: str, tasks: dict[str, tuple[int, str]], plugins: dict[str, Any]) -> Any:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": task,
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "containers": [{"name": container, "image": "rayproject/ray"}],
                            "restartPolicy": "Never",
                        }
                    },
                }
                for task, (replicas, container) in tasks.items()
            ],
            "plugins": plugins,
        },
    }


async def started_pods(client: KubeClient, name: str, count: int) -> dict[str, dict[str, Any]]:
    job = await client.get(VCJOBS, name, "default")
    group = f"{name}-{job['metadata']['uid']}"
    await eventually(lambda: get_or_none(client, PODGROUPS, group, "default"))
    await admit(client, group)

    async def all_created() -> dict[str, dict[str, Any]] | None:
        found = await job_pods(client, name)
        return found if len(found) == count else None

    return await eventually(all_created)


async def test_a_ray_job_gets_its_head_and_workers_wired_and_the_head_service() -> None:
    async with running([JOB]) as (client, _):
        await client.create(
            VCJOBS,
            framework_job("rc", {"head": (1, "head"), "worker": (2, "worker")}, {"ray": []}),
        )
        pods = await started_pods(client, "rc", 3)
        head = pods["rc-head-0"]["spec"]
        assert head["containers"][0]["command"][2].startswith("ray start --head --block")
        assert {p["name"]: p["containerPort"] for p in head["containers"][0]["ports"]} == {
            "gcs": 6379,
            "dashboard": 8265,
            "client-server": 10001,
        }
        # The svc plugin Volcano's admission adds for ray names the head pod rc-head-0.rc.
        assert (head["hostname"], head["subdomain"]) == ("rc-head-0", "rc")
        for index in range(2):
            worker = pods[f"rc-worker-{index}"]["spec"]["containers"][0]
            assert worker["command"] == [
                "sh",
                "-c",
                "ray start --block --address=rc-head-0.rc:6379",
            ]
        service = await eventually(lambda: get_or_none(client, SERVICES, "rc-head-svc", "default"))
        assert service["spec"]["selector"]["volcano.sh/task-spec"] == "head"
        assert [p["port"] for p in service["spec"]["ports"]] == [6379, 8265, 10001]
        assert service["metadata"]["ownerReferences"][0]["name"] == "rc"
        status = (await client.get(VCJOBS, "rc", "default"))["status"]
        assert status["controlledResources"]["plugin-ray"] == "ray"
        # Finished: the head Service goes with the job's other plugin objects.
        for pod in pods:
            await set_phase(client, pod, "Succeeded")

        async def completed_and_released() -> bool:
            return await phase_of(client, "rc") == "Completed" and (
                await get_or_none(client, SERVICES, "rc-head-svc", "default") is None
            )

        await eventually(completed_and_released)


async def test_a_ray_job_without_its_head_task_is_terminated_at_the_retry_limit() -> None:
    async with running([JOB], max_retries=2) as (client, _):
        await client.create(VCJOBS, framework_job("nohead", {"worker": (2, "worker")}, {"ray": []}))
        job = await client.get(VCJOBS, "nohead", "default")
        group = f"nohead-{job['metadata']['uid']}"
        await eventually(lambda: get_or_none(client, PODGROUPS, group, "default"))
        await admit(client, group)

        async def terminated() -> bool:
            return await phase_of(client, "nohead") == "Terminated"

        await eventually(terminated, timeout=30)
        notes = [(e["reason"], e.get("note", "")) for e in await events_about(client, "nohead")]
        assert ("PluginError", "job nohead doesn't have head task head") in notes
        assert ("ExecuteAction", "Job failed on action SyncJob for retry limit reached") in notes
        assert await job_pods(client, "nohead") == {}


async def test_hcclrank_annotates_each_pods_rank() -> None:
    async with running([JOB]) as (client, _):
        await client.create(
            VCJOBS,
            framework_job("hc", {"master": (1, "main"), "worker": (3, "main")}, {"hcclrank": []}),
        )
        pods = await started_pods(client, "hc", 4)
        ranks = {n: p["metadata"]["annotations"].get("hccl/rankIndex") for n, p in pods.items()}
        assert ranks == {
            "hc-master-0": "0",
            "hc-worker-0": "1",
            "hc-worker-1": "2",
            "hc-worker-2": "3",
        }
