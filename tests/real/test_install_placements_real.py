"""The second-scheduler install without the prioritize call places vulcan's pods where it did
with it (issue 37), on the real kube-scheduler v1.36 and the install's default conf: every pod
of the `volcano` profile is in a PodGroup (the podgroup controller groups a plain one), and with
the conf's gang plugin filter narrows each to the one node vulcan reserved for it, so no score
is left to decide. The workload (tests/real/fixtures/scoring-workload.json): its first 60 plain
pods, one at a time, as `volcano` pods, then its two groups as gangs (minMember = all members,
created together, bound whole); before: the install's entries with `prioritizeVerb` and
`weight: 1`, as the install had them; after: the install's entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.real.conftest import RealCluster
from tests.real.placements import (
    PODS,
    create_group,
    differences,
    install_config,
    local_config,
    member,
    node_of,
    pod,
    scheduler,
    stop_install_schedulers,
    with_prioritize,
)

pytestmark = pytest.mark.real

WORKLOAD = json.loads((Path(__file__).parent / "fixtures" / "scoring-workload.json").read_text())
INSTALL_MODE = "second-scheduler"
NODE_PROFILES = [f"count=1,cpu={n['cpu']},memory={n['memory']}" for n in WORKLOAD["nodes"]]
POD_DURATION = "24h"  # every pod keeps its room until the phase deletes it
PLAIN = 60


GROUP = "scheduling.k8s.io/group-name"


def run_phase(cluster: RealCluster, config: dict[str, Any], tag: str) -> dict[str, str]:
    placed: dict[str, str] = {}
    with scheduler(cluster, config, tag):
        for spec in WORKLOAD["pods"][:PLAIN]:
            body = pod(spec["name"], spec["cpu"], spec["memory"], schedulerName="volcano")
            cluster.request(PODS, body, "POST")
            placed[spec["name"]] = node_of(cluster, spec["name"])
            # Placed through vulcan's gang path: the podgroup controller grouped it first.
            annotations = (cluster.pod(spec["name"]) or {})["metadata"].get("annotations") or {}
            assert annotations.get(GROUP, "").startswith("podgroup-"), annotations
        for gang in WORKLOAD["gangs"]:
            names = [f"{gang['name']}-{i}" for i in range(gang["members"])]
            create_group(cluster, gang["name"], gang["members"])
            for name in names:
                cluster.request(
                    PODS, member(name, gang["name"], gang["cpu"], gang["memory"]), "POST"
                )
            for name in names:
                placed[name] = node_of(cluster, name)
    return placed


def test_the_install_without_prioritize_places_vulcans_pods_where_it_did(
    cluster: RealCluster,
) -> None:
    installed = install_config(cluster)
    # The install asks for no prioritize call and keeps kube-scheduler's default scoring.
    assert not any("prioritizeVerb" in e for e in installed["extenders"])
    assert installed["profiles"] == [{"schedulerName": "volcano"}]
    stop_install_schedulers(cluster)
    profiles = installed["profiles"]
    before = run_phase(
        cluster, local_config(cluster, profiles, with_prioritize(installed["extenders"])), "before"
    )
    after = run_phase(cluster, local_config(cluster, profiles, installed["extenders"]), "after")
    differ = differences(before, after)
    assert not differ, f"{len(differ)} of {len(before)} pods placed differently: {differ}"
    assert len(after) == PLAIN + sum(g["members"] for g in WORKLOAD["gangs"])
    assert len(set(before.values())) >= 4, sorted(set(before.values()))
