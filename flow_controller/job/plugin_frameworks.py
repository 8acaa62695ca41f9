"""Volcano's `ray` and `hcclrank` job plugins (pkg/controllers/job/plugins/distributed-framework/
ray and hcclrank), followed from Volcano's code: its docs say little beyond their names."""

from __future__ import annotations

from typing import Any

from core.api import keys
from core.api.batch import TaskSpec
from flow_controller.job.plugins import (
    JobContext,
    Owned,
    Plugin,
    PluginFailed,
    _add_port,
    _containers,
    _int,
    _pod_index,
    _pod_task,
    _task,
)

RAY_PORTS = (("gcs", "port", 6379), ("dashboard", "dashboardPort", 8265))
RAY_PORTS += (("client-server", "clientPort", 10001),)


class Ray(Plugin):
    """Volcano's `ray` (distributed-framework/ray): the head task's container runs `ray start
    --head` with the GCS, dashboard and client-server ports opened; each worker container runs
    `ray start --address=<head pod's DNS name>:<port>` (the svc plugin's `<job>-head-0.<job>`,
    as Volcano's code does — not the head Service); Service `<job>-head-svc` exposes the head's
    three ports. Flags: --head, --headContainer, --worker, --workerContainer (task and container
    names, default head/head/worker/worker), --port, --dashboardPort, --clientPort."""

    def _ports(self) -> list[tuple[str, int]]:
        return [(name, _int(self.flags.get(flag) or "", d)) for name, flag, d in RAY_PORTS]

    def _head(self) -> str:
        return self.flag("head", "head")

    def names(self, ctx: JobContext) -> list[tuple[str, str]]:
        return [("Service", f"{ctx.name}-head-svc")]

    def on_pod_create(self, pod: dict[str, Any], ctx: JobContext) -> None:
        head = _task(ctx, self._head())
        if head is None:
            raise PluginFailed(f"job {ctx.name} doesn't have head task {self._head()}")
        task = _pod_task(pod)
        (_, gcs), (_, dashboard), (_, client) = self._ports()
        for container in _containers(pod, init=False):
            name = container.get("name")
            if task == head.name and name == self.flag("headContainer", "head"):
                for port_name, port in self._ports():
                    _add_port(container, port_name, port)
                container["command"] = [
                    "sh",
                    "-c",
                    f"ray start --head --block --dashboard-host=0.0.0.0 --port={gcs} "
                    f"--dashboard-port={dashboard} --ray-client-server-port={client}",
                ]
            if task == self.flag("worker", "worker") and name == self.flag(
                "workerContainer", "worker"
            ):
                address = _head_address(ctx, head)
                container["command"] = ["sh", "-c", f"ray start --block --address={address}:{gcs}"]

    def objects(self, ctx: JobContext) -> list[Owned]:
        selector = {
            keys.JOB_NAME: ctx.name,
            keys.JOB_NAMESPACE: ctx.namespace,
            keys.TASK_SPEC: self._head(),
        }
        ports = [
            {"name": name, "port": port, "targetPort": name, "protocol": "TCP"}
            for name, port in self._ports()
        ]
        meta = {"namespace": ctx.namespace, "ownerReferences": [dict(ctx.owner)]}
        return [
            Owned(
                "Service",
                {
                    "metadata": {"name": f"{ctx.name}-head-svc", **meta},
                    "spec": {"selector": selector, "ports": ports},
                },
            )
        ]


def _head_address(ctx: JobContext, head: TaskSpec) -> str:
    """Volcano's generateHeadAddr: the template's hostname (else pod `<job>-<head>-0`) and
    subdomain (else the job's name)."""
    pod_spec = (head.template or {}).get("spec") or {}
    host = pod_spec.get("hostname") or f"{ctx.name}-{head.name}-0"
    return f"{host}.{pod_spec.get('subdomain') or ctx.name}"


HCCL_RANK = "hccl/rankIndex"


class HcclRank(Plugin):
    """Volcano's `hcclrank` (distributed-framework/hcclrank): annotation `hccl/rankIndex` on
    each pod of the master and worker tasks (--master, --worker; default master/worker) — the
    pod's own `RANK` environment variable when a container sets one, else the master's task
    index, or a worker's index plus the master task's replicas. A rank already annotated is
    kept."""

    def on_pod_create(self, pod: dict[str, Any], ctx: JobContext) -> None:
        annotations = pod["metadata"].setdefault("annotations", {})
        if annotations.get(HCCL_RANK):
            return
        rank = _env_value(pod, "RANK")
        if rank:
            annotations[HCCL_RANK] = rank
            return
        task, master = _pod_task(pod), self.flag("master", "master")
        if task == master:
            annotations[HCCL_RANK] = str(_pod_index(pod))
        elif task == self.flag("worker", "worker"):
            master_task = _task(ctx, master)
            offset = master_task.replicas if master_task is not None else 0
            annotations[HCCL_RANK] = str(offset + _pod_index(pod))


def _env_value(pod: dict[str, Any], name: str) -> str:
    """The first `name` variable of the pod's containers (Volcano's getEnv: a literal value;
    one from valueFrom reads as empty)."""
    for container in _containers(pod, init=False):
        for env in container.get("env") or ():
            if env.get("name") == name:
                return str(env.get("value") or "")
    return ""
