"""A scheduler conf naming a Volcano plugin or action vulcan does not implement is refused at
start-up, naming it and the names vulcan implements (not silently ignored)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from plugins.framework.config import ConfigError, default_config, parse_scheduler_config
from plugins.framework.registry import build_policy, require_implemented
from tests.helpers import REPO


def test_the_default_conf_is_implemented() -> None:
    require_implemented(default_config())


def test_an_unimplemented_plugin_is_named_with_its_place_and_the_known_names() -> None:
    conf = parse_scheduler_config(
        'actions: "enqueue, allocate"\n'
        "tiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: drf\n  - name: tdm\n"
    )
    with pytest.raises(ConfigError) as error:
        require_implemented(conf)
    message = str(error.value)
    assert message.startswith('tiers[1].plugins[1]: "tdm" is a Volcano plugin vulcan does not')
    assert "binpack" in message and "capacity" in message


def test_an_unimplemented_action_is_refused() -> None:
    conf = parse_scheduler_config('actions: "enqueue, allocate, shuffle"\n')
    with pytest.raises(ConfigError, match='actions: "shuffle" is a Volcano action'):
        require_implemented(conf)


def test_the_extender_refuses_to_start_on_such_a_conf(tmp_path: Path) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: deviceshare\n')
    result = subprocess.run(
        [sys.executable, "-m", "vulcan", "extender", "--config", str(conf), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 2, result.stderr
    assert '"deviceshare" is a Volcano plugin vulcan does not implement' in result.stderr
    assert str(conf) in result.stderr


def test_the_gang_layout_follows_the_confs_node_order() -> None:
    from plugins.framework.node_order import Framework

    def placement(plugins: str) -> str:
        return Framework(parse_scheduler_config(f"tiers:\n- plugins:\n{plugins}")).gang_placement

    assert Framework(default_config()).gang_placement == "binpack"  # binpack 1 vs least 1
    assert placement("  - name: nodeorder\n") == "spread"
    most = "  - name: nodeorder\n    arguments: {mostrequested.weight: 2}\n"
    assert placement(most) == "binpack"
    heavy = "  - name: nodeorder\n    arguments: {leastrequested.weight: 3}\n  - name: binpack\n"
    assert placement(heavy) == "spread"
    assert placement("  - name: gang\n") == "binpack"  # no node order at all: pack


def test_overcommit_is_the_plugins_argument_and_off_without_the_plugin() -> None:
    from core.resources import ResourceVector
    from plugins.builtin import overcommit

    def factor(plugins: str) -> float | None:
        session = build_policy(parse_scheduler_config(f"tiers:\n- plugins:\n{plugins}"))
        plugin = session.plugins.get("overcommit")
        return None if plugin is None else plugin.factor

    assert build_policy(default_config()).plugins["overcommit"].factor == 1.2
    assert factor("  - name: overcommit\n    arguments: {overcommit-factor: 2.0}\n") == 2.0
    assert factor("  - name: overcommit\n    arguments: {overcommit-factor: 0.5}\n") == 1.2
    assert factor("  - name: gang\n") is None  # no plugin: no rule
    with pytest.raises(ConfigError, match="overcommit-factor"):
        factor("  - name: overcommit\n    arguments: {overcommit-factor: lots}\n")
    gpus = ResourceVector({"nvidia.com/gpu": 5})
    total = {"nvidia.com/gpu": 4}
    assert "nvidia.com/gpu" in overcommit.shortfall(gpus, total, {}, 1.2)  # 4 x 1.2 = 4 < 5
    assert overcommit.shortfall(gpus, total, {}, 1.5) == ""  # 6 >= 5
    assert overcommit.shortfall(gpus, total, {}, None) == ""  # off
