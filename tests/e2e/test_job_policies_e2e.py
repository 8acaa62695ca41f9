"""Volcano Job lifecycle policies end to end on `vulcan sim up --with-extender
--with-controllers`: pods exit as their `vulcan.sh/sim-*` annotations say (set in the task
templates, which Volcano copies onto the pods), and the job reacts as Volcano's would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import SimCluster, start_cluster, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-job-policies"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=8,memory=32Gi",
        "--with-extender",
        "--with-controllers",
        "--pod-eviction-timeout",
        "1",
        "--node-monitor-grace-period",
        "2s",
    )


def task(name: str, replicas: int, duration: str = "2s", exit_code: int = 0, **fields: Any) -> Any:
    notes = {"vulcan.sh/sim-duration": duration, "vulcan.sh/sim-exit-code": str(exit_code)}
    container = {"name": name, "image": "x", "resources": {"requests": {"cpu": "1"}}}
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": notes},
            "spec": {"containers": [container], "restartPolicy": "Never"},
        },
        **fields,
    }


def submit(cluster: SimCluster, name: str, tasks: list[Any], **spec: Any) -> None:
    minimum = spec.pop("minAvailable", sum(t["replicas"] for t in tasks))
    cluster.apply(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {"minAvailable": minimum, "schedulerName": "volcano", "tasks": tasks, **spec},
        }
    )


def status(cluster: SimCluster, name: str) -> dict[str, Any]:
    job = cluster.get(f"/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/{name}") or {}
    return job.get("status") or {}


def phase(cluster: SimCluster, name: str) -> str:
    return (status(cluster, name).get("state") or {}).get("phase", "")


def pods(cluster: SimCluster, name: str) -> list[dict[str, Any]]:
    return cluster.pods(selector=f"volcano.sh/job-name={name}")


def test_pod_failed_restart_job_ends_failed_after_max_retry(cluster: SimCluster) -> None:
    submit(
        cluster,
        "crashy",
        [task("worker", 2, duration="1s", exit_code=3)],
        maxRetry=2,
        policies=[{"event": "PodFailed", "action": "RestartJob"}],
    )
    versions: set[str] = set()

    def failed() -> bool:
        versions.update(
            p["metadata"]["annotations"]["volcano.sh/job-version"] for p in pods(cluster, "crashy")
        )
        return phase(cluster, "crashy") == "Failed"

    wait_for("crashy to fail", failed, 120)
    assert status(cluster, "crashy")["retryCount"] == 2
    assert versions == {"0", "1"}  # re-created with a new job-version for the retry
    # The last attempt's failed pods are kept for inspection (Volcano's last-retry rule).
    assert {p["status"]["phase"] for p in pods(cluster, "crashy")} == {"Failed"}


def test_task_completed_complete_job_finishes_when_the_master_does(cluster: SimCluster) -> None:
    submit(
        cluster,
        "launcher",
        [
            task(
                "master",
                1,
                duration="2s",
                policies=[{"event": "TaskCompleted", "action": "CompleteJob"}],
            ),
            task("worker", 2, duration="forever"),
        ],
    )
    wait_for("launcher to complete", lambda: phase(cluster, "launcher") == "Completed", 60)
    # The workers (sshd, forever) were killed: only the master's pod is left.
    wait_for(
        "the workers to be gone",
        lambda: [p["metadata"]["name"] for p in pods(cluster, "launcher")] == ["launcher-master-0"],
        30,
    )


def test_min_success_completes_without_waiting_for_the_rest(cluster: SimCluster) -> None:
    submit(
        cluster,
        "enough",
        [task("quick", 2, duration="2s"), task("slow", 1, duration="forever")],
        minSuccess=2,
    )
    wait_for("enough to complete", lambda: phase(cluster, "enough") == "Completed", 60)
    assert status(cluster, "enough")["succeeded"] == 2


def test_pod_evicted_restart_task_recreates_that_task_only(cluster: SimCluster) -> None:
    submit(
        cluster,
        "evicted",
        [task("ps", 1, duration="forever"), task("worker", 2, duration="forever")],
        policies=[{"event": "PodEvicted", "action": "RestartTask"}],
    )
    wait_for("evicted to run", lambda: phase(cluster, "evicted") == "Running", 60)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(cluster, "evicted")}
    cluster.kubectl("delete", "pod", "evicted-worker-0", "--wait=false")
    wait_for(
        "a retry",
        lambda: status(cluster, "evicted").get("retryCount") == 1,
        30,
    )
    wait_for("evicted to run again", lambda: phase(cluster, "evicted") == "Running", 60)
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(cluster, "evicted")}
    assert after["evicted-ps-0"] == before["evicted-ps-0"]  # the other task untouched
    assert after["evicted-worker-1"] != before["evicted-worker-1"]  # the whole task restarted
    cluster.kubectl("delete", "vcjob", "evicted")


def test_a_node_failure_restarts_the_job(cluster: SimCluster) -> None:
    """The node's pods are evicted by its NoExecute taint. As on a real cluster they stay
    Terminating, in their last phase, while their node is down (no kubelet confirms): no
    PodFailed; when the node is back they go (PodEvicted -> RestartJob), and the job runs again
    as a new version."""
    submit(
        cluster,
        "survivor",
        [task("worker", 2, duration="forever")],
        policies=[{"events": ["PodFailed", "PodEvicted"], "action": "RestartJob"}],
    )
    wait_for("survivor to run", lambda: phase(cluster, "survivor") == "Running", 60)
    node = next(p["spec"]["nodeName"] for p in pods(cluster, "survivor"))
    cluster.kubectl("annotate", "node", node, "vulcan.sh/sim-node-state=failed")
    try:
        lost = wait_for(
            "its pods on the failed node to be evicted",
            lambda: [
                p
                for p in pods(cluster, "survivor")
                if p["spec"].get("nodeName") == node and p["metadata"].get("deletionTimestamp")
            ],
            60,
        )
        assert {p["status"]["phase"] for p in lost} == {"Running"}
    finally:
        cluster.kubectl("annotate", "node", node, "vulcan.sh/sim-node-state-")
    try:
        wait_for(
            "survivor to run again as version 1",
            lambda: (
                phase(cluster, "survivor") == "Running"
                and status(cluster, "survivor").get("retryCount") == 1
                and {
                    p["metadata"]["annotations"]["volcano.sh/job-version"]
                    for p in pods(cluster, "survivor")
                }
                == {"1"}
            ),
            90,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_diagnosis(cluster, 'survivor')}") from None
    cluster.kubectl("delete", "vcjob", "survivor")


def _diagnosis(cluster: SimCluster, name: str) -> str:
    """What a stuck job looks like (this test once timed out in CI; say where it stopped)."""
    lines = [f"job status: {status(cluster, name)}"]
    for pod in pods(cluster, name):
        meta, pod_status = pod["metadata"], pod.get("status") or {}
        lines.append(
            f"pod {meta['name']} v{meta['annotations'].get('volcano.sh/job-version')} "
            f"node={pod['spec'].get('nodeName')} phase={pod_status.get('phase')} "
            f"deleting={bool(meta.get('deletionTimestamp'))} "
            f"conditions={pod_status.get('conditions')} "
            f"annotations={ {k: v for k, v in meta['annotations'].items() if 'vulcan' in k} }"
        )
    groups = cluster.get("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups")
    for group in groups.get("items") or ():
        if group["metadata"]["name"].startswith(f"{name}-"):
            lines.append(f"podgroup {group['metadata']['name']}: {group.get('status')}")
    for event in cluster.events(name)[-15:]:
        lines.append(f"event {event.get('reason')}: {event.get('note')}")
    logs = cluster.state / "logs"
    for component in ("controllers", "extender", "scheduler", "kubelets"):
        for path in sorted(logs.glob(f"*{component}*")):
            tail = path.read_text(errors="replace").splitlines()[-20:]
            lines.append(f"--- {path.name} (last 20 lines)")
            lines.extend(tail)
    return "\n".join(lines)


def test_abort_and_resume_commands_issued_with_kubectl(cluster: SimCluster) -> None:
    submit(cluster, "pausable", [task("worker", 2, duration="forever")])
    wait_for("pausable to run", lambda: phase(cluster, "pausable") == "Running", 60)
    uid = cluster.get("/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/pausable")[
        "metadata"
    ]["uid"]

    def command(name: str, action: str) -> None:
        cluster.apply(
            {
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {"name": name},
                "action": action,
                "target": {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": "pausable",
                    "uid": uid,
                },
            }
        )

    command("suspend", "AbortJob")
    wait_for("pausable aborted", lambda: phase(cluster, "pausable") == "Aborted", 60)
    assert not [p for p in pods(cluster, "pausable") if p["status"].get("phase") == "Running"]
    assert cluster.kubectl("get", "commands", "-o", "name").strip() == ""  # consumed
    command("resume", "ResumeJob")
    wait_for("pausable running again", lambda: phase(cluster, "pausable") == "Running", 60)
    assert status(cluster, "pausable")["retryCount"] == 0  # a resume is no retry
    reasons = {e["reason"] for e in cluster.events("pausable")}
    assert {"CommandIssued", "ExecuteAction"} <= reasons
    cluster.kubectl("delete", "vcjob", "pausable")
