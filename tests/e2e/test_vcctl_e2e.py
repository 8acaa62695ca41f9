"""vcctl end to end: the installed `vcctl` (and Volcano's legacy `vsub`, `vjobs`, ...) against
`vulcan sim up --with-extender --with-controllers`, with the real kubectl beside it to check
what each command did and that its tables show what the API server holds.

Pods run until deleted (`--pod-duration forever`), so running jobs stay Running. Every command
and its output is appended to `vcctl-transcript.txt` in the cluster's state directory (the
examples in docs/reference.md come from there)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import SimCluster, start_cluster, wait_for
from tests.helpers import EXAMPLES

SCRIPTS = Path(sys.executable).parent
JOB_COLUMNS = [
    "Name", "Creation", "Phase", "JobType", "Replicas", "Min", "Pending", "Running",
    "Succeeded", "Failed", "Unknown", "RetryCount",
]  # fmt: skip
QUEUE_COLUMNS = [
    "Name", "Weight", "State", "Parent", "Inqueue", "Pending", "Running", "Unknown", "Completed",
]  # fmt: skip
PIPELINE = EXAMPLES / "jobflow-pipeline.yaml"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-vcctl"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=8,memory=32Gi,pods=110",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "forever",
    )


def vcctl(
    cluster: SimCluster, *args: str, prog: str = "vcctl", ok: bool = True
) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it, pointed at the cluster with -k."""
    script = SCRIPTS / prog
    if not script.exists():
        pytest.fail(f"{prog} is not installed: pip install -e '.[test]'")
    result = subprocess.run(
        [str(script), *args, "-k", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    with (cluster.state / "vcctl-transcript.txt").open("a") as transcript:
        transcript.write(f"$ {prog} {' '.join(args)}\n{result.stdout}{result.stderr}")
    if ok and result.returncode != 0:
        raise AssertionError(f"{prog} {' '.join(args)} failed: {result.stderr}")
    return result


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def row(text: str, name: str, column: int = 0) -> list[str] | None:
    return next((cells for cells in table(text)[1:] if cells[column] == name), None)


def kubectl_json(cluster: SimCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json"))


def job_phase(cluster: SimCluster, name: str) -> str:
    return cluster.kubectl(
        "get", "vcjob", name, "-o", "jsonpath={.status.state.phase}", check=False
    )


def job_pods(cluster: SimCluster, name: str) -> list[dict[str, Any]]:
    return cluster.pods(selector=f"volcano.sh/job-name={name}")


def running_pods(cluster: SimCluster, name: str) -> list[dict[str, Any]]:
    return [p for p in job_pods(cluster, name) if p["status"].get("phase") == "Running"]


def _job_event_reasons(cluster: SimCluster, name: str) -> set[str]:
    """The reasons of the events kubectl shows for the Job `name`."""
    items = kubectl_json(cluster, "events", "--field-selector", f"involvedObject.name={name}")
    return {e["reason"] for e in items["items"] if e["involvedObject"]["kind"] == "Job"}


def queue_state(cluster: SimCluster, name: str) -> str:
    return cluster.kubectl("get", "queue", name, "-o", "jsonpath={.status.state}", check=False)


def write_job(path: Path, name: str, queue: str) -> Path:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": {
                    "minAvailable": 1,
                    "schedulerName": "volcano",
                    "queue": queue,
                    "tasks": [
                        {
                            "name": "main",
                            "replicas": 1,
                            "template": {
                                "spec": {"containers": [container], "restartPolicy": "Never"}
                            },
                        }
                    ],
                },
            }
        )
    )
    return path


# ---------------------------------------------------------------------------------- jobs


def test_job_run_list_view_and_pod_list(cluster: SimCluster) -> None:
    out = vcctl(cluster, "job", "run", "-N", "train", "-r", "2", "-m", "2", "-R",
                "cpu=500m,memory=100Mi")  # fmt: skip
    assert out.stdout == "run job train successfully\n"
    job = kubectl_json(cluster, "vcjob", "train")  # kubectl sees what vcctl submitted
    assert job["spec"]["minAvailable"] == 2
    assert job["spec"]["schedulerName"] == "volcano"
    [task] = job["spec"]["tasks"]
    assert task["replicas"] == 2 and task["name"] == "default0"  # named by the webhook
    assert task["template"]["metadata"]["labels"] == {"job.volcano.sh": "train"}
    container = task["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"]) == ("train", "busybox")
    assert container["resources"] == {
        "limits": {"cpu": "1", "memory": "100Mi"},
        "requests": {"cpu": "500m", "memory": "100Mi"},
    }
    wait_for("train to run", lambda: len(running_pods(cluster, "train")) == 2, 60)
    wait_for("train Running", lambda: job_phase(cluster, "train") == "Running", 60)

    def listed() -> list[str] | None:
        cells = row(vcctl(cluster, "job", "list").stdout, "train")
        return cells if cells and cells[7] == "2" else None

    cells = wait_for("job list to show train's 2 running pods", listed, 30)
    text = vcctl(cluster, "job", "list").stdout
    assert table(text)[0] == JOB_COLUMNS
    status = kubectl_json(cluster, "vcjob", "train")["status"]
    created = job["metadata"]["creationTimestamp"][:10]
    assert cells == ["train", created, "Running", "Batch", "2", str(status["minAvailable"]),
                     str(status.get("pending", 0)), "2", "0", "0", "0", "0"]  # fmt: skip
    # Volcano's printf layout: the name column is as wide as the longest name + 3.
    width = max(len(c[0]) for c in table(text)) + 3
    assert text.splitlines()[0].startswith("Name".ljust(width) + "Creation       Phase")
    every = vcctl(cluster, "job", "list", "--all-namespaces").stdout
    assert table(every)[0] == ["Namespace", *JOB_COLUMNS]
    assert row(every, "train", column=1)[:3] == ["default", "train", created]
    assert table(vcctl(cluster, "job", "list", "--selector", "rai").stdout)[1][0] == "train"
    assert vcctl(cluster, "job", "list", "-q", "nowhere").stdout == "No resources found\n"
    assert vcctl(cluster, "job", "list", "-S", "other").stdout == "No resources found\n"

    view = vcctl(cluster, "job", "view", "-N", "train").stdout
    for line in ("Name:       \ttrain", "Namespace:  \tdefault", "  Min Available:     \t2",
                 "    Phase:\tRunning", "  Running:      \t2", f"  UID:               \t"
                 f"{job['metadata']['uid']}", "              Cpu:   \t500m"):  # fmt: skip
        assert line in view.splitlines(), line
    # Whether the Job has events yet depends on timing (a PodGroup that waited); both ways the
    # dump ends with Volcano's events part. The suspend test checks a table of them.
    if _job_event_reasons(cluster, "train"):
        assert view[view.index("Events:") :].splitlines()[1].split()[:2] == ["Type", "Reason"]
    else:
        assert view.endswith("Events: \t<none>\n") or "\nEvents:\n" in view

    pods = vcctl(cluster, "pod", "list", "-j", "train").stdout
    assert table(pods)[0] == ["Name", "Ready", "Status", "Restart", "Age"]
    names = sorted(p["metadata"]["name"] for p in job_pods(cluster, "train"))
    assert [cells[:4] for cells in table(pods)[1:]] == [[n, "1/1", "Running", "0"] for n in names]
    every = vcctl(cluster, "pod", "list", "--all-namespaces", "-q", "default").stdout
    assert table(every)[0][0] == "Namespace"
    assert {c[1] for c in table(every)[1:]} >= set(names)


def test_suspend_removes_the_pods_and_resume_runs_them_again(cluster: SimCluster) -> None:
    vcctl(cluster, "job", "run", "-N", "pausable", "-r", "2", "-m", "2")
    wait_for("pausable to run", lambda: len(running_pods(cluster, "pausable")) == 2, 60)
    assert vcctl(cluster, "job", "suspend", "-N", "pausable").stdout == ""
    wait_for("pausable Aborted", lambda: job_phase(cluster, "pausable") == "Aborted", 60)
    wait_for("pausable's pods gone", lambda: not job_pods(cluster, "pausable"), 60)
    assert vcctl(cluster, "pod", "list", "-j", "pausable").stdout == "No resources found\n"
    assert row(vcctl(cluster, "job", "list").stdout, "pausable")[2] == "Aborted"
    # The Command was consumed by the job controller (it deletes it before acting).
    assert "pausable-abortjob-" not in cluster.kubectl("get", "commands", "-o", "name")
    vcctl(cluster, "job", "resume", "-N", "pausable")
    wait_for("pausable Running again", lambda: job_phase(cluster, "pausable") == "Running", 60)
    wait_for("pausable's pods back", lambda: len(running_pods(cluster, "pausable")) == 2, 60)
    # The Commands left events on the Job: `job view` shows exactly the Job's events.
    reasons = wait_for(
        "the resume's events",
        lambda: (
            {"CommandIssued", "ExecuteAction"} <= _job_event_reasons(cluster, "pausable")
            and _job_event_reasons(cluster, "pausable")
        ),
        30,
    )
    view = vcctl(cluster, "job", "view", "-N", "pausable").stdout
    events = view[view.index("Events:") :].splitlines()
    assert events[1].split() == ["Type", "Reason", "Age", "From", "Message"]
    shown = {line.split("\t")[1].strip() for line in events[3:]}
    assert reasons <= shown <= _job_event_reasons(cluster, "pausable")  # (more may come)
    vcctl(cluster, "job", "delete", "-N", "pausable")


def test_delete_and_missing_jobs(cluster: SimCluster) -> None:
    vcctl(cluster, "job", "run", "-N", "doomed")
    out = vcctl(cluster, "job", "delete", "-N", "doomed")
    assert out.stdout == "delete job doomed successfully\n"
    wait_for("doomed gone", lambda: "doomed" not in cluster.kubectl("get", "vcjob", "-o", "name"))
    for verb in ("view", "suspend", "resume", "delete"):
        result = vcctl(cluster, "job", verb, "-N", "doomed", ok=False)
        assert result.returncode != 0
        assert (result.stdout, result.stderr) == ("", "vcctl: job default/doomed not found\n")
    result = vcctl(cluster, "job", "view", "-N", "x", "-n", "elsewhere", ok=False)
    assert result.stderr == "vcctl: job elsewhere/x not found\n"


# -------------------------------------------------------------------------------- queues


def test_queue_create_update_close_open_and_delete(cluster: SimCluster, tmp_path: Path) -> None:
    assert vcctl(cluster, "queue", "create", "-n", "night", "-w", "2").stdout == ""
    wait_for("night Open", lambda: queue_state(cluster, "night") == "Open", 30)
    text = vcctl(cluster, "queue", "list").stdout
    assert table(text)[0] == QUEUE_COLUMNS
    assert row(text, "night") == ["night", "2", "Open", "root", "0", "0", "0", "0", "0"]
    assert row(text, "default")[:3] == ["default", "1", "Open"]
    vcctl(cluster, "queue", "operate", "-n", "night", "-a", "update", "-w", "5")
    assert cluster.kubectl("get", "queue", "night", "-o", "jsonpath={.spec.weight}") == "5"

    vcctl(cluster, "queue", "operate", "-n", "night", "-a", "close")
    wait_for("night Closed", lambda: queue_state(cluster, "night") == "Closed", 30)
    assert row(vcctl(cluster, "queue", "get", "-n", "night").stdout, "night")[2] == "Closed"
    job_file = write_job(tmp_path / "late.yaml", "late", "night")
    refused = vcctl(cluster, "job", "run", "-f", str(job_file), ok=False)
    assert refused.returncode != 0 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert "can only submit job to queue with state `Open`" in refused.stderr
    assert "late" not in cluster.kubectl("get", "vcjob", "-o", "name")

    vcctl(cluster, "queue", "operate", "-n", "night", "-a", "open")
    wait_for("night Open again", lambda: queue_state(cluster, "night") == "Open", 30)
    assert vcctl(cluster, "job", "run", "-f", str(job_file)).stdout == "run job late successfully\n"
    wait_for("late Running", lambda: job_phase(cluster, "late") == "Running", 60)

    def counted() -> list[str] | None:
        cells = row(vcctl(cluster, "queue", "get", "-n", "night").stdout, "night")
        return cells if cells and cells[6] == "1" else None

    cells = wait_for("queue get to count late's PodGroup as Running", counted, 30)
    groups = kubectl_json(cluster, "podgroups", "-A")["items"]
    phases = [g["status"]["phase"] for g in groups if g["spec"].get("queue") == "night"]
    assert cells == ["night", "5", "Open", "root", "0", "0", "1", "0", "0"]
    assert phases == ["Running"]
    assert row(vcctl(cluster, "job", "list", "-q", "night").stdout, "late")[2] == "Running"

    vcctl(cluster, "job", "delete", "-N", "late")
    wait_for("late's PodGroup gone", lambda: not _groups_of(cluster, "night"), 60)
    vcctl(cluster, "queue", "delete", "-n", "night")
    wait_for("night deleted", lambda: "night" not in cluster.kubectl("get", "queues", "-o", "name"))
    missing = vcctl(cluster, "queue", "get", "-n", "night", ok=False)
    assert missing.stderr == "vcctl: queue night not found\n"


def test_a_queue_created_closed_is_closed(cluster: SimCluster) -> None:
    vcctl(cluster, "queue", "create", "-n", "shut", "-S", "Closed")
    wait_for("shut Closed", lambda: queue_state(cluster, "shut") == "Closed", 30)


def _groups_of(cluster: SimCluster, queue: str) -> list[dict[str, Any]]:
    groups = kubectl_json(cluster, "podgroups", "-A")["items"]
    return [g for g in groups if g["spec"].get("queue") == queue]


# --------------------------------------------------------------------- jobflow, jobtemplate


def test_jobtemplate_and_jobflow_verbs(cluster: SimCluster) -> None:
    docs = [d for d in yaml.safe_load_all(PIPELINE.read_text()) if d]
    templates = [d["metadata"]["name"] for d in docs if d["kind"] == "JobTemplate"]
    [flow] = [d["metadata"]["name"] for d in docs if d["kind"] == "JobFlow"]
    out = vcctl(cluster, "jobtemplate", "create", "-f", str(PIPELINE)).stdout
    assert out == "".join(f"Created JobTemplate: default/{t}\n" for t in templates)
    assert cluster.kubectl("get", "jobtemplates", "-o", "name").split() == [
        f"jobtemplate.flow.volcano.sh/{t}" for t in templates
    ]
    listed = vcctl(cluster, "jobtemplate", "list").stdout
    assert table(listed) == [["Name", "Namespace"]] + [[t, "default"] for t in templates]
    got = vcctl(cluster, "jobtemplate", "get", "-N", templates[0]).stdout
    assert table(got) == [["Name", "Namespace"], [templates[0], "default"]]
    described = yaml.safe_load(vcctl(cluster, "jobtemplate", "describe", "-N", templates[0]).stdout)
    stored = kubectl_json(cluster, "jobtemplate", templates[0])
    assert (described["apiVersion"], described["kind"]) == (
        "flow.volcano.sh/v1alpha1",
        "JobTemplate",
    )
    assert described["spec"] == stored["spec"]
    assert "managedFields" not in described["metadata"]

    assert vcctl(cluster, "jobflow", "create", "-f", str(PIPELINE)).stdout == (
        f"Created JobFlow: default/{flow}\n"
    )
    # job-a runs until deleted here: the flow stays Running once its first Job runs.
    phase = "Running"
    wait_for(
        "the flow Running",
        lambda: (
            cluster.kubectl("get", "jobflow", flow, "-o", "jsonpath={.status.state.phase}") == phase
        ),
        60,
    )
    listed = vcctl(cluster, "jobflow", "list").stdout
    assert table(listed)[0] == ["Name", "Namespace", "Phase", "Age"]
    assert row(listed, flow)[:3] == [flow, "default", phase]
    assert row(vcctl(cluster, "jobflow", "list", "--all-namespaces").stdout, flow)[1] == "default"
    assert row(vcctl(cluster, "jobflow", "get", "-N", flow).stdout, flow)[:3] == [
        flow,
        "default",
        phase,
    ]
    described = json.loads(vcctl(cluster, "jobflow", "describe", "-N", flow, "-o", "json").stdout)
    assert described["spec"] == kubectl_json(cluster, "jobflow", flow)["spec"]
    every = yaml.safe_load(vcctl(cluster, "jobflow", "describe").stdout)  # one flow in default
    assert every["metadata"]["name"] == flow

    assert (
        vcctl(cluster, "jobflow", "delete", "-N", flow).stdout
        == f"Deleted JobFlow: default/{flow}\n"
    )
    wait_for("the flow gone", lambda: not cluster.kubectl("get", "jobflows", "-o", "name"), 60)
    assert vcctl(cluster, "jobflow", "list").stdout == "No resources found\n"
    out = vcctl(cluster, "jobtemplate", "delete", "-f", str(PIPELINE)).stdout
    assert out == "".join(f"Deleted JobTemplate: default/{t}\n" for t in templates)
    wait_for("templates gone", lambda: not cluster.kubectl("get", "jobtemplates", "-o", "name"))
    assert vcctl(cluster, "jobtemplate", "list").stdout == "No resources found\n"
    missing = vcctl(cluster, "jobflow", "get", "-N", flow, ok=False)
    assert missing.stderr == f"vcctl: jobflow default/{flow} not found\n"


# ------------------------------------------------------------------------ legacy binaries


def test_legacy_binaries(cluster: SimCluster) -> None:
    # -n is the job's name and -N its namespace in these, as in Volcano's.
    out = vcctl(cluster, "-n", "oldstyle", "-N", "default", "-c", "sleep 30", prog="vsub")
    assert out.stdout == "run job oldstyle successfully\n"
    container = kubectl_json(cluster, "vcjob", "oldstyle")["spec"]["tasks"][0]["template"]
    assert container["spec"]["containers"][0]["command"] == ["sleep", "30"]
    wait_for("oldstyle Running", lambda: job_phase(cluster, "oldstyle") == "Running", 60)
    assert table(vcctl(cluster, prog="vjobs").stdout)[0] == JOB_COLUMNS
    assert row(vcctl(cluster, prog="vjobs").stdout, "oldstyle")[2] == "Running"
    assert "Name:       \toldstyle" in vcctl(cluster, "-n", "oldstyle", prog="vjobs").stdout
    assert table(vcctl(cluster, prog="vqueues").stdout)[0] == QUEUE_COLUMNS
    assert row(vcctl(cluster, "-n", "default", prog="vqueues").stdout, "default")[2] == "Open"
    assert vcctl(cluster, "-n", "oldstyle", prog="vsuspend").stdout == ""
    wait_for("oldstyle Aborted", lambda: job_phase(cluster, "oldstyle") == "Aborted", 60)
    vcctl(cluster, "-n", "oldstyle", prog="vresume")
    wait_for("oldstyle Running again", lambda: job_phase(cluster, "oldstyle") == "Running", 60)
    out = vcctl(cluster, "-n", "oldstyle", prog="vcancel")
    assert out.stdout == "cancel job oldstyle successfully\n"
    wait_for(
        "oldstyle gone", lambda: "oldstyle" not in cluster.kubectl("get", "vcjob", "-o", "name")
    )
    missing = vcctl(cluster, "-n", "oldstyle", prog="vjobs", ok=False)
    assert (missing.returncode, missing.stderr) == (1, "vjobs: job default/oldstyle not found\n")


def test_version_needs_no_cluster() -> None:
    result = subprocess.run(
        [str(SCRIPTS / "vcctl"), "version"], capture_output=True, text=True, timeout=60, check=True
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "API Version: v1alpha1" and lines[1].startswith("Version: ")
