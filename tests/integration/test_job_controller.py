"""The job controller in-process against the embedded API server (real HTTP). There is no
scheduler or kubelet here: the test plays them — it admits the PodGroup (Pending -> Inqueue,
as vulcan's extender does) and writes pod phases (as a kubelet does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.kube.client import COMMANDS, PODGROUPS, PODS, PVCS, VCJOBS, KubeClient, Resource
from flow_controller.job.objects import BindMarker
from tests.fake_webhook import FakeWebhook
from tests.integration.controller_harness import events_about, eventually, get_or_none, running

JOB = "job-controller"


def tf_job(name: str = "tf", **spec: Any) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {"team": "a"}},
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano",
            "queue": "default",
            "tasks": [
                {"name": "ps", "replicas": 1, "template": {"spec": {"containers": [container]}}},
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {"spec": {"containers": [container], "restartPolicy": "Never"}},
                },
            ],
            **spec,
        },
    }


async def job_status(client: KubeClient, name: str = "tf") -> dict[str, Any]:
    job = await client.get(VCJOBS, name, "default")
    return job.get("status") or {}


async def phase_of(client: KubeClient, name: str = "tf") -> str:
    return ((await job_status(client, name)).get("state") or {}).get("phase", "")


async def admit(client: KubeClient, group: str) -> None:
    # PodGroups have no status subresource (as Volcano's CRD): the extender patches the object.
    await client.patch(PODGROUPS, group, {"status": {"phase": "Inqueue"}}, "default")


async def job_pods(client: KubeClient, job: str = "tf") -> dict[str, dict[str, Any]]:
    items = (await client.list(PODS, "default", labelSelector=f"volcano.sh/job-name={job}"))[
        "items"
    ]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


async def set_phase(client: KubeClient, pod: str, phase: str, exit_code: int = 0) -> None:
    status: dict[str, Any] = {"phase": phase}
    if phase in ("Succeeded", "Failed"):
        status["containerStatuses"] = [
            {
                "name": "main",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code}},
            }
        ]
    elif phase == "Running":
        status["containerStatuses"] = [
            {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}
        ]
    await client.patch(PODS, pod, {"status": status}, "default", subresource="status")


async def test_a_job_gets_its_podgroup_then_its_pods_and_completes() -> None:
    async with running([JOB]) as (client, controllers):
        job = await client.create(VCJOBS, tf_job())
        group = f"tf-{job['metadata']['uid']}"
        created = await eventually(lambda: get_or_none(client, PODGROUPS, group, "default"))
        spec = created["spec"]
        assert spec["minMember"] == 3
        assert spec["minTaskMember"] == {"ps": 1, "worker": 2}
        assert spec["queue"] == "default"
        assert spec["minResources"]["cpu"] == "3" and spec["minResources"]["count/pods"] == "3"
        assert created["metadata"]["ownerReferences"][0]["name"] == "tf"
        assert created["metadata"]["labels"] == {"team": "a"}
        assert await eventually(lambda: _is(phase_of(client), "Pending"))
        assert await job_pods(client) == {}  # nothing before the PodGroup is admitted
        await admit(client, group)
        pods = await eventually(lambda: _has(job_pods(client), 3))
        assert set(pods) == {"tf-ps-0", "tf-worker-0", "tf-worker-1"}
        worker = pods["tf-worker-1"]
        notes, labels = worker["metadata"]["annotations"], worker["metadata"]["labels"]
        assert notes["scheduling.k8s.io/group-name"] == group
        assert notes["volcano.sh/task-spec"] == "worker" and notes["volcano.sh/task-index"] == "1"
        assert notes["volcano.sh/job-name"] == "tf" and notes["volcano.sh/job-version"] == "0"
        assert notes["volcano.sh/queue-name"] == "default"
        assert labels["volcano.sh/job-name"] == "tf" and labels["volcano.sh/task-spec"] == "worker"
        assert worker["spec"]["schedulerName"] == "volcano"
        assert worker["metadata"]["ownerReferences"][0]["kind"] == "Job"
        for name in pods:
            await set_phase(client, name, "Running")
        assert await eventually(lambda: _is(phase_of(client), "Running"))
        for name in pods:
            await set_phase(client, name, "Succeeded")
        assert await eventually(lambda: _is(phase_of(client), "Completed"))
        status = await job_status(client)
        assert status["succeeded"] == 3 and status["minAvailable"] == 3
        assert status["taskStatusCount"]["worker"]["phase"] == {"Succeeded": 2}
        assert [c["status"] for c in status["conditions"]] == ["Pending", "Running", "Completed"]
        registry = controllers.manager.metrics.registry
        completed = registry.get_sample_value(
            "volcano_job_completed_phase_count", {"job_name": "tf", "queue_name": "default"}
        )
        assert completed == 1


async def _ours_and_theirs(
    client: KubeClient,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Two 3-pod jobs, one of vulcan's scheduler and one of another, both admitted: the pods
    their controller made (ours, theirs)."""
    ours = await client.create(VCJOBS, tf_job())
    theirs = await client.create(VCJOBS, tf_job("other", schedulerName="other-scheduler"))
    for job in (ours, theirs):
        group = f"{job['metadata']['name']}-{job['metadata']['uid']}"
        await eventually(lambda g=group: get_or_none(client, PODGROUPS, g, "default"))
        await admit(client, group)
    return (
        await eventually(lambda: _has(job_pods(client), 3)),
        await eventually(lambda: _has(job_pods(client, "other"), 3)),
    )


async def test_pods_vulcan_schedules_are_created_behind_the_queue_allocation_gate() -> None:
    """`--queue-allocation-gate`: the pods of jobs whose schedulerName vulcan serves carry
    the gate from creation (the only time a gate can be added); others do not."""
    async with running([JOB], flow={"gated_schedulers": frozenset({"volcano"})}) as (client, _):
        gated, free = await _ours_and_theirs(client)
        for pod in gated.values():
            assert pod["spec"]["schedulingGates"] == [
                {"name": "scheduling.volcano.sh/queue-allocation-gate"}
            ]
            (condition,) = pod["status"]["conditions"]
            assert (condition["type"], condition["reason"]) == ("PodScheduled", "SchedulingGated")
        for pod in free.values():
            assert not pod["spec"].get("schedulingGates")


async def test_with_markers_every_job_pod_is_gated() -> None:
    """With `--pod-resource-markers` the cluster's own scheduler sends every Job pod to
    vulcan's extender, whatever its schedulerName."""
    flow = {"gated_schedulers": frozenset({"volcano"}), "pod_markers": ("vulcan.sh/managed",)}
    async with running([JOB], flow=flow) as (client, _):
        job = await client.create(VCJOBS, tf_job(schedulerName="default-scheduler"))
        group = f"tf-{job['metadata']['uid']}"
        await eventually(lambda: get_or_none(client, PODGROUPS, group, "default"))
        await admit(client, group)
        pods = await eventually(lambda: _has(job_pods(client), 3))
        for pod in pods.values():
            assert pod["spec"]["schedulingGates"] == [
                {"name": "scheduling.volcano.sh/queue-allocation-gate"}
            ]


async def test_with_the_bind_marker_the_pods_vulcan_schedules_carry_it_from_creation() -> None:
    """`--bind-marker` (second-scheduler install): the pods of jobs whose schedulerName vulcan
    serves are created with the bind entry's marker, so their binds reach the gang barrier;
    others get none (their scheduler would count it as a resource no node has)."""
    marker = BindMarker("vulcan.sh/managed-bind", frozenset({"volcano"}))
    async with running([JOB], flow={"bind_marker": marker}) as (client, _):
        marked, unmarked = await _ours_and_theirs(client)
        for pod in marked.values():
            resources = pod["spec"]["containers"][0]["resources"]
            assert resources["limits"]["vulcan.sh/managed-bind"] == "1"
            assert resources["requests"]["vulcan.sh/managed-bind"] == "1"  # defaulted
        for pod in unmarked.values():
            limits = pod["spec"]["containers"][0].get("resources", {}).get("limits") or {}
            assert "vulcan.sh/managed-bind" not in limits


async def test_pod_failed_restart_job_retries_until_max_retry_then_fails() -> None:
    async with running([JOB]) as (client, _):
        job = await client.create(
            VCJOBS,
            tf_job(maxRetry=2, policies=[{"event": "PodFailed", "action": "RestartJob"}]),
        )
        uid = job["metadata"]["uid"]
        for attempt in range(2):
            await eventually(lambda: get_or_none(client, PODGROUPS, f"tf-{uid}", "default"))
            await eventually(lambda: _admitted(client, f"tf-{uid}"))
            pods = await eventually(lambda: _has(job_pods(client), 3))
            assert {
                p["metadata"]["annotations"]["volcano.sh/job-version"] for p in pods.values()
            } == {str(attempt)}
            await set_phase(client, "tf-worker-0", "Failed", exit_code=3)
            await eventually(
                lambda n=attempt: _status_is(client, lambda s: s.get("retryCount") == n + 1)
            )
            # Everything of the attempt goes: pods (as the kubelet would confirm) and group.
            for name in list(await job_pods(client)):
                await client.delete(PODS, name, "default", grace_period=0)
        assert await eventually(lambda: _is(phase_of(client), "Failed"), timeout=20)
        status = await job_status(client)
        assert status["retryCount"] == 2 and status["version"] == 2
        events = await events_about(client, "tf")
        assert any(e["reason"] == "ExecuteAction" and "RestartJob" in e["note"] for e in events)


async def test_abort_and_resume_commands() -> None:
    async with running([JOB]) as (client, _):
        job = await client.create(VCJOBS, tf_job())
        uid = job["metadata"]["uid"]
        await eventually(lambda: get_or_none(client, PODGROUPS, f"tf-{uid}", "default"))
        await admit(client, f"tf-{uid}")
        await eventually(lambda: _has(job_pods(client), 3))
        await client.create(COMMANDS, _command("abort", "AbortJob", uid))
        # Aborting while its pods go (pods without a node go at once), then Aborted.
        assert await eventually(lambda: _is(phase_of(client), "Aborted"))
        status = await job_status(client)
        assert [c["status"] for c in status["conditions"]][-2:] == ["Aborting", "Aborted"]
        assert await job_pods(client) == {}
        assert await get_or_none(client, COMMANDS, "abort", "default") is None  # consumed
        await client.create(COMMANDS, _command("resume", "ResumeJob", uid))
        await eventually(lambda: get_or_none(client, PODGROUPS, f"tf-{uid}", "default"))
        await eventually(lambda: _admitted(client, f"tf-{uid}"))
        await eventually(lambda: _has(job_pods(client), 3))
        status = await job_status(client)
        assert status["retryCount"] == 0  # a resume is no retry (Volcano counts it: #3067)


def _command(name: str, action: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": name, "namespace": "default"},
        "action": action,
        "target": {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "tf",
            "uid": uid,
        },
    }


async def _is(value: Any, expected: Any) -> bool:
    return await value == expected


async def _has(pods: Any, count: int) -> Any:
    found = await pods
    return found if len(found) == count else None


async def _admitted(client: KubeClient, group: str) -> bool:
    current = await get_or_none(client, PODGROUPS, group, "default")
    if current is None:
        return False
    if (current.get("status") or {}).get("phase") != "Inqueue":
        await admit(client, group)
    return True


async def _status_is(client: KubeClient, predicate: Any) -> bool:
    return bool(predicate(await job_status(client)))


async def test_a_restarted_controller_carries_on_without_duplicates() -> None:
    async with running([JOB]) as (client, controllers):
        job = await client.create(VCJOBS, tf_job())
        uid = job["metadata"]["uid"]
        await eventually(lambda: get_or_none(client, PODGROUPS, f"tf-{uid}", "default"))
        await admit(client, f"tf-{uid}")
        before = await eventually(lambda: _has(job_pods(client), 3))
        await controllers.restart()  # a new term: everything rebuilt from the API server
        for name in before:
            await set_phase(client, name, "Running")
        assert await eventually(lambda: _is(phase_of(client), "Running"))
        after = await job_pods(client)
        assert {n: p["metadata"]["uid"] for n, p in after.items()} == {
            n: p["metadata"]["uid"] for n, p in before.items()
        }
        for name in after:
            await set_phase(client, name, "Succeeded")
        assert await eventually(lambda: _is(phase_of(client), "Completed"))
        status = await job_status(client)
        assert status["succeeded"] == 3 and status["version"] == 0


async def test_a_policy_timeout_delays_its_action_and_a_recovery_cancels_it() -> None:
    policy = {"event": "PodFailed", "action": "RestartJob", "timeout": "3s"}
    async with running([JOB]) as (client, controllers):
        job = await client.create(VCJOBS, tf_job(policies=[policy]))
        uid = job["metadata"]["uid"]
        await eventually(lambda: get_or_none(client, PODGROUPS, f"tf-{uid}", "default"))
        await admit(client, f"tf-{uid}")
        pods = await eventually(lambda: _has(job_pods(client), 3))
        for name in pods:
            await set_phase(client, name, "Running")
        assert await eventually(lambda: _is(phase_of(client), "Running"))
        assert controllers.manager is not None
        delays = controllers.manager.controllers[JOB].main.reconciler.events.delays
        # Failed, then running again (restartPolicy OnFailure) within the timeout: no restart.
        await set_phase(client, "tf-worker-0", "Failed", exit_code=1)
        await eventually(lambda: _true(len(delays) == 1))
        await set_phase(client, "tf-worker-0", "Running")
        await eventually(lambda: _true(len(delays) == 0))
        assert (await job_status(client)).get("retryCount", 0) == 0
        # Failed for good: the action runs when the timeout ends.
        await set_phase(client, "tf-worker-1", "Failed", exit_code=1)
        await eventually(lambda: _status_is(client, lambda s: s.get("retryCount") == 1))
        events = await events_about(client, "tf")
        assert any(e["note"] == "Execute action RestartJob after 3s" for e in events)


async def _true(value: bool) -> bool:
    return value


async def test_volumes_claims_are_created_named_and_mounted() -> None:
    async with running([JOB]) as (client, _):
        volumes = [
            {
                "mountPath": "/data",
                "volumeClaim": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
            {"mountPath": "/models", "volumeClaimName": "shared-models"},
        ]
        job = await client.create(VCJOBS, tf_job(volumes=volumes))
        uid = job["metadata"]["uid"]
        # The named claim does not exist: the job waits, and says why.
        await eventually(
            lambda: _true_async(
                events_about(client, "tf"), lambda es: any(e["reason"] == "PVCError" for e in es)
            )
        )
        assert await get_or_none(client, PODGROUPS, f"tf-{uid}", "default") is None
        await client.create(
            PVCS,
            {
                "metadata": {"name": "shared-models", "namespace": "default"},
                "spec": {
                    "accessModes": ["ReadOnlyMany"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        group = await eventually(
            lambda: get_or_none(client, PODGROUPS, f"tf-{uid}", "default"), timeout=20
        )
        assert group is not None
        spec = (await client.get(VCJOBS, "tf", "default"))["spec"]
        generated = spec["volumes"][0]["volumeClaimName"]
        assert generated.startswith("tf-pvc-") and len(generated) == len("tf-pvc-") + 12
        claim = await client.get(PVCS, generated, "default")
        assert claim["metadata"]["ownerReferences"][0]["name"] == "tf"
        await admit(client, f"tf-{uid}")
        pods = await eventually(lambda: _has(job_pods(client), 3))
        pod_spec = pods["tf-ps-0"]["spec"]
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod_spec["volumes"]}
        assert claims == {generated, "shared-models"}
        mounts = {m["mountPath"] for m in pod_spec["containers"][0]["volumeMounts"]}
        assert mounts == {"/data", "/models"}
        status = await job_status(client)
        assert status["controlledResources"][f"volume-pvc-{generated}"] == generated


async def _true_async(value: Any, predicate: Any) -> bool:
    return bool(predicate(await value))


VALIDATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    False,
    "ValidatingWebhookConfiguration",
)


async def test_a_job_whose_pods_cannot_be_created_is_terminated_at_the_retry_limit(
    tmp_path: Path,
) -> None:
    """Volcano's --max-requeue-num: a sync that keeps failing (here a policy webhook denies
    every pod of the job) ends in TerminateJob, with the failed action said in an
    ExecuteAction event, instead of retrying for ever."""
    policy = FakeWebhook(tmp_path)
    policy.respond = lambda req: {
        "allowed": False,
        "status": {"code": 403, "message": "pods of job tf are not allowed here"},
    }
    await policy.start()
    try:
        async with running([JOB], max_retries=3) as (client, _):
            await client.create(VALIDATING_WEBHOOKS, deny_job_pods(policy, "tf"))
            job = await client.create(VCJOBS, tf_job())
            group = f"tf-{job['metadata']['uid']}"
            await eventually(lambda: get_or_none(client, PODGROUPS, group, "default"))
            await admit(client, group)
            await eventually(lambda: _phase_is(client, "Terminated"), timeout=30)
            events = await events_about(client, "tf")
            reasons = [(e["reason"], e.get("note", "")) for e in events]
            assert (
                "ExecuteAction",
                "Job failed on action SyncJob for retry limit reached",
            ) in reasons
            # Volcano's recordJobEvent type, and no FailedSync: the job was terminated, not
            # abandoned.
            assert [e["type"] for e in events if "retry limit reached" in e.get("note", "")] == [
                "Normal"
            ]
            assert "FailedSync" not in [r for r, _ in reasons]
            assert any(r == "FailedCreate" and "not allowed here" in n for r, n in reasons)
            assert await job_pods(client) == {}
            # The kill released the job's PodGroup.
            await eventually(lambda: _gone(client, PODGROUPS, group))
    finally:
        await policy.stop()


def deny_job_pods(policy: FakeWebhook, job: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "policy-engine"},
        "webhooks": [
            {
                "name": "pods.policy.example.com",
                "clientConfig": {"url": policy.url + "/validate", "caBundle": policy.ca_bundle},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
                "objectSelector": {"matchLabels": {"volcano.sh/job-name": job}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


async def _phase_is(client: KubeClient, phase: str) -> bool:
    return await phase_of(client) == phase


async def _gone(client: KubeClient, resource: Resource, name: str) -> bool:
    return await get_or_none(client, resource, name, "default") is None


async def test_a_finished_job_deletes_its_podgroup_once() -> None:
    """Each later sync of a Completed job (its pods' events) leaves its PodGroup alone once it
    is gone: no DELETE answered 404 every time (a real soak: 117 for one job)."""
    async with running([JOB]) as (client, _):
        job = await client.create(VCJOBS, tf_job())
        group = f"tf-{job['metadata']['uid']}"
        await eventually(lambda: get_or_none(client, PODGROUPS, group, "default"))
        await admit(client, group)
        pods = await eventually(lambda: _has(job_pods(client), 3))
        for name in pods:
            await set_phase(client, name, "Succeeded")
        assert await eventually(lambda: _is(phase_of(client), "Completed"))
        assert await eventually(lambda: _is(get_or_none(client, PODGROUPS, group, "default"), None))
        deletes: list[tuple[Any, ...]] = []
        delete = client.delete

        async def counted(resource: Resource, *args: Any, **kwargs: Any) -> Any:
            if resource == PODGROUPS:
                deletes.append(args)
            return await delete(resource, *args, **kwargs)

        client.delete = counted  # type: ignore[method-assign]
        for round_ in range(3):  # each pod event syncs the finished job again
            for name in pods:
                await client.patch(
                    PODS, name, {"metadata": {"labels": {"r": str(round_)}}}, "default"
                )
        seen = await eventually(lambda: _is(phase_of(client), "Completed"))
        assert seen and deletes == []
