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
        "--log-format",
        "json",
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


def decision_lines(cluster: SimCluster, job: str) -> list[dict[str, Any]]:
    """The decision lines naming `job` in the extender's and the controllers' logs (JSON, as
    `--log-format json` writes them), in time order."""
    lines = []
    for name in ("extender", "controllers"):
        for text in (cluster.state / "logs" / f"{name}.log").read_text().splitlines():
            if not text.startswith("{"):
                continue
            entry = json.loads(text)
            if entry.get("logger") == "vulcan.decisions" and entry.get("job") == job:
                lines.append(entry)
    return sorted(lines, key=lambda e: e["ts"])


def test_one_job_followed_through_the_logs_alone(cluster: SimCluster) -> None:
    """qa's job takes the whole cluster; qb's job reclaims qb's share (the whole qa gang is
    evicted, its job restarts it), and once qb's job is done qa's job is admitted again: every
    step is a decision line naming the job."""
    for name in ("qa", "qb"):
        cluster.apply(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1, "reclaimable": True},
            }
        )
    follow = vcjob("follow", 2, cpu="4", queue="qa")
    template = follow["spec"]["tasks"][0]["template"]
    template["metadata"] = {"annotations": {"vulcan.sh/sim-duration": "600s"}}
    cluster.apply(follow)
    wait_for(
        "follow to run",
        lambda: (
            len(
                [
                    p
                    for p in cluster.pods(selector="volcano.sh/job-name=follow")
                    if p["status"].get("phase") == "Running"
                ]
            )
            == 2
        ),
        60,
    )
    # 1 cpu: with the cluster full, overcommit (factor 1.2 of 8 cpu) enqueues at most 1.6 cpu
    # more, as in Volcano; qb then deserves 1, and qa's 8 are over its 7.
    cluster.apply(vcjob("taker", 1, cpu="1", queue="qb"))
    wait_for("taker to complete", lambda: job_phase(cluster, "taker") == "Completed", 120)

    def readmitted() -> list[str] | None:
        said = [e["msg"] for e in decision_lines(cluster, "default/follow")]
        reclaimed = said.index("gang reclaimed") if "gang reclaimed" in said else None
        if reclaimed is None or "gang bound" not in said[reclaimed:]:
            return None
        return said

    said = wait_for("follow admitted and bound again after the reclaim", readmitted, 120)
    first_bound = said.index("gang bound")
    reclaimed = said.index("gang reclaimed")
    assert "gang admitted" in said[:first_bound], said
    assert first_bound < reclaimed, said
    assert "gang admitted" in said[reclaimed:], said
    assert "gang bound" in said[said.index("gang admitted", reclaimed) :], said
    # The job's own states, from the job controller, in the same grep; and no line per pass.
    assert "job state" in said, said
    assert said.count("gang enqueued") <= said.count("gang admitted"), said
    lines = decision_lines(cluster, "default/follow")
    admitted = next(e for e in lines if e["msg"] == "gang admitted")
    assert admitted["queue"] == "qa" and admitted["members"] == 2 and len(admitted["nodes"]) == 2
    taken = next(e for e in lines if e["msg"] == "gang reclaimed")
    assert taken["by"] == "default/taker" and taken["pods"] == 2
    reclaims = decision_lines(cluster, "default/taker")
    assert any(
        e["msg"] == "gang reclaims" and e["victims"] == ["default/follow"] for e in reclaims
    ), reclaims
    cluster.kubectl("delete", "vcjob", "follow", "--wait=false")
