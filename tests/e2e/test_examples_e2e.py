"""Every example of examples/ (README, "Examples") runs unchanged on `vulcan sim up
--with-extender --with-controllers` (the default node profile, 4 nodes), created with kubectl
as the README says, and reaches the state the README promises. An example that stops working,
or a new example without a test here, fails CI."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.e2e.conftest import SimCluster, start_cluster, wait_for
from tests.helpers import EXAMPLES

JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
FLOWS = "/apis/flow.volcano.sh/v1alpha1/namespaces/default/jobflows"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
TIMEOUT = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-examples"),
        "--nodes",
        "4",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "2s",
    )


def create(cluster: SimCluster, example: str) -> str:
    """`kubectl create -f examples/<example>`, as the README has it."""
    return cluster.kubectl("create", "-f", str(EXAMPLES / example))


def job_phase(cluster: SimCluster, name: str) -> str:
    job = cluster.get(f"{JOBS}/{name}") or {}
    return ((job.get("status") or {}).get("state") or {}).get("phase", "")


def job_pods(cluster: SimCluster, name: str) -> list[dict[str, Any]]:
    return cluster.pods(selector=f"volcano.sh/job-name={name}")


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def runs_to_completed(
    cluster: SimCluster, example: str, name: str, tasks: dict[str, int], timeout: float = TIMEOUT
) -> list[dict[str, Any]]:
    """Create the example, wait for the Job to be Completed; every task's pods were bound.
    Returns the pods seen (the last look at each)."""
    create(cluster, example)
    seen: dict[str, dict[str, Any]] = {}

    def completed() -> bool:
        for pod in job_pods(cluster, name):
            seen[pod["metadata"]["name"]] = pod
        return job_phase(cluster, name) == "Completed"

    try:
        wait_for(f"{name} Completed", completed, timeout)
    except AssertionError as exc:
        states = {n: (p.get("status") or {}).get("phase") for n, p in seen.items()}
        raise AssertionError(
            f"{exc}; job phase {job_phase(cluster, name)!r}, pods {states}"
        ) from None
    bound = [p for p in seen.values() if p["spec"].get("nodeName")]
    per_task: dict[str, int] = {}
    for pod in bound:
        task = pod["metadata"]["annotations"]["volcano.sh/task-spec"]
        per_task[task] = per_task.get(task, 0) + 1
    assert per_task == tasks, per_task
    assert cluster.kubectl("get", "vcjob", name, "-o", "jsonpath={.status.state.phase}") == (
        "Completed"
    )
    return list(seen.values())


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    container = pod["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container.get("env") or ()}


# ------------------------------------------------------------------------ the examples


def tensorflow(cluster: SimCluster) -> None:
    pods = runs_to_completed(cluster, "tensorflow-benchmark.yaml", "tensorflow-benchmark",
                             {"ps": 1, "worker": 2})  # fmt: skip
    # `env` numbered the pods of each task; `svc` mounted the host files the command reads.
    assert sorted(env_of(p)["VK_TASK_INDEX"] for p in pods) == ["0", "0", "1"]
    mounts = {m["mountPath"] for p in pods for m in p["spec"]["containers"][0]["volumeMounts"]}
    assert "/etc/volcano" in mounts


def mpi(cluster: SimCluster) -> None:
    pods = runs_to_completed(cluster, "mpi-job.yaml", "mpi-job", {"mpimaster": 1, "mpiworker": 2})
    mounts = {m["mountPath"] for p in pods for m in p["spec"]["containers"][0]["volumeMounts"]}
    assert {"/etc/volcano", "/root/.ssh"} <= mounts


def pytorch(cluster: SimCluster) -> None:
    pods = runs_to_completed(cluster, "pytorch-job.yaml", "pytorch-job", {"master": 1, "worker": 2})
    # The pytorch plugin: the master's address and a rank per pod (0 for the master).
    ranks = {p["metadata"]["name"]: env_of(p) for p in pods}
    assert ranks["pytorch-job-master-0"]["RANK"] == "0"
    assert {e["WORLD_SIZE"] for e in ranks.values()} == {"3"}
    assert sorted(e["RANK"] for e in ranks.values()) == ["0", "1", "2"]


def task_dependency(cluster: SimCluster) -> None:
    # 40 s: the job needs about 10 (workers, then the launcher); while issue 31 is open
    # (below) it never completes, and the expected failure should not cost more.
    pods = runs_to_completed(cluster, "task-dependency.yaml", "mpi-with-dependency",
                             {"mpimaster": 1, "mpiworker": 2}, timeout=40)  # fmt: skip
    # The launcher was created only once its workers ran.
    by_name = {p["metadata"]["name"]: p for p in pods}
    master = stamp(by_name["mpi-with-dependency-mpimaster-0"]["metadata"]["creationTimestamp"])
    for index in (0, 1):
        worker = by_name[f"mpi-with-dependency-mpiworker-{index}"]
        assert stamp(worker["status"]["startTime"]) <= master


def jobflow(cluster: SimCluster) -> None:
    out = create(cluster, "jobflow-pipeline.yaml")
    assert "jobflow.flow.volcano.sh/pipeline created" in out

    def phase() -> str:
        flow = cluster.get(f"{FLOWS}/pipeline") or {}
        return ((flow.get("status") or {}).get("state") or {}).get("phase", "")

    wait_for(f"the pipeline to succeed (phase {phase()!r})", lambda: phase() == "Succeed", TIMEOUT)
    jobs = {step: cluster.get(f"{JOBS}/pipeline-job-{step}") for step in "abcde"}
    assert {s: job_phase(cluster, f"pipeline-job-{s}") for s in jobs} == dict.fromkeys(
        "abcde", "Completed"
    )
    # Each stage started after what it depends on had completed.
    for step, targets in {"b": "a", "c": "b", "d": "b", "e": "cd"}.items():
        for target in targets:
            done = stamp(jobs[target]["status"]["state"]["lastTransitionTime"])  # type: ignore[index]
            assert stamp(jobs[step]["metadata"]["creationTimestamp"]) >= done  # type: ignore[index]


def queues(cluster: SimCluster) -> None:
    create(cluster, "queues.yaml")

    def states() -> dict[str, str]:
        out = {}
        for name in ("research", "prod"):
            queue = cluster.get(f"{QUEUES}/{name}") or {}
            out[name] = (queue.get("status") or {}).get("state", "")
        return out

    wait_for(f"both queues Open ({states()})", lambda: states() == dict.fromkeys(
        ("research", "prod"), "Open"), 30)  # fmt: skip
    weights = cluster.kubectl("get", "queue", "research", "prod", "-o",
                              "jsonpath={.items[*].spec.weight}")  # fmt: skip
    assert weights.split() == ["3", "1"]


def gang_job(cluster: SimCluster) -> None:
    """The queue team-a and the job train, whose 4 workers start together."""
    create(cluster, "gang-job.yaml")

    def running() -> int:
        return sum((p.get("status") or {}).get("phase") == "Running"
                   for p in job_pods(cluster, "train"))  # fmt: skip

    wait_for("train's 4 workers running", lambda: running() == 4, TIMEOUT)
    wait_for("train Running", lambda: job_phase(cluster, "train") == "Running", 30)
    groups = {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
              for p in job_pods(cluster, "train")}  # fmt: skip
    (group,) = groups
    assert cluster.get(f"{PODGROUPS}/{group}")["spec"]["queue"] == "team-a"
    cluster.kubectl("delete", "vcjob", "train", "--wait=false")


def deployment_gang(cluster: SimCluster) -> None:
    create(cluster, "deployment-gang.yaml")

    def ready() -> bool:
        status = (cluster.get(f"{DEPLOYMENTS}/inference") or {}).get("status") or {}
        return status.get("readyReplicas") == 4 and status.get("availableReplicas") == 4

    wait_for("the Deployment inference 4/4 ready", ready, TIMEOUT)
    pods = cluster.pods(selector="app=inference")
    assert len(pods) == 4 and all(p["status"]["phase"] == "Running" for p in pods)
    # One PodGroup for the four, minMember from the Deployment's annotation, via its
    # ReplicaSet (owner of the pods and of the group).
    (group,) = {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods}
    podgroup = cluster.get(f"{PODGROUPS}/{group}")
    assert podgroup["spec"]["minMember"] == 4
    (owner,) = podgroup["metadata"]["ownerReferences"]
    assert owner["kind"] == "ReplicaSet" and owner["name"].startswith("inference-")
    wait_for("the PodGroup Running", lambda: (cluster.get(f"{PODGROUPS}/{group}") or {}).get(
        "status", {}).get("phase") == "Running", 30)  # fmt: skip
    out = cluster.kubectl("get", "deployment", "inference")
    assert out.split("\n")[1].split()[:4] == ["inference", "4/4", "4", "4"], out


EXAMPLE_TESTS: dict[str, Callable[[SimCluster], None]] = {
    "tensorflow-benchmark.yaml": tensorflow,
    "mpi-job.yaml": mpi,
    "pytorch-job.yaml": pytorch,
    "task-dependency.yaml": task_dependency,
    "jobflow-pipeline.yaml": jobflow,
    "queues.yaml": queues,
    "gang-job.yaml": gang_job,
    "deployment-gang.yaml": deployment_gang,
}


def test_every_example_has_a_test() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(EXAMPLE_TESTS)


@pytest.mark.parametrize(
    "example",
    sorted(EXAMPLE_TESTS),
)
def test_example_runs_as_the_readme_says(cluster: SimCluster, example: str) -> None:
    EXAMPLE_TESTS[example](cluster)
