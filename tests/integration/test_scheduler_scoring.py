"""The install's kube-scheduler profiles score nodes as the extender's conf orders them, with no
prioritize call (issue 37): both overlays carry the rendering of the default conf
(manifests/base/extender.yaml), so the two cannot drift; `vulcan scheduler-scoring` prints it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from plugins.config import parse_scheduler_config
from plugins.kube_scoring import KubeScoring, render_node_order
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


@pytest.mark.parametrize("overlay", ["second-scheduler", "cluster-scheduler"])
def test_the_install_profile_is_the_rendering_of_the_default_conf(overlay: str) -> None:
    rendered = render_node_order(parse_scheduler_config(default_conf_text()))
    assert isinstance(rendered, KubeScoring), rendered
    config = installed_configs()[overlay]
    (profile,) = [p for p in config["profiles"] if p["schedulerName"] == "volcano"]
    fields = rendered.profile_fields()
    assert {k: profile.get(k) for k in fields} == fields, "render with `vulcan scheduler-scoring`"
    # No extender entry asks for prioritize; filter, preempt and bind are still called.
    verbs = [v for e in config["extenders"] for v in e if v.endswith("Verb")]
    assert "prioritizeVerb" not in verbs
    assert sorted(verbs) == ["bindVerb", "filterVerb", "preemptVerb"]
    assert not any("weight" in e for e in config["extenders"])


def test_the_command_prints_the_profile_fields(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(default_conf_text())
    assert main(["scheduler-scoring", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    rendered = render_node_order(parse_scheduler_config(default_conf_text()))
    assert isinstance(rendered, KubeScoring)
    assert yaml.safe_load(out) == rendered.profile_fields()
    assert "drop `prioritizeVerb`" in out


def test_the_command_says_why_a_packing_conf_keeps_prioritize(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n")
    assert main(["scheduler-scoring", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# not expressible: the conf packs on cpu")
    assert "keep `prioritizeVerb: prioritize`" in out
    assert yaml.safe_load(out) is None  # comments only: nothing to merge


def test_the_command_names_a_bad_conf(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - name: binpak\n")
    assert main(["scheduler-scoring", "--config", str(conf)]) == 1
    assert "binpak" in capsys.readouterr().err
