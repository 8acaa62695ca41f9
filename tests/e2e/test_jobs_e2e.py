"""Volcano Jobs end to end: users' Volcano YAML (examples/, tests/fixtures/volcano) created
unchanged with kubectl on `vulcan sim up --with-extender --with-controllers` runs to
Completed: the job controller makes the PodGroup, vulcan's extender admits it, the pods are
created, scheduled as a gang, run (2 s each here) and the job completes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import SimCluster, start_cluster, wait_for
from tests.e2e.test_explain_e2e import explain
from tests.helpers import volcano_fixture

JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-jobs"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=32,memory=128Gi,nvidia.com/gpu=8",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "2s",
    )


def job(cluster: SimCluster, name: str) -> dict[str, Any]:
    return cluster.get(f"/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/{name}") or {}


def phase(cluster: SimCluster, name: str) -> str:
    return ((job(cluster, name).get("status") or {}).get("state") or {}).get("phase", "")


@pytest.mark.parametrize(
    ("fixture", "name", "pods"),
    [
        ("tensorflow-benchmark.yaml", "tensorflow-benchmark", 3),
        ("mpi-job.yaml", "mpi-job", 3),
        ("lm-mpi-job.yaml", "lm-mpi-job", 4),
        ("elastic-job.yaml", "test-job", 10),
    ],
)
def test_a_volcano_fixture_runs_unchanged_to_completed(
    cluster: SimCluster, fixture: str, name: str, pods: int
) -> None:
    docs = [
        d
        for d in yaml.safe_load_all(volcano_fixture(fixture).read_text())
        if d and d.get("kind") == "Job"
    ]
    cluster.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(docs))
    seen: set[str] = set()
    groups: set[str] = set()
    hostfiles: dict[str, str] = {}
    mounts: set[str] = set()

    def completed() -> bool:
        config = cluster.get(f"/api/v1/namespaces/default/configmaps/{name}-svc")
        if config is not None:
            hostfiles.update(config.get("data") or {})
        for pod in cluster.pods(selector=f"volcano.sh/job-name={name}"):
            for container in pod["spec"]["containers"]:
                mounts.update(m["mountPath"] for m in container.get("volumeMounts") or ())
            groups.add(pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"])
            if pod["spec"].get("nodeName"):
                seen.add(pod["metadata"]["name"])
        return phase(cluster, name) == "Completed"

    wait_for(f"job {name} to complete (phase {phase(cluster, name)!r})", completed, 120)
    assert len(seen) >= pods, seen  # its pods were scheduled and ran
    if name == "mpi-job":
        # The launcher's `mpiexec --hostfile /etc/volcano/mpiworker.host` finds its workers:
        # the svc plugin's ConfigMap, mounted there, names them (ssh keys at /root/.ssh).
        assert (
            hostfiles["mpiworker.host"]
            == "mpi-job-mpiworker-0.mpi-job\nmpi-job-mpiworker-1.mpi-job"
        )
        assert {"/etc/volcano", "/root/.ssh"} <= mounts
        # Finished: the plugins' objects went with the last kill, as in Volcano.
        assert cluster.get("/api/v1/namespaces/default/configmaps/mpi-job-svc") is None
    status = job(cluster, name)["status"]
    assert status["minAvailable"] == job(cluster, name)["spec"]["minAvailable"]
    listed = cluster.kubectl("get", "vcjob", name, "-o", "jsonpath={.status.state.phase}")
    assert listed == "Completed"
    # Its pods named its PodGroup `<job>-<job uid>` (a finished job's PodGroup is deleted
    # with its last kill, as Volcano does).
    assert groups == {f"{name}-{job(cluster, name)['metadata']['uid']}"}, groups


def test_tensorflow_plugin_gives_every_pod_a_tf_config_naming_the_cluster(
    cluster: SimCluster,
) -> None:
    container = {"name": "tf", "image": "tf", "resources": {"requests": {"cpu": "1"}}}
    template = {"spec": {"containers": [container], "restartPolicy": "Never"}}
    cluster.apply(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "tfc"},
            "spec": {
                "minAvailable": 3,
                "schedulerName": "volcano",
                "plugins": {"tensorflow": [], "env": []},
                "tasks": [
                    {"name": "ps", "replicas": 1, "template": template},
                    {"name": "worker", "replicas": 2, "template": template},
                ],
            },
        }
    )
    found = wait_for(
        "the pods of tfc",
        lambda: (p := cluster.pods(selector="volcano.sh/job-name=tfc")) and len(p) == 3 and p,
        60,
    )
    for pod in found:
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        config = json.loads(env["TF_CONFIG"])
        assert config["cluster"] == {
            "ps": ["tfc-ps-0.tfc:2222"],
            "worker": ["tfc-worker-0.tfc:2222", "tfc-worker-1.tfc:2222"],
        }
        task = pod["metadata"]["annotations"]["volcano.sh/task-spec"]
        assert config["task"] == {"type": task, "index": int(env["VK_TASK_INDEX"])}
    wait_for("tfc to complete", lambda: phase(cluster, "tfc") == "Completed", 60)


def _elastic_job(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": 2,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "trainer",
                    "replicas": replicas,
                    "minAvailable": 2,
                    "template": {
                        "metadata": {"annotations": {"vulcan.sh/sim-duration": "forever"}},
                        "spec": {"containers": [container], "restartPolicy": "Never"},
                    },
                }
            ],
            **spec,
        },
    }


def _running_pods(cluster: SimCluster, name: str) -> int:
    return sum(
        1
        for p in cluster.pods(selector=f"volcano.sh/job-name={name}")
        if p.get("status", {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


def test_changing_replicas_scales_an_elastic_job_up_and_down(cluster: SimCluster) -> None:
    cluster.apply(_elastic_job("elastic", 3))
    wait_for("3 trainers", lambda: _running_pods(cluster, "elastic") == 3, 60)
    patch = '[{"op":"replace","path":"/spec/tasks/0/replicas","value":%d}]'
    cluster.kubectl("patch", "vcjob", "elastic", "--type=json", "-p", patch % 5)
    wait_for("5 trainers", lambda: _running_pods(cluster, "elastic") == 5, 60)
    cluster.kubectl("patch", "vcjob", "elastic", "--type=json", "-p", patch % 2)
    wait_for("2 trainers", lambda: _running_pods(cluster, "elastic") == 2, 60)
    names = {
        p["metadata"]["name"]
        for p in cluster.pods(selector="volcano.sh/job-name=elastic")
        if not p["metadata"].get("deletionTimestamp")
    }
    assert names == {"elastic-trainer-0", "elastic-trainer-1"}  # the highest indexes went
    cluster.kubectl("delete", "vcjob", "elastic")


def test_ttl_deletes_a_finished_job_and_its_pods(cluster: SimCluster) -> None:
    # Finish times have a second's resolution (as metav1.Time): a TTL of 1 s can end a moment
    # after the job completes; 3 s leaves the completion in view.
    body = _elastic_job("short", 2, ttlSecondsAfterFinished=3)
    body["spec"]["tasks"][0]["template"]["metadata"]["annotations"] = {}
    cluster.apply(body)
    wait_for("short to complete", lambda: phase(cluster, "short") == "Completed", 60)
    wait_for("short to be deleted", lambda: not job(cluster, "short"), 30)
    wait_for(
        "its pods to be gone",
        lambda: not cluster.pods(selector="volcano.sh/job-name=short"),
        30,
    )


@pytest.fixture
def four_gpus(tmp_path: Path) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path,
        "--nodes",
        "4",
        "--node-profile",
        "cpu=8,memory=32Gi,nvidia.com/gpu=1",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "2s",
    )


def test_two_four_gpu_jobs_on_four_gpus_run_one_after_the_other_never_half_placed(
    four_gpus: SimCluster,
) -> None:
    """The seeds' TFJob deadlock as Volcano Jobs: each needs all 4 GPUs."""
    container = {
        "name": "worker",
        "image": "tf",
        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
    }
    for name in ("tf-a", "tf-b"):
        four_gpus.apply(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": {
                    "minAvailable": 4,
                    "schedulerName": "volcano",
                    "tasks": [
                        {
                            "name": "worker",
                            "replicas": 4,
                            "template": {
                                "spec": {"containers": [container], "restartPolicy": "Never"}
                            },
                        }
                    ],
                },
            }
        )
    bound: dict[str, int] = {}
    partial_since: dict[str, float] = {}

    def both_done() -> bool:
        # Bindings (and the workers' ends) land one by one: a moment between them may show a
        # part of a gang; a gang left half-placed would show it for long.
        now = time.monotonic()
        for name in ("tf-a", "tf-b"):
            placed = sum(
                1
                for p in four_gpus.pods(selector=f"volcano.sh/job-name={name}")
                if p["spec"].get("nodeName") and p["status"].get("phase") != "Succeeded"
            )
            if placed in (0, 4):
                partial_since.pop(name, None)
            else:
                since = partial_since.setdefault(name, now)
                assert now - since < 2.0, f"{name} half-placed: {placed} of 4"
            bound[name] = max(bound.get(name, 0), placed)
        return all(phase(four_gpus, n) == "Completed" for n in ("tf-a", "tf-b"))

    wait_for("both jobs to complete", both_done, 120)
    assert bound == {"tf-a": 4, "tf-b": 4}


TYPO_JOBS = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: capped-typo}
spec: {weight: 1, capability: {cpu: "8"}}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: typo, namespace: default}
spec:
  schedulerName: volcno
  queue: capped-typo
  minAvailable: 4
  tasks:
  - name: w
    replicas: 4
    template:
      spec:
        restartPolicy: Never
        containers:
        - {name: c, image: busybox, resources: {requests: {cpu: 1500m}}}
"""

VALID_JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: valid, namespace: default}
spec:
  queue: capped-typo
  minAvailable: 4
  tasks:
  - name: w
    replicas: 4
    template:
      metadata:
        annotations: {vulcan.sh/sim-duration: 30s}
      spec:
        restartPolicy: Never
        containers:
        - {name: c, image: busybox, resources: {requests: {cpu: "1"}}}
"""


def typo_scheduler_name_scenario(cluster: Any) -> str:
    """A Volcano Job whose pods name a scheduler nobody runs (`volcno`) holds nothing of its
    queue (capability 8 cpu; it asks 6, the valid job 4): its PodGroup goes back to Pending
    once its pods exist, saying why in a condition and in events on the PodGroup and the Job,
    and the valid job of the same queue runs. Shared by the embedded and the real tier."""
    cluster.kubectl("apply", "-f", "-", stdin=TYPO_JOBS)
    expected = 'pods use schedulerName "volcno", which no vulcan scheduler serves'

    def typo_group() -> dict[str, Any] | None:
        groups = cluster.get("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups")
        for found in (groups or {}).get("items") or ():
            owners = found["metadata"].get("ownerReferences") or ()
            if any(o.get("name") == "typo" for o in owners):
                conditions = (found.get("status") or {}).get("conditions") or ()
                if any(expected in (c.get("message") or "") for c in conditions):
                    return found
        return None

    group = wait_for("the typo job's PodGroup to say why", typo_group, 60)
    name = group["metadata"]["name"]
    wait_for(
        "the typo job's PodGroup to give its room back (Pending)",
        lambda: (typo_group() or {}).get("status", {}).get("phase") == "Pending",
        30,
    )
    for kind, involved in (("PodGroup", name), ("Job", "typo")):
        wait_for(
            f"a Warning event on the {kind} naming the scheduler",
            lambda kind=kind, involved=involved: (
                expected
                in cluster.kubectl(
                    "get",
                    "events",
                    "--field-selector",
                    f"involvedObject.kind={kind},involvedObject.name={involved}",
                    "-o",
                    "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message",
                )
            ),
            30,
        )
    cluster.kubectl("apply", "-f", "-", stdin=VALID_JOB)

    def valid_ran() -> bool:
        state = ((cluster.get(f"{JOBS}/valid") or {}).get("status") or {}).get("state") or {}
        return state.get("phase") == "Running"

    wait_for("the valid job of the same queue to run", valid_ran, 60)
    assert (typo_group() or {}).get("status", {}).get("phase") == "Pending"
    return name


def test_a_job_naming_a_scheduler_nobody_runs_holds_no_room_and_says_why(
    cluster: SimCluster,
) -> None:
    name = typo_scheduler_name_scenario(cluster)
    # `vulcan explain` says the same, with the extender or not, while the valid job holds room
    # of the queue (no room would help the typo'd job).
    for extender in (True, False):
        told = explain(cluster, "podgroup", name, extender=extender).splitlines()[0]
        assert told.startswith(f"podgroup default/{name} is Pending: "), told
        assert 'pods use schedulerName "volcno", which no vulcan scheduler serves' in told, told
    cluster.kubectl("delete", "job.batch.volcano.sh", "typo", "valid", "--wait=false")
