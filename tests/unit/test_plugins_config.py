"""plugins.framework.config: Volcano's scheduler configuration format, defaults and error
messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.framework.config import (
    DEFAULT_SCHEDULER_CONF,
    ENABLE_FLAGS,
    ConfigError,
    PluginOption,
    default_config,
    int_argument,
    load_scheduler_config,
    parse_scheduler_config,
)
from plugins.framework.node_order import Framework

# Volcano's helm CI configuration (installer/helm/chart/volcano/config/volcano-scheduler-ci.conf,
# as described in the spec, §7.2).
HELM_CI_CONF = """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.weight: "10"
      binpack.cpu: 2
  - name: network-topology-aware
configurations:
- name: preempt
  arguments:
    enableTopologyAwarePreemption: true
metrics:
  type: prometheus
  address: http://prometheus:9090
  interval: 30s
"""


def names(config, tier: int) -> list[str]:
    return [option.name for option in config.tiers[tier].plugins]


# ----------------------------------------------------------------------------- valid files


def test_default_configuration() -> None:
    config = default_config()
    assert config.actions == ["enqueue", "allocate", "preempt", "reclaim", "backfill"]
    assert len(config.tiers) == 2
    assert names(config, 0) == ["priority", "gang", "conformance"]
    assert names(config, 1) == [
        "overcommit",
        "drf",
        "predicates",
        "proportion",
        "nodeorder",
        "binpack",
    ]
    assert config.configurations == []
    assert config.metrics == {}
    assert parse_scheduler_config(DEFAULT_SCHEDULER_CONF) == config
    # Fresh objects each time: nobody can mutate the default for everyone else.
    fresh = default_config()
    assert fresh.tiers[0].plugins[0].arguments is not config.tiers[0].plugins[0].arguments


def test_helm_ci_configuration() -> None:
    config = parse_scheduler_config(HELM_CI_CONF)
    assert config.actions == ["enqueue", "allocate", "backfill", "reclaim", "preempt"]
    assert names(config, 0) == ["priority", "gang", "conformance", "sla"]
    assert names(config, 1)[-1] == "network-topology-aware"

    gang = config.plugin("gang")
    assert gang is not None
    assert gang.enabled == {"enablePreemptable": False}
    assert not gang.is_enabled("enablePreemptable")
    assert gang.is_enabled("enableJobReady")  # absent => true

    predicates = config.plugin("predicates")
    assert predicates is not None
    assert predicates.arguments == {"predicate.DynamicResourceAllocationEnable": True}

    binpack = config.plugin("binpack")
    assert binpack is not None
    # Values are kept as written; plugins read "10" and 10 alike.
    assert binpack.arguments == {"binpack.weight": "10", "binpack.cpu": 2}
    assert int_argument(binpack.arguments, "binpack.weight", 1) == 10

    assert config.configurations == [
        {"name": "preempt", "arguments": {"enableTopologyAwarePreemption": True}}
    ]
    assert config.action_arguments("preempt") == {"enableTopologyAwarePreemption": True}
    assert config.action_arguments("reclaim") == {}
    assert config.metrics == {
        "type": "prometheus",
        "address": "http://prometheus:9090",
        "interval": "30s",
    }
    assert config.plugin("capacity") is None

    framework = Framework(config)
    assert [plugin.name for plugin in framework.score_plugins] == ["nodeorder", "binpack"]


def test_flag_defaults() -> None:
    option = PluginOption(name="drf")
    for flag in ENABLE_FLAGS:
        assert option.is_enabled(flag) is (flag != "enableHierarchy")
    assert PluginOption(name="drf", enabled={"enableHierarchy": True}).is_enabled("enableHierarchy")
    with pytest.raises(ValueError, match="enablePreemptible"):
        option.is_enabled("enablePreemptible")


def test_inconsistent_flag_prefixes_are_matched_exactly() -> None:
    config = parse_scheduler_config(
        """
actions: allocate
tiers:
- plugins:
  - name: proportion
    enabledOverused: false
    enabledAllocatable: false
    enableQueueOrder: false
"""
    )
    option = config.tiers[0].plugins[0]
    assert not option.is_enabled("enabledOverused")
    assert not option.is_enabled("enabledAllocatable")
    assert not option.is_enabled("enableQueueOrder")
    # "enableOverused" is not Volcano's spelling, so it is an unknown key.
    with pytest.raises(ConfigError, match=r'unknown key "enableOverused".*"enabledOverused"'):
        parse_scheduler_config(
            "actions: allocate\ntiers:\n- plugins:\n"
            "  - name: proportion\n    enableOverused: false\n"
        )


def test_empty_sections_are_allowed() -> None:
    config = parse_scheduler_config("actions: ''\ntiers:\n- plugins:\n")
    assert config.actions == []
    assert len(config.tiers) == 1
    assert config.tiers[0].plugins == []


def test_hierarchical_drf_without_proportion_is_fine() -> None:
    config = parse_scheduler_config(
        """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: drf
    enableHierarchy: true
- plugins:
  - name: proportion
"""
    )
    drf = config.plugin("drf")
    assert drf is not None and drf.is_enabled("enableHierarchy")


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n"
            "  - name: predicates\n  - name: nodeorder\n  - name: binpak\n",
            'tiers[1].plugins[2]: unknown plugin "binpak" (did you mean "binpack"?)',
        ),
        (
            'actions: "enqueue, alocate, backfill"\n',
            'actions[1]: unknown action "alocate" (did you mean "allocate"?)',
        ),
        ('actions: "enqueue, allocate,"\n', "actions[2]: empty action name"),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enablePreemtable: false\n",
            'tiers[0].plugins[0]: unknown key "enablePreemtable" in plugin "gang"',
        ),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enableJobReady: 'no'\n",
            "tiers[0].plugins[0].enableJobReady: expected true or false",
        ),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - arguments: {}\n",
            "tiers[0].plugins[0]: missing plugin name",
        ),
        ("actions: [allocate]\n", "actions: expected a comma-separated string"),
        ("action: allocate\n", 'unknown key "action" (did you mean "actions"?)'),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  plugin: []\n",
            'tiers[0]: unknown key "plugin"',
        ),
        (
            "actions: allocate\nconfigurations:\n- name: preemt\n",
            'configurations[0]: unknown action "preemt"',
        ),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n    arguments: 3\n",
            "tiers[0].plugins[0].arguments: expected a mapping",
        ),
        ("", "the configuration is empty"),
        ("- allocate\n", "expected a mapping at the top level"),
        ("actions: [unclosed\n", "invalid YAML"),
        (
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n"
            "    enablePreemptable: false\n    enablePreemptable: true\n",
            "line 6: duplicate key 'enablePreemptable'",
        ),
    ],
)
def test_errors_name_the_problem_and_place(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scheduler_config(text)
    assert message in str(caught.value)


def test_hierarchical_drf_conflicts_with_proportion_in_the_same_tier() -> None:
    text = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
- plugins:
  - name: drf
    enableHierarchy: true
  - name: proportion
"""
    with pytest.raises(ConfigError, match=r"tiers\[1\]: drf with enableHierarchy: true conflicts"):
        parse_scheduler_config(text)
    # enableHierarchy defaults to false, so plain drf + proportion is the default config's shape.
    parse_scheduler_config(text.replace("    enableHierarchy: true\n", ""))


def test_plugin_argument_errors_surface_when_the_framework_is_built() -> None:
    config = parse_scheduler_config(
        "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: binpack\n"
        "    arguments:\n      binpack.weight: ten\n"
    )
    with pytest.raises(ConfigError) as caught:
        Framework(config)
    assert str(caught.value) == (
        "tiers[0].plugins[1].arguments[\"binpack.weight\"]: expected an integer, not 'ten'"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(10, 10), ("10", 10), (" 7 ", 7), ("-3", -3), (0, 0)],
)
def test_int_argument_accepts_numbers_and_numeric_strings(value: object, expected: int) -> None:
    assert int_argument({"w": value}, "w", 1) == expected
    assert int_argument({}, "w", 5) == 5


@pytest.mark.parametrize("value", [1.5, True, "1.5", "ten", "", None, [1]])
def test_int_argument_rejects_everything_else(value: object) -> None:
    with pytest.raises(ConfigError, match=r'arguments\["w"\]: expected an integer'):
        int_argument({"w": value}, "w", 1)


# ----------------------------------------------------------------------------------- files


def test_load_from_file(tmp_path: Path) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(HELM_CI_CONF, encoding="utf-8")
    assert load_scheduler_config(str(path)) == parse_scheduler_config(HELM_CI_CONF)


def test_load_none_is_the_default() -> None:
    assert load_scheduler_config(None) == default_config()


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.conf"
    with pytest.raises(ConfigError) as caught:
        load_scheduler_config(str(path))
    assert str(path) in str(caught.value)
    assert "No such file" in str(caught.value)


def test_invalid_file_names_the_path_and_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.conf"
    path.write_text("actions: allocate\ntiers:\n- plugins:\n  - name: binpak\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_scheduler_config(str(path))
    assert str(caught.value).startswith(f'{path}: tiers[0].plugins[0]: unknown plugin "binpak"')
