"""The rendered scoring places pods where the extender's prioritize did (issue 37), on the real
kube-scheduler v1.36: a recorded workload (tests/real/fixtures/scoring-workload.json: two
groups, then 240 plain pods of mixed sizes, one pod at a time, on 16 nodes of distinct shapes)
scheduled twice beside vulcan's install, its extender running
tests/real/fixtures/scoring-conf.yaml (no gang plugin, so the score decides where each pod
goes; a node order kube-scheduler 1.36 can express, with LeastAllocated resource weights and
non-default plugin weights):

- before: the install's extender entries with `prioritizeVerb` (as the install had them) and
  kube-scheduler's default scoring;
- after: the entries without it and the scoring `plugins.kube_scoring.plan_profile` renders.

One kube-scheduler runs both profiles with the same configuration: the default one for the
plain pods (which name no vulcan scheduler, so are in no PodGroup, as in
bench/real_throughput.py), `volcano` for the groups' pods. kube-scheduler picks at random among
equal top scores: the workload was drawn so that every decision has a unique top in both
scorings, and none is one that vulcan's per-pod rescale or 0..10 rounding decides (there the
rendered scoring wins; tests/real/scoring_workload.py counts the draws each reason rejected).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from plugins.config import parse_scheduler_config
from plugins.kube_scoring import plan_profile, scheduler_profile
from tests.e2e.conftest import wait_for
from tests.real.conftest import RealCluster
from tests.real.install import find
from tests.real.processes import Child

pytestmark = pytest.mark.real

FIXTURES = Path(__file__).parent / "fixtures"
WORKLOAD = json.loads((FIXTURES / "scoring-workload.json").read_text())
CONF = FIXTURES / "scoring-conf.yaml"
INSTALL_MODE = "second-scheduler"
EXTENDER_FLAGS = (f"--config={CONF}",)  # after the Deployment's --config: the one argparse keeps
NODE_PROFILES = [f"count=1,cpu={n['cpu']},memory={n['memory']}" for n in WORKLOAD["nodes"]]
POD_DURATION = "24h"  # every pod keeps its room until the phase deletes it
PODS = "/api/v1/namespaces/default/pods"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"


def install_config(cluster: RealCluster) -> dict[str, Any]:
    text = find(cluster.install.docs, "ConfigMap", "vulcan-scheduler-config")["data"]
    return dict(yaml.safe_load(text["config.yaml"]))


def phase_config(cluster: RealCluster, *, prioritize: bool) -> dict[str, Any]:
    """One kube-scheduler for both profiles with the install's extender entries (the local
    URL); `prioritize`: the entries and scoring as they were before the rendering, else as
    `plan_profile` has them for the conf."""
    install = install_config(cluster)
    extenders = copy.deepcopy(install["extenders"])
    for entry in extenders:
        entry["urlPrefix"] = f"{cluster.install.extender_url}/v1"
    profiles = []
    for name in ("default-scheduler", "volcano"):
        if prioritize:
            profile, entries = {"schedulerName": name}, copy.deepcopy(extenders)
            entries[0] = {**entries[0], "prioritizeVerb": "prioritize", "weight": 1}
        else:
            plan = plan_profile(parse_scheduler_config(CONF.read_text()))
            profile, entries = scheduler_profile({"schedulerName": name}, extenders, plan)
        profiles.append(profile)
    return {
        "apiVersion": install["apiVersion"],
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {
            "kubeconfig": str(cluster.control_plane.admin_kubeconfig),
            **install["clientConnection"],
        },
        "profiles": profiles,
        "extenders": entries,
    }


def pod(name: str, cpu: str, memory: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"workload": "scoring"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
            **spec,
        },
    }


def node_of(cluster: RealCluster, name: str) -> str:
    return wait_for(
        f"pod {name} to be bound",
        lambda: ((cluster.pod(name) or {}).get("spec") or {}).get("nodeName"),
        60,
    )


def run_phase(cluster: RealCluster, config: dict[str, Any], tag: str) -> dict[str, str]:
    """The workload scheduled by a kube-scheduler with `config`: pod name -> node."""
    path = cluster.install.root / f"placement-{tag}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    scheduler = Child(
        f"placement-scheduler-{tag}",
        [str(cluster.control_plane.assets.kube_scheduler), f"--config={path}", "--secure-port=0"],
        cluster.control_plane.logs,
    )
    scheduler.start()
    placed: dict[str, str] = {}
    try:
        # One pod at a time: each decision sees every earlier pod bound. The groups first.
        for gang in WORKLOAD["gangs"]:
            name = gang["name"]
            group = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {"minMember": gang["members"]},
            }
            cluster.request(PODGROUPS, group, "POST")
            for index in range(gang["members"]):
                member = f"{name}-{index}"
                body = pod(member, gang["cpu"], gang["memory"], schedulerName="volcano")
                body["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": name}
                cluster.request(PODS, body, "POST")
                placed[member] = node_of(cluster, member)
        for spec in WORKLOAD["pods"]:
            cluster.request(PODS, pod(spec["name"], spec["cpu"], spec["memory"]), "POST")
            placed[spec["name"]] = node_of(cluster, spec["name"])
    finally:
        scheduler.stop()
    cluster.kubectl("delete", "pods,podgroups", "--all", "--wait=true", "--timeout=120s")
    wait_for("the phase's pods to be gone", lambda: not cluster.pods(), 120)
    return placed


def test_the_rendered_scoring_places_every_pod_where_prioritize_did(cluster: RealCluster) -> None:
    # The install (the default conf, with the gang plugin) asks for no prioritize call.
    assert not any("prioritizeVerb" in e for e in install_config(cluster)["extenders"])
    # This conf has no gang plugin: its node order is rendered, and the call dropped.
    plan = plan_profile(parse_scheduler_config(CONF.read_text()))
    assert plan.scoring is not None and not plan.prioritize, plan.why
    assert plan.scoring.fit_resources == {"cpu": 7, "memory": 5}
    # The install's own schedulers are stopped: this test's one scheduler takes every pod.
    for child in cluster.install.children:
        if child.name in ("kube-scheduler", "vulcan-scheduler"):
            child.stop()
    started = time.monotonic()
    before = run_phase(cluster, phase_config(cluster, prioritize=True), "before")
    after = run_phase(cluster, phase_config(cluster, prioritize=False), "after")
    differ = {
        name: (before[name], after.get(name)) for name in before if before[name] != after.get(name)
    }
    assert not differ, f"{len(differ)} of {len(before)} pods placed differently: {differ}"
    # A workload that spreads over the nodes (not all on one or two), both gangs whole.
    assert len(set(before.values())) >= 12, sorted(set(before.values()))
    assert all(f"{g['name']}-0" in after for g in WORKLOAD["gangs"])
    print(f"{len(before)} pods, same nodes before and after, {time.monotonic() - started:.0f} s")
