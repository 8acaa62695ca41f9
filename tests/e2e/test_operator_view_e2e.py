"""What an operator sees on `vulcan sim up --with-extender --with-controllers`: Events read with
the real kubectl the way users read them."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import SimCluster, start_cluster, wait_for

JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-operator"),
        "--nodes",
        "2",
        "--node-profile",
        "cpu=4,memory=16Gi",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "1s",
    )


def vcjob(name: str, replicas: int, cpu: str = "1", queue: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "queue": queue,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": cpu}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def job_phase(cluster: SimCluster, name: str) -> str:
    job = cluster.get(f"{JOBS}/{name}") or {}
    return ((job.get("status") or {}).get("state") or {}).get("phase", "")


def test_kubectl_sorts_controller_and_extender_events_by_last_timestamp(
    cluster: SimCluster,
) -> None:
    cluster.apply(vcjob("ev", 2))
    wait_for("job ev to complete", lambda: job_phase(cluster, "ev") == "Completed", 90)
    uid = cluster.get(f"{JOBS}/ev")["metadata"]["uid"]
    cluster.apply(
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": "ev-abort"},
            "action": "AbortJob",
            "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "ev"}
            | {"uid": uid},
        }
    )  # the job controller says it took the Command: an event of its own (CommandIssued)

    # The controllers' events are core/v1 (client-go's record), the extender's events.k8s.io.
    def by_component() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        core = cluster.get("/api/v1/namespaces/default/events")["items"]
        mine = [e for e in core if e["involvedObject"].get("name", "").startswith("ev")]
        ours = [e for e in mine if e["source"].get("component") == "vulcan-controllers"]
        extender = [e for e in mine if e.get("reportingComponent") == "vulcan"]
        if ours and extender:
            return ours, extender
        seen.append(sorted((e["source"].get("component"), e["reason"]) for e in mine))
        return None

    seen: list[Any] = []
    try:
        controllers, extender = wait_for("the job's events", by_component, 30)
    except AssertionError:
        raise AssertionError(seen[-1:]) from None
    for event in controllers:
        assert event["lastTimestamp"] and event["firstTimestamp"], event
        assert event["count"] >= 1 and event["eventTime"] is None, event
    # As kube-apiserver shows an events.k8s.io event through core/v1: no lastTimestamp.
    assert all(e["lastTimestamp"] is None and e["eventTime"] for e in extender), extender

    table = cluster.kubectl("get", "events", "--sort-by=.lastTimestamp")
    assert "No resources found" not in table
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["LAST", "SEEN", "TYPE"], lines
    rows = [line.split() for line in lines[1:]]
    reasons = {row[2] for row in rows if row[3].split("/", 1)[1].startswith("ev")}
    controller_reasons = {e["reason"] for e in controllers}
    extender_reasons = {e["reason"] for e in extender}
    assert controller_reasons <= reasons, (controller_reasons, table)
    assert extender_reasons <= reasons, (extender_reasons, table)
    # And the order is by lastTimestamp: the controllers' rows ascend.
    listed = json.loads(cluster.kubectl("get", "events", "--sort-by=.lastTimestamp", "-o", "json"))
    stamps = [e["lastTimestamp"] for e in listed["items"] if e.get("lastTimestamp")]
    assert stamps == sorted(stamps)


def help_texts(text: str) -> dict[str, str]:
    return {
        line.split()[2]: line.split(" ", 3)[3]
        for line in text.splitlines()
        if line.startswith("# HELP ") and line.split()[2].startswith(("vulcan_", "volcano_"))
    }


def test_metric_help_texts_are_sentences(cluster: SimCluster) -> None:
    cluster.apply(vcjob("helps", 1))
    wait_for("job helps to complete", lambda: job_phase(cluster, "helps") == "Completed", 90)
    line = next(x for x in cluster.lines if x.startswith("vulcan controllers:"))
    with urllib.request.urlopen(line.split()[2].rstrip("/") + "/metrics", timeout=10) as response:
        controllers = response.read().decode()
    helps = help_texts(cluster.metrics()) | help_texts(controllers)
    assert any(name.startswith("volcano_queue_") for name in helps), helps
    assert any(name.startswith("volcano_job_") for name in helps), helps
    bad = {n: h for n, h in helps.items() if not (h[:1].isupper() or h[:1].isdigit())}
    bad |= {n: h for n, h in helps.items() if not h.endswith(".")}
    assert not bad, bad
