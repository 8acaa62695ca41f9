"""What the install's kube-scheduler profile needs for the extender's conf (issue 37): the
second-scheduler install is what `plugins.framework.kube_scoring.plan_profile` says for the default
conf (manifests/base/extender.yaml): with its gang plugin no prioritize call and kube-scheduler's
default scoring; a test keeps the two equal, and `vulcan scheduler-scoring` prints the plan for
any conf. The cluster-scheduler stanza keeps prioritize (its plain opted-in pods are scored in
the profile they name, usually the cluster's default one)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from plugins.framework.config import parse_scheduler_config
from plugins.framework.kube_scoring import KubeScoring, plan_profile, render_node_order
from tests.helpers import REPO
from vulcan.cli import main

MANIFESTS = REPO / "manifests"


def configmap(path: str, name: str) -> dict[str, Any]:
    for doc in yaml.safe_load_all((MANIFESTS / path).read_text()):
        if doc and doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == name:
            return dict(doc["data"])
    raise AssertionError(f"{path} has no ConfigMap {name}")


def default_conf_text() -> str:
    return str(configmap("base/extender.yaml", "vulcan-scheduler-conf")["volcano-scheduler.conf"])


def installed_configs() -> dict[str, dict[str, Any]]:
    """overlay -> the scheduler configuration (or stanza) it installs."""
    second = configmap("overlays/second-scheduler/scheduler.yaml", "vulcan-scheduler-config")
    cluster = configmap(
        "overlays/cluster-scheduler/extenders.yaml", "vulcan-kube-scheduler-extenders"
    )
    return {
        "second-scheduler": yaml.safe_load(second["config.yaml"]),
        "cluster-scheduler": yaml.safe_load(cluster["extenders.yaml"]),
    }


def test_the_install_profile_is_the_plan_for_the_default_conf() -> None:
    plan = plan_profile(parse_scheduler_config(default_conf_text()))
    config = installed_configs()["second-scheduler"]
    (profile,) = [p for p in config["profiles"] if p["schedulerName"] == "volcano"]
    fields = plan.scoring.profile_fields() if plan.scoring is not None else {}
    assert {k: v for k, v in profile.items() if k != "schedulerName"} == fields, plan.why
    verbs = sorted(v for e in config["extenders"] for v in e if v.endswith("Verb"))
    if plan.prioritize:
        assert verbs == ["bindVerb", "filterVerb", "preemptVerb", "prioritizeVerb"], plan.why
    else:
        # No extender entry asks for prioritize; filter, preempt and bind are still called.
        assert verbs == ["bindVerb", "filterVerb", "preemptVerb"], plan.why
        assert not any("weight" in e for e in config["extenders"])
    # The default conf has the gang plugin: nothing left to score, no call.
    assert not plan.prioritize and plan.scoring is None


def test_the_cluster_scheduler_stanza_keeps_prioritize_and_the_default_scoring() -> None:
    config = installed_configs()["cluster-scheduler"]
    assert config["profiles"] == [{"schedulerName": "volcano"}]
    assert config["extenders"][0]["prioritizeVerb"] == "prioritize"
    assert config["extenders"][0]["weight"] == 1


def test_the_command_prints_the_plan_and_the_profile_fields(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(default_conf_text())
    assert main(["scheduler-scoring", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# drop `prioritizeVerb` and `weight` from the extender entry: every pod")
    assert "keeps kube-scheduler's default scoring" in out
    # A conf without the gang plugin: each pod on its own, the node order rendered.
    text = "actions: allocate\ntiers:\n- plugins:\n  - name: nodeorder\n    arguments:\n"
    conf.write_text(text + "      balancedresource.weight: 0\n  - name: binpack\n")
    assert main(["scheduler-scoring", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    rendered = render_node_order(parse_scheduler_config(conf.read_text()))
    assert isinstance(rendered, KubeScoring)
    assert yaml.safe_load(out) == rendered.profile_fields()
    # Up to kube-scheduler 1.35 nodeorder's balance is expressible too.
    conf.write_text(text + "      balancedresource.weight: 1\n  - name: binpack\n")
    assert main(["scheduler-scoring", "--config", str(conf), "--kube-version", "1.35"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["plugins"]
    assert main(["scheduler-scoring", "--config", str(conf)]) == 0
    assert "not expressible: nodeorder's balancedresource" in capsys.readouterr().out


def test_the_command_says_why_a_packing_conf_keeps_prioritize(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n")
    assert main(["scheduler-scoring", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# keep `prioritizeVerb: prioritize`")
    assert "not expressible: the conf packs on cpu" in out
    assert yaml.safe_load(out) is None  # comments only: nothing to merge
    assert main(["scheduler-scoring", "--kube-version", "one"]) == 2


def test_the_command_names_a_bad_conf(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - name: binpak\n")
    assert main(["scheduler-scoring", "--config", str(conf)]) == 1
    assert "binpak" in capsys.readouterr().err


def test_the_real_throughput_benchmark_runs_the_install_scoring_or_the_old_prioritize() -> None:
    from bench.real_cluster import (
        install_extenders,
        install_scoring,
        scheduler_config,
        with_prioritize,
    )

    extenders, scoring = install_extenders(), install_scoring()
    assert scoring == {}  # the default conf's gang plugin: kube-scheduler's default scoring
    rendered = {"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 2}]}}}
    config = scheduler_config(REPO / "kubeconfig", extenders, "http://127.0.0.1:1", rendered)
    (profile,) = config["profiles"]
    assert profile["plugins"] == rendered["plugins"]
    assert "prioritizeVerb" not in config["extenders"][0]
    old = scheduler_config(REPO / "kubeconfig", with_prioritize(extenders), "http://x", {})
    assert old["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert old["extenders"][0]["prioritizeVerb"] == "prioritize"
    assert old["extenders"][0]["weight"] == 1
    alone = scheduler_config(REPO / "kubeconfig", extenders, None, rendered)
    assert alone["profiles"] == [{"schedulerName": "default-scheduler"}]
