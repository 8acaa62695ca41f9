"""`vulcan demo job`: a Volcano Job on the embedded cluster, from submission to clean-up.

The TensorFlow parameter-server job of Volcano's documents (1 ps + 2 workers, the `env` and
`svc` plugins, `TaskCompleted -> CompleteJob` on the workers), with `ttlSecondsAfterFinished`:
the job controller makes its PodGroup, vulcan's extender enqueues it, the pods are created and
placed as a gang, run, the job completes, and the TTL deletes it with its pods. One line per
change of what a user would watch (`kubectl get vcjob,pg,pods`); exit 0 once it is all gone.
"""

from __future__ import annotations

from typing import Any

from core.kube.client import CONFIGMAPS, PODGROUPS, PODS, VCJOBS, ApiError, KubeClient
from vulcan.demo_cluster import Watch, controllers_demo, run_demo

JOB = "tensorflow-benchmark"
TTL = 3
RUN_TIME = "3s"
TIMEOUT = 120.0


def tensorflow_job() -> dict[str, Any]:
    def task(name: str, replicas: int, **extra: Any) -> dict[str, Any]:
        container = {
            "name": "tensorflow",
            "image": "volcanosh/example-tf:0.0.1",
            "command": ["sh", "-c", f"python tf_cnn_benchmarks.py --job_name={name}"],
            "ports": [{"containerPort": 2222, "name": "tfjob-port"}],
            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
        }
        return {
            "name": name,
            "replicas": replicas,
            "template": {
                "metadata": {"annotations": {"vulcan.sh/sim-duration": RUN_TIME}},
                "spec": {"containers": [container], "restartPolicy": "OnFailure"},
            },
            **extra,
        }

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": JOB, "namespace": "default"},
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano",
            "ttlSecondsAfterFinished": TTL,
            "plugins": {"env": [], "svc": []},
            "tasks": [
                task("ps", 1),
                task("worker", 2, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
            ],
        },
    }


async def _get(client: KubeClient, resource: Any, name: str) -> Any:
    try:
        return await client.get(resource, name, "default")
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def _state(client: KubeClient) -> tuple[str, bool]:
    """One line of what `kubectl get vcjob,pg,pods` shows, and whether the job is gone."""
    job = await _get(client, VCJOBS, JOB)
    if job is None:
        return "job deleted (ttlSecondsAfterFinished), with its pods", True
    phase = ((job.get("status") or {}).get("state") or {}).get("phase") or "-"
    group = await _get(client, PODGROUPS, f"{JOB}-{job['metadata']['uid']}")
    group_phase = ((group or {}).get("status") or {}).get("phase") or ("-" if group else "none")
    pods = (await client.list(PODS, "default", labelSelector=f"volcano.sh/job-name={JOB}"))["items"]
    counts: dict[str, int] = {}
    for pod in pods:
        state = pod.get("status", {}).get("phase", "Pending")
        if pod["spec"].get("nodeName") and state == "Pending":
            state = "Bound"
        if pod["metadata"].get("deletionTimestamp"):
            state = "Terminating"
        counts[state] = counts.get(state, 0) + 1
    shown = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items())) or "none"
    return f"job {phase:<10} podgroup {group_phase:<9} pods: {shown}", False


async def _hosts(client: KubeClient) -> str:
    config = await _get(client, CONFIGMAPS, f"{JOB}-svc")
    data = (config or {}).get("data") or {}
    return data.get("VC_WORKER_HOSTS", "")


async def _job_demo() -> int:
    async def body(watch: Watch) -> bool:
        await watch.client.create(VCJOBS, tensorflow_job())
        watch.say("kubectl create -f tensorflow-job.yaml")
        hosts = ""

        async def look() -> tuple[str, bool | None]:
            line, gone = await _state(watch.client)
            return line, True if gone else None

        async def show_hosts() -> None:
            nonlocal hosts
            if not hosts and (hosts := await _hosts(watch.client)):
                print(f"           svc plugin: /etc/volcano/worker.host lists {hosts}")

        return await watch.follow(look, TIMEOUT, after=show_hosts)

    return await controllers_demo(
        "job",
        f"vulcan demo job: Volcano's TensorFlow job (1 ps + 2 workers, plugins env and svc, "
        f"workers' TaskCompleted -> CompleteJob, ttlSecondsAfterFinished {TTL}) on the "
        "embedded cluster with vulcan's extender and controllers.",
        body,
        "the job ran, completed and was cleaned up",
    )


def run_job() -> int:
    return run_demo(_job_demo)
