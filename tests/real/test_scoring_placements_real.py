"""The rendered scoring places pods where the extender's prioritize did (issue 37), on the real
kube-scheduler v1.36: a recorded workload (tests/real/fixtures/scoring-workload.json: two
groups, then the first 120 of its 240 plain pods of mixed sizes, one pod at a time, on 16
nodes of distinct shapes) scheduled twice beside vulcan's install, its extender running
tests/real/fixtures/scoring-conf.yaml (no gang plugin, so the score decides where each pod
goes; a node order kube-scheduler 1.36 can express, with LeastAllocated resource weights and
non-default plugin weights):

- before: the install's extender entries with `prioritizeVerb` (as the install had them) and
  kube-scheduler's default scoring;
- after: the entries without it and the scoring `plugins.framework.kube_scoring.plan_profile`
renders.

One kube-scheduler runs both profiles with the same configuration: the default one for the
plain pods (which name no vulcan scheduler, so are in no PodGroup, as in
bench/real_throughput.py), `volcano` for the groups' pods. kube-scheduler picks at random among
equal top scores: the workload was drawn so that every decision has a unique top in both
scorings, and none is one that vulcan's per-pod rescale or 0..10 rounding decides (there the
rendered scoring wins; tests/real/scoring_workload.py counts the draws each reason rejected).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from plugins.framework.config import parse_scheduler_config
from plugins.framework.kube_scoring import plan_profile, scheduler_profile
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

FIXTURES = Path(__file__).parent / "fixtures"
WORKLOAD = json.loads((FIXTURES / "scoring-workload.json").read_text())
CONF = FIXTURES / "scoring-conf.yaml"
INSTALL_MODE = "second-scheduler"
EXTENDER_FLAGS = (f"--config={CONF}",)  # after the Deployment's --config: the one argparse keeps
NODE_PROFILES = [f"count=1,cpu={n['cpu']},memory={n['memory']}" for n in WORKLOAD["nodes"]]
POD_DURATION = "24h"  # every pod keeps its room until the phase deletes it
# The workload's first plain pods: each decision depends only on the pods before it, so a
# prefix keeps the recorded property (one top score in both scorings); 120 of the 240 halve
# the test's time in the suite (the whole workload passed too, in 125 s).
PLAIN = 120


def phase_config(cluster: RealCluster, *, prioritize: bool) -> dict[str, Any]:
    """One kube-scheduler for both profiles with the install's extender entries;
    `prioritize`: the entries and scoring as they were before the rendering, else as
    `plan_profile` has them for the conf."""
    extenders = install_config(cluster)["extenders"]
    names = ("default-scheduler", "volcano")
    if prioritize:
        return local_config(
            cluster, [{"schedulerName": n} for n in names], with_prioritize(extenders)
        )
    plan = plan_profile(parse_scheduler_config(CONF.read_text()))
    profiles = [scheduler_profile({"schedulerName": n}, extenders, plan)[0] for n in names]
    return local_config(cluster, profiles, scheduler_profile({}, extenders, plan)[1])


def run_phase(cluster: RealCluster, config: dict[str, Any], tag: str) -> dict[str, str]:
    """The workload, one pod at a time (each decision sees every earlier pod bound), the groups
    first: pod name -> node."""
    placed: dict[str, str] = {}
    with scheduler(cluster, config, tag):
        for gang in WORKLOAD["gangs"]:
            create_group(cluster, gang["name"], gang["members"])
            for index in range(gang["members"]):
                name = f"{gang['name']}-{index}"
                cluster.request(
                    PODS, member(name, gang["name"], gang["cpu"], gang["memory"]), "POST"
                )
                placed[name] = node_of(cluster, name)
        for spec in WORKLOAD["pods"][:PLAIN]:
            cluster.request(PODS, pod(spec["name"], spec["cpu"], spec["memory"]), "POST")
            placed[spec["name"]] = node_of(cluster, spec["name"])
    return placed


def test_the_rendered_scoring_places_every_pod_where_prioritize_did(cluster: RealCluster) -> None:
    # The install (the default conf, with the gang plugin) asks for no prioritize call.
    assert not any("prioritizeVerb" in e for e in install_config(cluster)["extenders"])
    # This conf has no gang plugin: its node order is rendered, and the call dropped.
    plan = plan_profile(parse_scheduler_config(CONF.read_text()))
    assert plan.scoring is not None and not plan.prioritize, plan.why
    assert plan.scoring.fit_resources == {"cpu": 7, "memory": 5}
    stop_install_schedulers(cluster)
    started = time.monotonic()
    before = run_phase(cluster, phase_config(cluster, prioritize=True), "before")
    after = run_phase(cluster, phase_config(cluster, prioritize=False), "after")
    differ = differences(before, after)
    assert not differ, f"{len(differ)} of {len(before)} pods placed differently: {differ}"
    # A workload that spreads over the nodes (not all on one or two), every pod placed.
    assert len(set(before.values())) >= 12, sorted(set(before.values()))
    assert len(after) == PLAIN + sum(g["members"] for g in WORKLOAD["gangs"])
    print(f"{len(before)} pods, same nodes before and after, {time.monotonic() - started:.0f} s")
