"""The soak's workload generator (bench.soak_workload): a seed names one schedule, and the mix
holds every kind of work and disruption the soak promises."""

from __future__ import annotations

import itertools
from collections import Counter

from bench.soak_workload import Shape, schedule


def describe(seed: int, duration: float) -> list[tuple[float, str, str, str]]:
    return [(a.at, a.kind, a.name, repr(a.objects)) for a in schedule(seed, duration)]


def test_same_seed_same_schedule_and_another_seed_another() -> None:
    assert describe(7, 120.0) == describe(7, 120.0)
    assert describe(7, 120.0) != describe(8, 120.0)


def test_the_mix_holds_every_kind_of_work_and_disruption() -> None:
    actions = schedule(11, 1800.0)
    kinds = Counter(a.kind for a in actions)
    for kind in ("job", "gang", "pod", "delete-job", "delete-gang", "delete-member", "suspend"):
        assert kinds[kind] > 0, kind
    assert kinds["resume"] == kinds["suspend"]
    assert kinds["node-fail"] == kinds["node-recover"] == 6  # one per five minutes
    assert all(a.at < 1800.0 for a in actions)
    assert [a.at for a in actions] == sorted(a.at for a in actions)
    setup = actions[0]
    queues = [o for o in setup.objects if o["kind"] == "Queue"]
    assert 3 <= len(queues) <= 5
    assert sum(1 for q in queues if "capability" in q["spec"]) >= 2
    jobs = [a.objects[0]["spec"] for a in actions if a.kind == "job"]
    assert any(any("dependsOn" in t for t in j["tasks"]) for j in jobs)
    assert any(j["minAvailable"] < sum(t["replicas"] for t in j["tasks"]) for j in jobs)
    assert any(j.get("policies") for j in jobs)
    failing = [
        t
        for j in jobs
        for t in j["tasks"]
        if t["template"]["metadata"]["annotations"]["vulcan.sh/sim-exit-code"] != "0"
    ]
    assert failing and all(t["template"]["spec"]["restartPolicy"] == "Never" for t in failing)


def test_no_node_failure_when_asked() -> None:
    actions = schedule(3, 600.0, Shape(node_failure=False))
    assert not [a for a in actions if a.kind.startswith("node-")]


def test_deployments_only_where_a_controller_runs_and_the_rest_unchanged() -> None:
    without = schedule(5, 600.0, Shape(deployments=False))
    with_them = schedule(5, 600.0, Shape(deployments=True))
    assert not [a for a in without if "deployment" in a.kind]
    made = [a for a in with_them if a.kind == "deployment"]
    assert made and len(made) == len([a for a in with_them if a.kind == "delete-deployment"])
    assert made[0].objects[0]["spec"]["template"]["spec"]["schedulerName"] == "volcano"

    def others(actions: list) -> list:
        return [(a.at, a.kind, a.name) for a in actions if a.kind not in ("pod",)]

    kept = [a for a in others(with_them) if "deployment" not in a[1]]
    assert kept == others(without)


def test_the_light_shape_submits_a_fraction_of_the_heavy_one_in_bursts() -> None:
    def submissions(load: str) -> list[float]:
        actions = schedule(13, 1800.0, Shape(load=load))
        return [a.at for a in actions if a.kind in ("job", "gang", "pod")]

    heavy, light = submissions("heavy"), submissions("light")
    assert len(light) < len(heavy) / 4
    gaps = [b - a for a, b in itertools.pairwise(light)]
    bursts = sum(1 for gap in gaps if gap < 0.35)
    quiet = sum(1 for gap in gaps if gap >= 4.0)
    assert bursts >= 20 and quiet >= 20  # bursts of work between idle stretches
    assert schedule(13, 1800.0, Shape(load="heavy")) == schedule(13, 1800.0)  # unchanged
