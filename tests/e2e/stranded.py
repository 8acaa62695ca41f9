"""The scenario of a gang stranded by a lost node, for both tiers (`test_stranded_gang_e2e`,
`tests/real/test_stranded_gang_real`): a Volcano Job of three 3-cpu workers (minAvailable 3)
on two 8-cpu nodes, one of which fails. The node lifecycle controller evicts its members; no
kubelet confirms them gone, so they stay terminating and the job controller cannot make them
again under their names. The survivors, too few for the gang, are evicted (GangStranded) rather
than run half a gang; nothing of the job binds while the node is lost (one node holds two of
its workers, not three); when the node is back the job runs whole again."""

from __future__ import annotations

import time
from typing import Any

from tests.e2e.conftest import SimCluster, wait_for

JOB = "stranded"
WORKERS = 3


def job_manifest() -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": JOB},
        "spec": {
            "minAvailable": WORKERS,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": WORKERS,
                    "template": {
                        "metadata": {"annotations": {"vulcan.sh/sim-duration": "forever"}},
                        "spec": {
                            "containers": [container],
                            "restartPolicy": "OnFailure",
                            "terminationGracePeriodSeconds": 1,
                        },
                    },
                }
            ],
        },
    }


def members(cluster: SimCluster) -> list[dict[str, Any]]:
    return cluster.pods(selector=f"volcano.sh/job-name={JOB}")


def live_bound(cluster: SimCluster) -> list[dict[str, Any]]:
    return [
        p
        for p in members(cluster)
        if p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")
    ]


def group_events(cluster: SimCluster) -> list[dict[str, Any]]:
    groups = cluster.get("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups")
    name = next(
        g["metadata"]["name"]
        for g in groups["items"]
        if any(o.get("name") == JOB for o in g["metadata"].get("ownerReferences") or ())
    )
    return cluster.events(name)


def a_gang_stranded_by_a_lost_node_is_evicted_and_runs_whole_again(cluster: SimCluster) -> None:
    cluster.apply(job_manifest())
    first = wait_for(
        "the job's workers to run", lambda: len(pods := live_bound(cluster)) == WORKERS and pods
    )
    lost = first[0]["spec"]["nodeName"]
    on_lost = {p["metadata"]["name"] for p in first if p["spec"]["nodeName"] == lost}
    survivors = {p["metadata"]["name"] for p in first} - on_lost
    assert survivors, f"every worker on {lost}: the scenario needs two nodes"
    cluster.kubectl("annotate", "node", lost, "vulcan.sh/sim-node-state=failed")
    try:
        wait_for(
            f"the members on {lost} to be evicted",
            lambda: all(
                p["metadata"].get("deletionTimestamp")
                for p in members(cluster)
                if p["metadata"]["name"] in on_lost
            ),
            90,
        )
        wait_for(
            "the survivors to be evicted (the gang cannot be made whole)",
            lambda: not live_bound(cluster),
            60,
        )
        stranded = wait_for(
            "the GangStranded event",
            lambda: [e for e in group_events(cluster) if e.get("reason") == "GangStranded"],
        )
        note = stranded[0].get("note", "")
        assert "cannot be made whole" in note and f"on node {lost}" in note, note
        # Its pods are made again, and none binds while its lost members hold their names.
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            bound = [p["metadata"]["name"] for p in live_bound(cluster)]
            assert not bound, f"half of the gang bound while {lost} was lost: {bound}"
            time.sleep(0.2)
    finally:
        cluster.kubectl("annotate", "node", lost, "vulcan.sh/sim-node-state-")
    wait_for("the job to run whole again", lambda: len(live_bound(cluster)) == WORKERS, 120)
    cluster.kubectl("delete", "vcjob", JOB, "--wait=false")
