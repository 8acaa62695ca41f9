"""Volcano JobFlows end to end: JobTemplates and JobFlows applied with kubectl on `vulcan sim up
--with-extender --with-controllers` run step by step: the jobflow-controller creates each step's
Job `<flow>-<step>` from its JobTemplate once its dependencies completed (or its probe passed),
the job controller and the extender run it on the hollow nodes (2 s a pod unless a template's
`vulcan.sh/sim-duration` says otherwise), and the flow ends Succeed or Failed.

Each test has its own flow and templates, so they share the module's cluster."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import SimCluster, start_cluster, wait_for
from tests.helpers import EXAMPLES

NS = "default"
FLOWS = f"/apis/flow.volcano.sh/v1alpha1/namespaces/{NS}/jobflows"
TEMPLATES = f"/apis/flow.volcano.sh/v1alpha1/namespaces/{NS}/jobtemplates"
JOBS = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-jobflows"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=32,memory=128Gi",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "2s",
    )


# ---------------------------------------------------------------------- manifests


def template(
    name: str,
    *,
    duration: str = "2s",
    exit_code: int | None = None,
    pod_ip: str | None = None,
    replicas: int = 1,
) -> dict[str, Any]:
    annotations = {"vulcan.sh/sim-duration": duration}
    if exit_code is not None:
        annotations["vulcan.sh/sim-exit-code"] = str(exit_code)
    if pod_ip is not None:
        annotations["vulcan.sh/sim-pod-ip"] = pod_ip
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "main",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": annotations},
                        "spec": {"containers": [container], "restartPolicy": "Never"},
                    },
                }
            ],
        },
    }


def jobflow(
    name: str,
    steps: list[tuple[str, list[str]]],
    *,
    retain: str = "retain",
    annotations: dict[str, str] | None = None,
    probes: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    flows: list[dict[str, Any]] = []
    for step, targets in steps:
        item: dict[str, Any] = {"name": step}
        if targets:
            item["dependsOn"] = {"targets": targets}
            if probes and step in probes:
                item["dependsOn"]["probe"] = probes[step]
        flows.append(item)
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
        "spec": {"jobRetainPolicy": retain, "flows": flows},
    }


def apply(cluster: SimCluster, docs: list[dict[str, Any]]) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs, sort_keys=False))


# ---------------------------------------------------------------------- reads


def vcjob(cluster: SimCluster, name: str) -> dict[str, Any] | None:
    return cluster.get(f"{JOBS}/{name}")


def job_phase(job: dict[str, Any] | None) -> str:
    return (((job or {}).get("status") or {}).get("state") or {}).get("phase", "")


def flow(cluster: SimCluster, name: str) -> dict[str, Any] | None:
    return cluster.get(f"{FLOWS}/{name}")


def flow_status(cluster: SimCluster, name: str) -> dict[str, Any]:
    return (flow(cluster, name) or {}).get("status") or {}


def flow_phase(cluster: SimCluster, name: str) -> str:
    return (flow_status(cluster, name).get("state") or {}).get("phase", "")


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def created(job: dict[str, Any]) -> datetime:
    return stamp(job["metadata"]["creationTimestamp"])


def completed_at(job: dict[str, Any]) -> datetime:
    state = job["status"]["state"]
    assert state["phase"] == "Completed", (job["metadata"]["name"], state)
    return stamp(state["lastTransitionTime"])


def flow_events(cluster: SimCluster, name: str) -> list[dict[str, Any]]:
    """The events about JobFlow `name`, as `kubectl get events` lists them."""
    items = json.loads(cluster.kubectl("get", "events", "-n", NS, "-o", "json"))["items"]
    return [
        e
        for e in items
        if (e.get("involvedObject") or e.get("regarding") or {}).get("kind") == "JobFlow"
        and (e.get("involvedObject") or e.get("regarding") or {}).get("name") == name
    ]


def reasons(cluster: SimCluster, name: str) -> list[str]:
    return [e.get("reason", "") for e in flow_events(cluster, name)]


class Watcher:
    """Polls a flow's Jobs while a test waits: every Job (by uid) that ever existed, so a Job
    that was created and went again is still seen."""

    def __init__(self, cluster: SimCluster, flow_name: str) -> None:
        self.cluster = cluster
        self.prefix = f"{flow_name}-"
        self.seen: dict[str, dict[str, Any]] = {}  # uid -> the Job as last seen

    def poll(self) -> dict[str, dict[str, Any]]:
        """The flow's Jobs now, by name."""
        items = self.cluster.get(JOBS)["items"]
        now = {
            j["metadata"]["name"]: j for j in items if j["metadata"]["name"].startswith(self.prefix)
        }
        for job in now.values():
            self.seen[job["metadata"]["uid"]] = job
        return now

    def names(self) -> set[str]:
        return {j["metadata"]["name"] for j in self.seen.values()}

    def uids_of(self, name: str) -> list[str]:
        return [uid for uid, j in self.seen.items() if j["metadata"]["name"] == name]


# ---------------------------------------------------------------------- tests


def test_the_pipeline_fixture_runs_each_job_after_its_targets_and_retains_the_jobs(
    cluster: SimCluster,
) -> None:
    cluster.kubectl("apply", "-f", str(EXAMPLES / "jobflow-pipeline.yaml"))
    names = [f"pipeline-job-{s}" for s in "abcde"]
    wait_for(
        "the pipeline to succeed",
        lambda: flow_phase(cluster, "pipeline") == "Succeed",
        120,
    )
    jobs = {n[len("pipeline-job-") :]: vcjob(cluster, n) for n in names}
    assert all(jobs.values()), {k: bool(v) for k, v in jobs.items()}
    assert {k: job_phase(v) for k, v in jobs.items()} == dict.fromkeys("abcde", "Completed")
    # Each Job was created once its targets had completed (stamps have a second's resolution).
    targets = {"b": ["a"], "c": ["b"], "d": ["b"], "e": ["c", "d"]}
    for step, deps in targets.items():
        for dep in deps:
            assert created(jobs[step]) >= completed_at(jobs[dep]), (step, dep)
    # c and d start in the same sync, e after both.
    assert abs((created(jobs["c"]) - created(jobs["d"])).total_seconds()) <= 1
    assert created(jobs["e"]) >= max(completed_at(jobs["c"]), completed_at(jobs["d"]))
    # Each Job is made from its template and marked as the flow's.
    for step, job in jobs.items():
        meta = job["metadata"]
        assert meta["labels"]["volcano.sh/createdByJobFlow"] == "default.pipeline"
        assert meta["annotations"]["volcano.sh/createdByJobTemplate"] == f"default.job-{step}"
    assert jobs["b"]["spec"]["tasks"][0]["name"] == "worker"
    assert jobs["b"]["spec"]["tasks"][0]["replicas"] == 2

    status = flow_status(cluster, "pipeline")
    assert status["completedJobs"] == names
    assert [e["name"] for e in status["jobStatusList"]] == names
    assert all(e["state"] == "Completed" for e in status["jobStatusList"])
    wait_for(
        "JobTemplate job-e to list its Job",
        lambda: (
            ((cluster.get(f"{TEMPLATES}/job-e") or {}).get("status") or {}).get("jobDependsOnList")
            == ["pipeline-job-e"]
        ),
        60,
    )
    wait_for(
        "an event per Job created",
        lambda: reasons(cluster, "pipeline").count("Created") == 5,
        60,
    )

    # jobRetainPolicy retain: the Jobs outlive the flow, released from its ownership (so the
    # garbage collector keeps them).
    uid = flow(cluster, "pipeline")["metadata"]["uid"]
    cluster.kubectl("delete", "jobflow", "pipeline", "--wait=true")
    wait_for("the flow to be gone", lambda: flow(cluster, "pipeline") is None, 60)
    for name in names:
        job = vcjob(cluster, name)
        assert job is not None, f"{name} was deleted with its flow"
        refs = job["metadata"].get("ownerReferences") or []
        assert not any(r.get("uid") == uid for r in refs), (name, refs)
    listed = cluster.kubectl("get", "vcjob", "-o", "name").split()
    assert {f"job.batch.volcano.sh/{n}" for n in names} <= set(listed), listed


def test_a_failing_middle_job_fails_the_flow_and_later_jobs_never_start(
    cluster: SimCluster,
) -> None:
    apply(
        cluster,
        [
            template("fail-first"),
            template("fail-middle", duration="1s", exit_code=1),
            template("fail-last"),
            jobflow(
                "failing",
                [
                    ("fail-first", []),
                    ("fail-middle", ["fail-first"]),
                    ("fail-last", ["fail-middle"]),
                ],
            ),
        ],
    )
    watcher = Watcher(cluster, "failing")

    def failed() -> bool:
        watcher.poll()
        return flow_phase(cluster, "failing") == "Failed"

    wait_for("the flow to fail", failed, 120)
    jobs = watcher.poll()
    assert job_phase(jobs["failing-fail-first"]) == "Completed"
    assert job_phase(jobs["failing-fail-middle"]) == "Failed"
    assert "failing-fail-last" not in watcher.names()
    status = flow_status(cluster, "failing")
    assert status["failedJobs"] == ["failing-fail-middle"]
    assert status["completedJobs"] == ["failing-fail-first"]
    annotations = flow(cluster, "failing")["metadata"]["annotations"]
    assert annotations["vulcan.sh/failure-reason"] == "job failing-fail-middle Failed"
    skipped = wait_for(
        "a Skipped event on the flow",
        lambda: [e for e in flow_events(cluster, "failing") if e.get("reason") == "Skipped"],
        60,
    )
    note = skipped[0].get("message") or skipped[0].get("note") or ""
    assert "failing-fail-last" in note, skipped
    # Later syncs (the failed Job's events, the status writes) start nothing either.
    wait_for(
        "the Failed event on the flow",
        lambda: "Failed" in reasons(cluster, "failing"),
        60,
    )
    assert vcjob(cluster, "failing-fail-last") is None


def test_delete_policy_removes_the_jobs_once_the_flow_succeeded(cluster: SimCluster) -> None:
    apply(
        cluster,
        [
            template("gone-a"),
            template("gone-b"),
            jobflow("disposable", [("gone-a", []), ("gone-b", ["gone-a"])], retain="delete"),
        ],
    )
    watcher = Watcher(cluster, "disposable")

    def succeeded() -> bool:
        watcher.poll()
        return flow_phase(cluster, "disposable") == "Succeed"

    wait_for("the flow to succeed", succeeded, 120)
    assert watcher.names() == {"disposable-gone-a", "disposable-gone-b"}
    assert flow_status(cluster, "disposable")["completedJobs"] == [
        "disposable-gone-a",
        "disposable-gone-b",
    ]
    wait_for("the flow's Jobs to be deleted", lambda: not watcher.poll(), 60)
    kept = flow(cluster, "disposable")
    assert kept is not None and job_phase(kept) == "Succeed"  # the flow itself stays
    assert "vulcan.sh/retain-jobs" not in (kept["metadata"].get("finalizers") or [])
    wait_for("a Deleted event", lambda: "Deleted" in reasons(cluster, "disposable"), 60)


def test_editing_a_job_template_leaves_the_running_job_made_from_it_unchanged(
    cluster: SimCluster,
) -> None:
    apply(
        cluster,
        [
            template("edit-a", duration="8s"),
            template("edit-b"),
            jobflow("edited", [("edit-a", []), ("edit-b", ["edit-a"])]),
        ],
    )
    running = wait_for(
        "edited-edit-a to run",
        lambda: (j := vcjob(cluster, "edited-edit-a")) and job_phase(j) == "Running" and j,
        60,
    )
    before = running["spec"]
    # While a runs, both templates change: 2 replicas and a new pod annotation.
    for name in ("edit-a", "edit-b"):
        cluster.kubectl(
            "patch",
            "jobtemplate",
            name,
            "--type=json",
            "-p",
            json.dumps(
                [
                    {"op": "replace", "path": "/spec/minAvailable", "value": 2},
                    {"op": "replace", "path": "/spec/tasks/0/replicas", "value": 2},
                    {
                        "op": "add",
                        "path": "/spec/tasks/0/template/metadata/annotations/edited",
                        "value": "yes",
                    },
                ]
            ),
        )
    edited = cluster.get(f"{TEMPLATES}/edit-a")
    assert edited["spec"]["tasks"][0]["replicas"] == 2
    now = vcjob(cluster, "edited-edit-a")
    assert job_phase(now) == "Running", "a finished before the templates changed"
    assert now["metadata"]["uid"] == running["metadata"]["uid"]
    assert now["spec"] == before

    wait_for("the flow to succeed", lambda: flow_phase(cluster, "edited") == "Succeed", 120)
    job_a = vcjob(cluster, "edited-edit-a")
    assert job_a["metadata"]["uid"] == running["metadata"]["uid"]  # not made again
    assert job_a["spec"] == before
    assert job_a["status"]["succeeded"] == 1  # one pod ran, as when it was created
    assert job_a["status"]["taskStatusCount"] == {"main": {"phase": {"Succeeded": 1}}}
    # b was created after the change: Volcano copies the template as it is then.
    job_b = vcjob(cluster, "edited-edit-b")
    assert job_b["spec"]["tasks"][0]["replicas"] == 2
    assert job_b["spec"]["tasks"][0]["template"]["metadata"]["annotations"]["edited"] == "yes"


class Answering:
    """A test HTTP server standing in for the target's service: GET /ready answers `code`
    (503 until a test changes it); `hits` counts the requests answered with each code."""

    def __init__(self) -> None:
        self.code = 503
        self.hits: dict[int, int] = {}
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with owner.lock:
                    code = owner.code if self.path == "/ready" else 404
                    owner.hits[code] = owner.hits.get(code, 0) + 1
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def count(self, code: int) -> int:
        with self.lock:
            return self.hits.get(code, 0)

    def answer(self, code: int) -> None:
        with self.lock:
            self.code = code


@pytest.fixture
def answering() -> Iterator[Answering]:
    server = Answering()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def test_an_http_probe_gates_a_job_until_the_target_answers(
    cluster: SimCluster, answering: Answering
) -> None:
    probe = {"httpGetList": [{"taskName": "main", "path": "/ready", "port": answering.port}]}
    apply(
        cluster,
        [
            # The target's pod reports 127.0.0.1 as its IP: the probe reaches the test server.
            template("probe-a", duration="60s", pod_ip="127.0.0.1"),
            template("probe-b"),
            jobflow(
                "gated", [("probe-a", []), ("probe-b", ["probe-a"])], probes={"probe-b": probe}
            ),
        ],
    )
    try:
        watcher = Watcher(cluster, "gated")

        def refused_twice() -> bool:
            watcher.poll()
            assert "gated-probe-b" not in watcher.names(), "b started though the probe failed"
            return answering.count(503) >= 2

        # Two refused probes: the sync after the first one has run, and started nothing.
        wait_for("the probe to be refused twice", refused_twice, 60)
        jobs = watcher.poll()
        assert "gated-probe-b" not in watcher.names()
        assert job_phase(jobs["gated-probe-a"]) == "Running"
        pod = cluster.pod("gated-probe-a-main-0")
        assert pod["status"]["podIP"] == "127.0.0.1"
        assert flow_phase(cluster, "gated") == "Running"

        answering.answer(200)
        wait_for(
            "gated-probe-b to be created",
            lambda: vcjob(cluster, "gated-probe-b") is not None,
            60,
        )
        assert answering.count(200) >= 1
        assert job_phase(vcjob(cluster, "gated-probe-a")) == "Running"  # a still runs
    finally:
        # a would run for a minute: the flow and its Jobs go.
        cluster.kubectl("delete", "jobflow", "gated", "--wait=true", check=False)
        cluster.kubectl(
            "delete", "vcjob", "gated-probe-a", "gated-probe-b", "--ignore-not-found", check=False
        )


def test_max_retries_runs_a_failed_job_again_then_fails_the_flow(cluster: SimCluster) -> None:
    apply(
        cluster,
        [
            template("retry-a"),
            template("retry-b", duration="1s", exit_code=1),
            template("retry-c"),
            jobflow(
                "retried",
                [("retry-a", []), ("retry-b", ["retry-a"]), ("retry-c", ["retry-b"])],
                annotations={"vulcan.sh/max-retries": "1"},
            ),
        ],
    )
    watcher = Watcher(cluster, "retried")

    def failed() -> bool:
        watcher.poll()
        return flow_phase(cluster, "retried") == "Failed"

    wait_for("the flow to fail", failed, 120)
    watcher.poll()
    uids = watcher.uids_of("retried-retry-b")
    assert len(uids) == 2, f"retried-retry-b created {len(uids)} times"
    first, second = (watcher.seen[u] for u in uids)  # in the order seen
    assert "vulcan.sh/flow-retry" not in (first["metadata"].get("annotations") or {})
    assert second["metadata"]["annotations"]["vulcan.sh/flow-retry"] == "1"
    assert created(second) >= created(first)
    assert job_phase(vcjob(cluster, "retried-retry-b")) == "Failed"
    assert vcjob(cluster, "retried-retry-b")["metadata"]["uid"] == second["metadata"]["uid"]
    assert len(watcher.uids_of("retried-retry-a")) == 1  # only the failed step runs again
    assert "retried-retry-c" not in watcher.names()
    meta = flow(cluster, "retried")["metadata"]
    assert json.loads(meta["annotations"]["vulcan.sh/retries-used"]) == {"retry-b": 1}
    assert meta["annotations"]["vulcan.sh/failure-reason"] == "job retried-retry-b Failed"
    wait_for("a Retrying event", lambda: "Retrying" in reasons(cluster, "retried"), 60)


def test_on_failure_runs_the_clean_up_job_then_fails_the_flow(cluster: SimCluster) -> None:
    apply(
        cluster,
        [
            template("cleanup-a", duration="1s", exit_code=3),
            template("cleanup-b"),
            template("cleanup-tidy"),
            jobflow(
                "cleaned",
                [("cleanup-a", []), ("cleanup-b", ["cleanup-a"])],
                annotations={"vulcan.sh/on-failure": "cleanup-tidy"},
            ),
        ],
    )
    watcher = Watcher(cluster, "cleaned")

    def failed() -> bool:
        watcher.poll()
        return flow_phase(cluster, "cleaned") == "Failed"

    wait_for("the flow to fail after its clean-up", failed, 120)
    assert job_phase(vcjob(cluster, "cleaned-cleanup-tidy")) == "Completed"
    assert "cleaned-cleanup-b" not in watcher.names()
    status = flow_status(cluster, "cleaned")
    assert status["failedJobs"] == ["cleaned-cleanup-a"]
    assert status["completedJobs"] == ["cleaned-cleanup-tidy"]
    reason = flow(cluster, "cleaned")["metadata"]["annotations"]["vulcan.sh/failure-reason"]
    assert reason == "job cleaned-cleanup-a Failed; clean-up cleaned-cleanup-tidy Completed"


def test_a_task_status_probe_starts_a_job_while_its_target_runs(cluster: SimCluster) -> None:
    probe = {"taskStatusList": [{"taskName": "main", "phase": "Running"}]}
    apply(
        cluster,
        [
            template("status-a", duration="30s"),
            template("status-b"),
            jobflow(
                "statused",
                [("status-a", []), ("status-b", ["status-a"])],
                probes={"status-b": probe},
            ),
        ],
    )
    started = wait_for("step b to start", lambda: vcjob(cluster, "statused-status-b"), 90)
    # b started on its probe (a's task running), not on a's completion.
    assert job_phase(vcjob(cluster, "statused-status-a")) == "Running"
    assert started["metadata"]["labels"]["volcano.sh/createdByJobFlow"] == "default.statused"
    cluster.kubectl("delete", "jobflow", "statused", "--wait=false")
    cluster.kubectl("delete", "vcjob", "statused-status-a", "statused-status-b", "--wait=false")


def test_a_controller_killed_mid_flow_starts_nothing_twice(cluster: SimCluster) -> None:
    apply(
        cluster,
        [
            template("restart-a", duration="6s"),
            template("restart-b"),
            template("restart-c"),
            jobflow(
                "restarted",
                [("restart-a", []), ("restart-b", ["restart-a"]), ("restart-c", ["restart-a"])],
            ),
        ],
    )
    watcher = Watcher(cluster, "restarted")
    wait_for(
        "step a to run",
        lambda: job_phase(watcher.poll().get("restarted-restart-a")) == "Running",
        90,
    )
    pid = cluster.component_pid("controllers")
    os.kill(pid, signal.SIGKILL)

    def restarted() -> bool:
        try:
            return cluster.component_pid("controllers") != pid
        except AssertionError:
            return False

    wait_for("the controllers to be restarted", restarted, 60)

    def succeeded() -> bool:
        watcher.poll()
        return flow_phase(cluster, "restarted") == "Succeed"

    wait_for("the flow to succeed", succeeded, 120)
    for step in ("restart-a", "restart-b", "restart-c"):
        assert len(watcher.uids_of(f"restarted-{step}")) == 1, step
    created_events = [e for e in flow_events(cluster, "restarted") if e.get("reason") == "Created"]
    assert sum(int(e.get("count") or e.get("deprecatedCount") or 1) for e in created_events) == 3
