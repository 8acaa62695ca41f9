"""vcctl's other tables and dumps, byte for byte as Volcano prints them: ages, queues (PodGroups
counted per phase), jobflows and jobtemplates, pods (kubectl's status column), `job view`."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from core.kube.client import COMMANDS, QUEUES, ApiError
from tests.helpers import local_zone_utc
from tests.unit.test_vcctl_jobs import FakeClient, run, vcjob
from vcctl import flows, job_view, pods, queues
from vcctl.output import go_time, human_duration

NOW = 1714557600.0  # 2024-05-01T10:00:00Z


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with local_zone_utc():
        yield


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (150, "2m30s"),
        (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (3 * 3600 + 120, "3h2m"),
        (8 * 3600, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"), (50 * 3600, "2d2h"),
        (8 * 86400, "8d"), (2 * 365 * 86400, "2y"), (2 * 365 * 86400 + 86400, "2y1d"),
        (9 * 365 * 86400, "9y"),
    ],
)  # fmt: skip
def test_ages_are_apimachinerys_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_timestamps_print_as_go_time_string() -> None:
    assert go_time("2024-05-01T10:00:00Z") == "2024-05-01 10:00:00 +0000 UTC"
    assert go_time(None) == "0001-01-01 00:00:00 +0000 UTC"


# ------------------------------------------------------------------------------------ queues


def queue(name: str, weight: int, state: str, parent: str = "") -> dict[str, Any]:
    spec = {"weight": weight} | ({"parent": parent} if parent else {})
    return {"metadata": {"name": name}, "spec": spec, "status": {"state": state}}


def group(queue_name: str, phase: str) -> dict[str, Any]:
    return {"spec": {"queue": queue_name}, "status": {"phase": phase}}


def test_queue_table_counts_podgroups_per_phase() -> None:
    counts = queues.count_podgroups(
        [group("research", "Running"), group("research", "Running"), group("research", "Inqueue"),
         group("research", "Completed"), group("default", "Pending"), group("default", "Unknown"),
         group("research", ""), group("gone", "Running")]
    )  # fmt: skip
    text = queues.format_queues(
        [queue("default", 1, "Open", "root"), queue("research", 3, "Closed", "root")], counts
    )
    header = "Name" + " " * 21 + "Weight  State   Parent  Inqueue Pending Running Unknown Completed"
    assert text.splitlines() == [
        header,
        "default                  1       Open    root    0       1       0       1       0       ",
        "research                 3       Closed  root    1       0       2       0       1       ",
    ]
    assert text.endswith("0       1       \n")


def test_queue_create_closed_also_closes_it_and_operate_sends_commands() -> None:
    client = FakeClient({("queues", None, "q"): {"metadata": {"name": "q", "uid": "uid-q"}}})
    run(queues.create, client, ["queue", "create", "-n", "q2", "-w", "3", "-S", "closed"])
    (resource, body, _), (command_resource, command, namespace) = client.created
    assert resource is QUEUES
    assert body["spec"] == {"weight": 3} and body["status"] == {"state": "Closed"}
    assert command_resource is COMMANDS and namespace == "default"
    assert command["action"] == "CloseQueue"
    assert command["metadata"]["generateName"] == "q2-closequeue-"
    client.created.clear()
    run(queues.operate, client, ["queue", "operate", "-n", "q", "-a", "open"])
    [(_, command, namespace)] = client.created
    assert namespace == "default" and "namespace" not in command["metadata"]
    assert command["action"] == "OpenQueue"
    assert command["target"] == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": "q",
        "uid": "uid-q",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert command["metadata"]["ownerReferences"] == [command["target"]]
    run(queues.operate, client, ["queue", "operate", "-n", "q", "-a", "update", "-w", "7"])
    assert client.patched == [(QUEUES, "q", {"spec": {"weight": 7}})]


# ----------------------------------------------------------------------- jobflow, jobtemplate


def flow(name: str, phase: str, created: str = "2024-05-01T09:58:30Z") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "status": {"state": {"phase": phase}},
    }


def test_flow_tables_are_as_wide_as_their_longest_cell_plus_four() -> None:
    text = flows.format_table(flows.JOBFLOW, [flow("pipeline", "Running")], now=NOW)
    assert text == (
        "Name        Namespace    Phase      Age    \npipeline    default      Running    90s    \n"
    )
    templates = [{"metadata": {"name": "a", "namespace": "team-a"}}]
    assert flows.format_table(flows.JOBTEMPLATE, templates) == (
        "Name    Namespace    \na       team-a       \n"
    )


def test_flow_files_keep_documents_of_their_kind(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(
        "kind: JobTemplate\nmetadata: {name: a}\nspec: {}\n---\n"
        "kind: JobFlow\nmetadata: {name: f, namespace: team}\nspec: {flows: [{name: a}]}\n"
        "---\n# a comment only\n---\nmetadata: {name: g}\nspec: {description: 'x --- y'}\n"
    )
    docs = flows.read_documents(str(path), flows.JOBFLOW)
    assert [d["metadata"]["name"] for d in docs] == ["f", "g"]
    assert docs[1]["spec"]["description"] == "x --- y"  # not split inside a string
    assert docs[1]["kind"] == "JobFlow"
    client = FakeClient({})
    create = partial(flows.create, kind=flows.JOBTEMPLATE)
    out = run(create, client, ["jobtemplate", "create", "-f", str(path)])
    # A document naming no kind is taken as the kind being created, as Volcano takes it.
    assert out == "Created JobTemplate: default/a\nCreated JobTemplate: default/g\n"
    assert [(c[1]["metadata"]["name"], c[2]) for c in client.created] == [
        ("a", "default"),
        ("g", "default"),
    ]


def test_describe_drops_managed_fields_and_sorts_yaml_keys() -> None:
    obj = {
        "metadata": {"name": "a", "managedFields": [{"manager": "kubectl"}]},
        "spec": {"tasks": [{"replicas": 1}]},
    }
    text = flows.render(obj, flows.JOBTEMPLATE, "yaml")
    assert text == (
        "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobTemplate\nmetadata:\n  name: a\n"
        "spec:\n  tasks:\n  - replicas: 1\n"
    )
    assert flows.render(obj, flows.JOBTEMPLATE, "json").startswith(
        '{\n  "apiVersion": "flow.volcano.sh/v1alpha1",\n  "kind": "JobTemplate",'
    )


# -------------------------------------------------------------------------------------- pods


def pod(name: str, **status: Any) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "default", "creationTimestamp": "2024-05-01T09:59:00Z"}
    metadata.update(status.pop("meta", {}))
    return {
        "metadata": metadata,
        "spec": {"containers": [{"name": "c"}], **status.pop("spec", {})},
        "status": status,
    }


RUNNING = {"name": "c", "ready": True, "state": {"running": {}}, "restartCount": 0}


@pytest.mark.parametrize(
    ("obj", "ready", "status", "restarts"),
    [
        (pod("p", phase="Pending"), "0/1", "Pending", "0"),
        (pod("p", phase="Running", containerStatuses=[RUNNING]), "1/1", "Running", "0"),
        (
            pod("p", phase="Succeeded", containerStatuses=[
                {"name": "c", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
            ]),
            "0/1", "Completed", "0",
        ),
        (
            pod("p", phase="Running", containerStatuses=[
                {"name": "c", "restartCount": 3,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"finishedAt": "2024-05-01T09:59:30Z"}}}
            ]),
            "0/1", "CrashLoopBackOff", "3 (30s ago)",
        ),
        (
            pod("p", phase="Pending", spec={"initContainers": [{"name": "i"}]},
                initContainerStatuses=[{"name": "i", "state": {"running": {}}}]),
            "0/1", "Init:0/1", "0",
        ),
        (
            pod("p", phase="Failed", containerStatuses=[
                {"name": "c", "state": {"terminated": {"exitCode": 2}}}
            ]),
            "0/1", "ExitCode:2", "0",
        ),
        (
            pod("p", phase="Running", containerStatuses=[RUNNING],
                meta={"deletionTimestamp": "2024-05-01T10:00:00Z"}),
            "1/1", "Terminating", "0",
        ),
        (pod("p", phase="Pending", conditions=[
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
         "0/1", "SchedulingGated", "0"),
    ],
)  # fmt: skip
def test_pod_status_is_kubectls(
    obj: dict[str, Any], ready: str, status: str, restarts: str
) -> None:
    row = pods.pod_row(obj, now=NOW)
    assert (row["Ready"], row["Status"], row["Restart"], row["Age"]) == (
        ready,
        status,
        restarts,
        "60s",
    )


def labelled(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    notes = {}
    if "annotation" in labels:
        notes["scheduling.volcano.sh/queue-name"] = labels.pop("annotation")
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": notes}
    }


def test_pod_selection_follows_volcano() -> None:
    items = [
        labelled("b-0", **{"volcano.sh/job-name": "b", "volcano.sh/queue-name": "q"}),
        labelled("a-0", "z", **{"volcano.sh/job-name": "a", "volcano.sh/queue-name": "q"}),
        labelled("plain", annotation="q"),
        labelled("other"),
    ]
    names = lambda kept: [p["metadata"]["name"] for p in kept]  # noqa: E731
    assert names(pods.select_pods(items)) == ["b-0", "a-0"]  # sorted by namespace, name
    assert names(pods.select_pods(items, queue="q")) == ["b-0", "plain", "a-0"]
    assert names(pods.select_pods(items, job="b", queue="q")) == ["b-0"]
    with pytest.raises(Exception, match="the input vcjob b does not match the queue r"):
        pods.select_pods(items, job="b", queue="r")


def test_pod_table_widths() -> None:
    text = pods.format_pods([pod("train-w-0", phase="Pending")], all_namespaces=True, now=NOW)
    assert text == (
        "Namespace      Name             Ready      Status         Restart  Age        \n"
        "default        train-w-0        0/1        Pending        0        60s        \n"
    )


# ---------------------------------------------------------------------------------- job view


def test_job_view_is_volcanos_dump() -> None:
    job = vcjob("train", minAvailable=2, running=2, state={"phase": "Running"})
    job["metadata"]["labels"] = {"b": "2", "a": "1"}
    job["spec"]["tasks"] = [
        {
            "name": "worker",
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "image": "busybox", "command": ["sleep", "1"],
                         "resources": {"requests": {"cpu": "1000m"}}}
                    ],
                    "restartPolicy": "Never",
                }
            },
        }
    ]  # fmt: skip
    text = job_view.format_job(job)
    lines = text.splitlines()
    assert lines[:3] == [
        "Name:       \ttrain",
        "Namespace:  \tdefault",
        'Labels:     \t{"a":"1","b":"2"}',
    ]
    assert "Annotations:\t<none>" in lines
    assert "  Creation Timestamp:\t2024-05-01 10:00:00 +0000 UTC" in lines
    assert "    Env:\t[]" in lines
    assert "    Name:\tworker" in lines
    assert "          Command:\n            sleep\n            1\n" in text
    assert "              Cpu:   \t1\n              Memory:\t0\n" in text  # requests
    assert "  Running:      \t2" in lines and "  Min Available:\t2" in lines
    assert "  Pending:      \t0" not in text  # zero counts are left out
    assert text.endswith("  State:\n    Phase:\tRunning\n")


def test_job_view_events_are_the_jobs() -> None:
    job = vcjob("train")
    events = [
        {"involvedObject": {"kind": "Job", "name": "train"}, "type": "Normal",
         "reason": "ExecuteAction", "message": "Start to execute action SyncJob ",
         "firstTimestamp": "2024-05-01T09:59:00Z", "lastTimestamp": "2024-05-01T09:59:50Z",
         "count": 3, "source": {"component": "vc-controller-manager"}},
        {"involvedObject": {"kind": "Job", "name": "train"}, "type": "Warning",
         "reason": "PodGroupPending", "message": "waiting", "eventTime": "2024-05-01T09:59:30Z",
         "reportingComponent": "vulcan-controllers", "reportingInstance": "host-1"},
        {"involvedObject": {"kind": "PodGroup", "name": "train"}, "reason": "Other"},
        {"involvedObject": {"kind": "Job", "name": "train-2"}, "reason": "Other"},
    ]  # fmt: skip
    kept = job_view.job_events(events, job)
    assert [e["reason"] for e in kept] == ["ExecuteAction", "PodGroupPending"]
    lines = job_view.format_events(kept, now=NOW).splitlines()
    assert lines[0] == "Events:"
    assert lines[1].split("\t") == [f"{'Type':<15}", f"{'Reason':<40}", f"{'Age':<30}",
                                    f"{'From':<40}", "Message"]  # fmt: skip
    fields = [f.strip() for f in lines[3].split("\t")]
    assert fields == ["Normal", "ExecuteAction", "10s (x3 over 60s)", "vc-controller-manager",
                      "Start to execute action SyncJob"]  # fmt: skip
    fields = [f.strip() for f in lines[4].split("\t")]
    assert fields == ["Warning", "PodGroupPending", "30s", "vulcan-controllers, host-1", "waiting"]
    assert job_view.format_events([]) == "Events: \t<none>\n"


def test_job_view_still_shows_the_job_when_events_are_forbidden(
    capsys: pytest.CaptureFixture[str],
) -> None:
    class NoEvents(FakeClient):
        async def list(self, resource: Any, namespace: str | None = None, **_: Any) -> Any:
            raise ApiError(403, "Forbidden", 'events is forbidden: User "u" cannot list events')

    client = NoEvents({("jobs", "default", "train"): vcjob("train")})
    out = run(job_view.view, client, ["job", "view", "-N", "train"])
    assert out.startswith("Name:       \ttrain\n") and "Events" not in out
    assert capsys.readouterr().err == (
        'vcctl: cannot list events: events is forbidden: User "u" cannot list events\n'
    )
