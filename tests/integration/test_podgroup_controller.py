"""The PodGroup controller against the embedded API server: bare pods, ReplicaSets, StatefulSets,
scaling to zero, namespace queues, owners' garbage collection, restarts; and `vulcan
controllers` as a process (announcement, probes, metrics, Lease, clean stop)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import Configuration

from core.controller.manager import ControllerManager
from core.controller.selection import PODGROUP
from core.kube.client import LEASES, NAMESPACES, PODGROUPS, PODS, QUEUES, ClientOptions, KubeClient
from core.kube.leader import LeaderElectionConfig
from podgroup_controller.controllers import factories
from podgroup_controller.options import ControllerOptions
from podgroup_controller.podgroups import BATCH_JOBS, REPLICASETS, STATEFULSETS
from sim.apiserver.server import EmbeddedApiServer
from tests.helpers import announced_url, http_get, sim_apiserver_process, until, vulcan_process
from tests.integration.controller_harness import (
    events_about,
    eventually,
    get_or_none,
    running,
)

GROUP = "scheduling.k8s.io/group-name"
MIN_MEMBER = "scheduling.volcano.sh/group-min-member"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"


def pod_body(
    name: str,
    *,
    owner: dict[str, Any] | None = None,
    cpu: str = "500m",
    scheduler: str = "volcano",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "annotations": annotations or {},
        "labels": labels or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
                }
            ],
        },
    }


def controller_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def workload_body(
    kind: str, name: str, replicas: int, annotations: dict[str, str], api: str = "apps/v1"
) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }


async def group_of(client: KubeClient, name: str, namespace: str = "default") -> Any:
    return await get_or_none(client, PODGROUPS, name, namespace)


async def annotation(client: KubeClient, pod: str, namespace: str = "default") -> str | None:
    obj = await get_or_none(client, PODS, pod, namespace)
    return None if obj is None else (obj["metadata"].get("annotations") or {}).get(GROUP)


async def test_bare_pod_gets_its_own_group() -> None:
    async with running([PODGROUP]) as (client, _):
        pod = await client.create(
            PODS,
            pod_body(
                "solo",
                annotations={QUEUE_NAME: "research", "volcano.sh/preemptable": "false"},
            ),
        )
        uid = pod["metadata"]["uid"]
        name = f"podgroup-{uid}"
        group = await eventually(lambda: group_of(client, name))
        assert group["spec"]["minMember"] == 1
        assert group["spec"]["queue"] == "research"
        assert group["spec"]["minResources"] == {
            "count/pods": "1",
            "cpu": "500m",
            "limits.cpu": "500m",
            "pods": "1",
            "requests.cpu": "500m",
        }
        assert group["status"]["phase"] == "Pending"
        assert group["metadata"]["annotations"] == {"volcano.sh/preemptable": "false"}
        [owner] = group["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "Pod",
            "solo",
            uid,
            True,
        )
        assert await eventually(lambda: annotation(client, "solo")) == name
        events = await eventually(lambda: events_about(client, name))
        assert [(e["type"], e["reason"]) for e in events] == [("Normal", "PodGroupCreated")]
        # The group goes with its pod.
        await client.delete(PODS, "solo", "default", grace_period=0)
        await eventually(lambda: _gone(client, PODGROUPS, name))


async def _gone(client: KubeClient, resource: Any, name: str, namespace: str = "default") -> bool:
    return await get_or_none(client, resource, name, namespace) is None


async def test_pods_that_are_not_ours_are_left_alone() -> None:
    async with running([PODGROUP]) as (client, controllers):
        await client.create(PODS, pod_body("other", scheduler="default-scheduler"))
        await client.create(PODS, pod_body("grouped", annotations={GROUP: "mine"}))
        await client.create(PODS, pod_body("marker"))  # a pod we do handle, created last
        await eventually(lambda: annotation(client, "marker"))
        groups = (await client.list(PODGROUPS, "default"))["items"]
        assert len(groups) == 1
        assert await annotation(client, "other") is None
        assert await annotation(client, "grouped") == "mine"
        assert controllers.manager is not None


async def test_a_volcano_jobs_pods_are_not_watched() -> None:
    # The job controller groups its pods itself; the API server keeps them off this watch.
    async with running([PODGROUP]) as (client, controllers):
        job_pod = pod_body("job-0", labels={"volcano.sh/job-name": "job"})
        await client.create(PODS, job_pod)
        await client.create(PODS, pod_body("bare"))
        await eventually(lambda: annotation(client, "bare"))
        pods = controllers.manager.controllers[PODGROUP].reconciler.pods.items
        assert "default/bare" in pods
        assert "default/job-0" not in pods
        assert await annotation(client, "job-0") is None


async def test_replicaset_with_min_member_three() -> None:
    async with running([PODGROUP]) as (client, controllers):
        rs = await client.create(
            REPLICASETS,
            workload_body(
                "ReplicaSet", "web", 3, {MIN_MEMBER: "3", "volcano.sh/sla-waiting-time": "1h"}
            ),
        )
        ref = controller_ref(rs)
        for i in range(3):
            await client.create(PODS, pod_body(f"web-{i}", owner=ref, cpu="1"))
        name = f"podgroup-{rs['metadata']['uid']}"
        for i in range(3):
            assert await eventually(lambda i=i: annotation(client, f"web-{i}")) == name
        group = await group_of(client, name)
        assert group["spec"]["minMember"] == 3
        assert group["spec"]["minResources"]["cpu"] == "3"
        assert group["spec"]["minResources"]["requests.cpu"] == "3"
        assert group["spec"]["minResources"]["pods"] == "3"
        assert group["spec"]["queue"] == "default"
        assert group["metadata"]["ownerReferences"] == [ref]
        assert group["metadata"]["annotations"] == {"volcano.sh/sla-waiting-time": "1h"}
        assert len((await client.list(PODGROUPS, "default"))["items"]) == 1
        # A changed min-member on the ReplicaSet updates the group.
        await client.patch(
            REPLICASETS, "web", {"metadata": {"annotations": {MIN_MEMBER: "2"}}}, "default"
        )
        group = await eventually(lambda: _with_min_member(client, name, 2))
        assert group["spec"]["minResources"]["cpu"] == "2"
        events = await eventually(lambda: _reasons(client, name, "PodGroupUpdated"))
        assert "spec.minMember" in events[0]["note"]
        # Deleting the ReplicaSet removes the group (garbage collection by ownerReference).
        await client.delete(REPLICASETS, "web", "default")
        await eventually(lambda: _gone(client, PODGROUPS, name))
        assert controllers.manager is not None


async def _with_min_member(client: KubeClient, name: str, members: int) -> Any:
    group = await group_of(client, name)
    return group if group and group["spec"]["minMember"] == members else None


async def _reasons(client: KubeClient, name: str, reason: str, namespace: str = "default") -> Any:
    return [e for e in await events_about(client, name, namespace) if e["reason"] == reason]


async def test_statefulset_update_follows_the_update_revision() -> None:
    async with running([PODGROUP]) as (client, _):
        sts = await client.create(
            STATEFULSETS, workload_body("StatefulSet", "db", 2, {MIN_MEMBER: "2"})
        )
        await client.patch(
            STATEFULSETS,
            "db",
            {"status": {"updateRevision": "db-1"}},
            "default",
            subresource="status",
        )
        ref = controller_ref(sts)
        for i in range(2):
            await client.create(
                PODS,
                pod_body(
                    f"db-{i}", owner=ref, cpu="1", labels={"controller-revision-hash": "db-1"}
                ),
            )
        name = f"podgroup-{sts['metadata']['uid']}"
        await eventually(lambda: annotation(client, "db-1"))
        assert (await group_of(client, name))["spec"]["minResources"]["cpu"] == "2"
        # A rolling update to 2 CPUs a pod: the new revision's first pod updates the group.
        await client.patch(
            STATEFULSETS,
            "db",
            {"status": {"updateRevision": "db-2"}},
            "default",
            subresource="status",
        )
        await client.delete(PODS, "db-1", "default", grace_period=0)
        await client.create(
            PODS,
            pod_body("db-1", owner=ref, cpu="2", labels={"controller-revision-hash": "db-2"}),
        )
        group = await eventually(lambda: _with_cpu(client, name, "4"))
        assert group["spec"]["minMember"] == 2
        # More replicas and a bigger gang: the StatefulSet update alone updates the group.
        await client.patch(
            STATEFULSETS,
            "db",
            {"metadata": {"annotations": {MIN_MEMBER: "3"}}, "spec": {"replicas": 3}},
            "default",
        )
        group = await eventually(lambda: _with_min_member(client, name, 3))
        assert group["spec"]["minResources"]["cpu"] == "6"  # 3 x the db-2 pod's 2 CPUs


async def _with_cpu(client: KubeClient, name: str, cpu: str) -> Any:
    group = await group_of(client, name)
    return group if group and group["spec"]["minResources"].get("cpu") == cpu else None


async def test_scaling_to_zero_deletes_the_group_and_scaling_up_recreates_it() -> None:
    async with running([PODGROUP]) as (client, _):
        rs = await client.create(
            REPLICASETS, workload_body("ReplicaSet", "batch", 2, {MIN_MEMBER: "2"})
        )
        ref = controller_ref(rs)
        for i in range(2):
            await client.create(PODS, pod_body(f"batch-{i}", owner=ref))
        name = f"podgroup-{rs['metadata']['uid']}"
        await eventually(lambda: group_of(client, name))
        await client.patch(REPLICASETS, "batch", {"spec": {"replicas": 0}}, "default")
        await eventually(lambda: _gone(client, PODGROUPS, name))
        assert await eventually(lambda: _reasons(client, "batch", "PodGroupDeleted"))
        for i in range(2):  # what the ReplicaSet controller would do
            await client.delete(PODS, f"batch-{i}", "default", grace_period=0)
        await client.patch(REPLICASETS, "batch", {"spec": {"replicas": 1}}, "default")
        await client.create(PODS, pod_body("batch-2", owner=ref))
        group = await eventually(lambda: group_of(client, name))
        assert group["spec"]["minMember"] == 2
        assert await eventually(lambda: annotation(client, "batch-2")) == name


async def test_namespace_queue_annotation() -> None:
    async with running([PODGROUP]) as (client, _):
        await client.create(
            NAMESPACES,
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "team-a", "annotations": {QUEUE_NAME: "team-a-queue"}},
            },
        )
        plain = await client.create(PODS, pod_body("p", namespace="team-a"))
        own = await client.create(
            PODS, pod_body("q", namespace="team-a", annotations={QUEUE_NAME: "special"})
        )
        for pod, queue in ((plain, "team-a-queue"), (own, "special")):
            name = f"podgroup-{pod['metadata']['uid']}"
            group = await eventually(lambda name=name: group_of(client, name, "team-a"))
            assert group["spec"]["queue"] == queue


async def test_batch_job_owner_read_on_demand() -> None:
    async with running([PODGROUP]) as (client, _):
        job = await client.create(
            BATCH_JOBS, workload_body("Job", "train", 1, {MIN_MEMBER: "4"}, api="batch/v1")
        )
        ref = controller_ref(job)
        await client.create(PODS, pod_body("train-0", owner=ref))
        name = f"podgroup-{job['metadata']['uid']}"
        group = await eventually(lambda: group_of(client, name))
        assert group["spec"]["minMember"] == 4
        assert group["metadata"]["ownerReferences"] == [ref]


async def test_restart_rebuilds_from_the_api_server_and_writes_nothing() -> None:
    async with running([PODGROUP]) as (client, controllers):
        rs = await client.create(
            REPLICASETS, workload_body("ReplicaSet", "svc", 2, {MIN_MEMBER: "2"})
        )
        ref = controller_ref(rs)
        for i in range(2):
            await client.create(PODS, pod_body(f"svc-{i}", owner=ref))
        for i in range(2):
            await eventually(lambda i=i: annotation(client, f"svc-{i}"))
        # A pod created while no controller runs is grouped after the restart.
        await controllers.stop()
        await client.create(PODS, pod_body("svc-late", owner=ref))
        manager = await controllers.restart()
        assert (
            await eventually(lambda: annotation(client, "svc-late"))
            == f"podgroup-{rs['metadata']['uid']}"
        )
        await eventually(lambda: _idle(manager))
        changes = {
            (s.labels["kind"], s.labels["operation"]): s.value
            for metric in manager.metrics.changes.collect()
            for s in metric.samples
            if s.name.endswith("_total")
        }
        # Only the late pod was written; the group existed and was up to date.
        assert changes == {("Pod", "annotated"): 1.0}
        assert len((await client.list(PODGROUPS, "default"))["items"]) == 1


async def _idle(manager: Any) -> bool:
    controller = manager.controllers[PODGROUP]
    return len(controller.queue) == 0 and not controller.queue.in_flight


def test_controllers_process(tmp_path: Path) -> None:
    """`vulcan controllers`: announces its URL, serves probes and metrics, takes the Lease,
    creates the built-in queues, and on SIGTERM exits 0 having released the Lease."""
    kubeconfig = tmp_path / "kubeconfig"
    apiserver, api = sim_apiserver_process(kubeconfig)
    controllers = None
    try:
        controllers = vulcan_process(
            "controllers",
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--log-format",
            "json",
            "--leader-elect-retry-period",
            "200ms",
            "--leader-elect-renew-deadline",
            "1s",
            "--leader-elect-lease-duration",
            "2s",
            "--leader-elect-resource-namespace",
            "kube-system",
        )
        base = announced_url(controllers, "vulcan controllers listening on http://127.0.0.1:")
        assert http_get(f"{base}/healthz")[0] == 200
        assert controllers.stderr is not None
        for line in controllers.stderr:
            if json.loads(line).get("msg") == "informers synced":
                break
        deadline = time.monotonic() + 10
        while (answer := http_get(f"{base}/readyz")) != (200, "ok"):
            assert answer[0] == 503 and time.monotonic() < deadline, answer
            time.sleep(0.05)

        def get(path: str) -> Any:
            with urllib.request.urlopen(api + path, timeout=5) as response:
                return json.loads(response.read())

        lease_path = LEASES.path("kube-system", "vulcan-controllers")
        assert get(lease_path)["spec"]["holderIdentity"]
        # Ready means started: the built-in queues exist (a user's first PodGroup may go).
        assert {"root", "default"} <= {q["metadata"]["name"] for q in get(QUEUES.path())["items"]}
        status, metrics = http_get(f"{base}/metrics")
        assert status == 200 and "vulcan_controller_leader 1.0" in metrics
        controllers.send_signal(signal.SIGTERM)
        assert controllers.wait(timeout=20) == 0
        assert get(lease_path)["spec"]["holderIdentity"] == ""
    finally:
        for process in (controllers, apiserver):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)


async def test_only_the_leader_acts_and_a_standby_takes_over() -> None:
    async with EmbeddedApiServer() as server:
        client = KubeClient(Configuration(host=server.url), ClientOptions(qps=0))
        config = LeaderElectionConfig(
            lease_duration=2.0,
            renew_deadline=1.0,
            retry_period=0.1,
            resource_name="vulcan-controllers",
            resource_namespace="kube-system",
        )
        managers = {
            name: ControllerManager(
                client, {PODGROUP: factories(ControllerOptions())[PODGROUP]}, identity=name
            )
            for name in ("a", "b")
        }
        electors = {
            name: config.elector(client, name, on_started_leading=manager.run)
            for name, manager in managers.items()
        }
        tasks = {"a": asyncio.create_task(electors["a"].run())}
        await until(lambda: managers["a"].ready() == (True, "ok"))
        tasks["b"] = asyncio.create_task(electors["b"].run())
        await until(lambda: electors["b"].leader == "a")
        await client.create(PODS, pod_body("first"))
        assert await eventually(lambda: annotation(client, "first"))
        assert not managers["b"].leading
        assert (
            managers["b"].metrics.registry.get_sample_value(
                "vulcan_controller_object_changes_total", {"kind": "Pod", "operation": "annotated"}
            )
            is None
        )
        await electors["a"].release()  # a clean stop hands over at once
        await tasks.pop("a")
        await until(lambda: managers["b"].ready() == (True, "ok"))
        await client.create(PODS, pod_body("second"))
        assert await eventually(lambda: annotation(client, "second"))
        assert (
            managers["b"].metrics.registry.get_sample_value(
                "vulcan_controller_object_changes_total", {"kind": "Pod", "operation": "annotated"}
            )
            == 1.0
        )
        tasks["b"].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tasks["b"]
        await client.close()
