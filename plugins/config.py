"""Volcano's scheduler configuration file (`--scheduler-conf`), parsed and checked.

The format is Volcano's (pkg/scheduler/conf/scheduler_conf.go, pkg/scheduler/util.go):

    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: gang
        enablePreemptable: false
      - name: binpack
        arguments:
          binpack.weight: 10
    configurations:
    - name: preempt
      arguments: {enableTopologyAwarePreemption: true}
    metrics: {type: prometheus}

We are stricter than Volcano where Volcano silently ignores mistakes: an unknown action, plugin,
flag key or top-level key is an error naming the place (`tiers[1].plugins[2]: unknown plugin
"binpak"`), because a typo in a scheduler policy otherwise shows up only as odd placement. Indices
in error locations are 0-based, like Kubernetes field paths.

Plugin `arguments` are kept as YAML gives them (strings, numbers, booleans, nested maps); each
plugin interprets its own (`int_argument` is the shared integer reader).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = [
    "ACTIONS",
    "DEFAULT_SCHEDULER_CONF",
    "ENABLE_FLAGS",
    "PLUGINS",
    "ConfigError",
    "PluginOption",
    "SchedulerConfig",
    "Tier",
    "default_config",
    "int_argument",
    "load_scheduler_config",
    "parse_scheduler_config",
]


class ConfigError(ValueError):
    """An invalid scheduler configuration; the message says what is wrong and where."""


# Every action Volcano registers (framework.GetAction); anything else fails to load in Volcano.
ACTIONS: tuple[str, ...] = (
    "enqueue",
    "allocate",
    "backfill",
    "preempt",
    "reclaim",
    "gangpreempt",
    "gangreclaim",
    "shuffle",
)

# Every plugin Volcano registers. Volcano only logs an unknown name; we reject it.
PLUGINS: tuple[str, ...] = (
    "priority",
    "gang",
    "conformance",
    "drf",
    "proportion",
    "capacity",
    "predicates",
    "nodeorder",
    "binpack",
    "overcommit",
    "sla",
    "tdm",
    "task-topology",
    "numaaware",
    "deviceshare",
    "cdp",
    "pdb",
    "nodegroup",
    "network-topology-aware",
    "resource-strategy-fit",
    "usage",
    "rescheduling",
    "resourcequota",
    "extender",
)

# The YAML keys of PluginOption's *bool fields, spelled exactly as Volcano's struct tags do: the
# enable/enabled prefixes really are inconsistent, and Go's YAML decoder matches them exactly.
ENABLE_FLAGS: tuple[str, ...] = (
    "enableJobOrder",
    "enableHierarchy",
    "enableJobReady",
    "enableJobPipelined",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enabledClusterOrder",
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enableJobEnqueued",
    "enabledVictim",
    "enableJobStarving",
    "enabledOverused",
    "enabledAllocatable",
    "enabledHyperNodeOrder",
    "enabledSubJobReady",
    "enabledSubJobPipelined",
    "enabledSubJobOrder",
    "enabledHyperNodeGradient",
)
_FLAG_SET = frozenset(ENABLE_FLAGS)
# ApplyPluginConfDefaults sets every nil flag to true except this one (hierarchical DRF is opt-in).
_FLAGS_DEFAULT_FALSE = frozenset({"enableHierarchy"})

_TOP_LEVEL_KEYS = ("actions", "tiers", "configurations", "metrics")

# Volcano's default (pkg/scheduler/util.go) plus binpack, as the helm chart ships it, and the
# reclaim and preempt actions: without a conf, vulcan gives a queue its deserved share back and
# lets a higher-priority gang preempt within its queue (a conf without them turns both off).
DEFAULT_SCHEDULER_CONF = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


# ----------------------------------------------------------------------------- data model


@dataclass(frozen=True, slots=True)
class PluginOption:
    """One `tiers[].plugins[]` entry.

    `enabled` holds only the flags the file sets; use `is_enabled` for the effective value.
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    enabled: dict[str, bool] = field(default_factory=dict)

    def is_enabled(self, flag: str) -> bool:
        """The flag's value, defaulting like Volcano: true, except `enableHierarchy` (false)."""
        if flag not in _FLAG_SET:
            # A misspelt flag in our own code would otherwise silently read as "enabled".
            raise ValueError(f"unknown plugin flag {flag!r}")
        value = self.enabled.get(flag)
        if value is None:
            return flag not in _FLAGS_DEFAULT_FALSE
        return value


@dataclass(frozen=True, slots=True)
class Tier:
    plugins: list[PluginOption] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    actions: list[str]
    tiers: list[Tier]
    # [{"name": <action>, "arguments": {...}}], action arguments (e.g. preempt's).
    configurations: list[dict] = field(default_factory=list)
    # Metrics source for the `usage` plugin (Volcano's map[string]string).
    metrics: dict[str, str] = field(default_factory=dict)

    def plugin(self, name: str) -> PluginOption | None:
        """The first entry for plugin `name` across all tiers, or None if it is not configured."""
        for tier in self.tiers:
            for option in tier.plugins:
                if option.name == name:
                    return option
        return None

    def action_arguments(self, action: str) -> dict[str, Any]:
        """`configurations` arguments of `action` (Volcano's GetArgOfActionFromConf: first wins)."""
        for entry in self.configurations:
            if entry["name"] == action:
                return entry["arguments"]
        return {}


# -------------------------------------------------------------------------------- parsing


def parse_scheduler_config(text: str) -> SchedulerConfig:
    """Parse and check a Volcano scheduler configuration (YAML text)."""
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}") from None
    if document is None:
        raise ConfigError("the configuration is empty")
    if not isinstance(document, Mapping):
        raise ConfigError(f"expected a mapping at the top level, not {_kind(document)}")
    _reject_unknown_keys(document, _TOP_LEVEL_KEYS, "", "key")

    config = SchedulerConfig(
        actions=_parse_actions(document.get("actions")),
        tiers=_parse_tiers(document.get("tiers")),
        configurations=_parse_configurations(document.get("configurations")),
        metrics=_parse_metrics(document.get("metrics")),
    )
    for index, tier in enumerate(config.tiers):
        _check_tier_conflicts(tier, f"tiers[{index}]")
    return config


def default_config() -> SchedulerConfig:
    """Volcano's default configuration (a fresh copy; callers may not share mutable state)."""
    return parse_scheduler_config(DEFAULT_SCHEDULER_CONF)


def load_scheduler_config(path: str | None) -> SchedulerConfig:
    """Read and parse the file at `path`; None means Volcano's default configuration."""
    if path is None:
        return default_config()
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"{path}: cannot read the scheduler configuration: {reason}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc.reason}") from None
    try:
        return parse_scheduler_config(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def int_argument(arguments: Mapping[str, Any], key: str, default: int) -> int:
    """An integer plugin argument, `default` when absent.

    Current Volcano reads YAML integers (`binpack.weight: 10`); older releases stored every
    argument as a string (`"10"`), and configs written for them still circulate, so both are
    accepted. Anything else (a float, a boolean, "ten") is an error here, where Volcano would log
    a warning and silently keep the default.
    """
    if key not in arguments:
        return default
    value = arguments[key]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] in "+-" else text
        if digits.isascii() and digits.isdigit():
            return int(text)
    raise ConfigError(f'arguments["{key}"]: expected an integer, not {value!r}')


# --------------------------------------------------------------------------------- helpers


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys, as Go's yaml decoder does.

    PyYAML silently keeps the last value, so `enablePreemptable` written twice would be a coin
    flip for the reader of the file.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue  # merge keys may legitimately be overridden
            identity = (key_node.tag, key_node.value)
            if identity in seen:
                line = key_node.start_mark.line + 1
                raise ConfigError(f"line {line}: duplicate key {key_node.value!r}")
            seen.add(identity)
        return super().construct_mapping(node, deep=deep)


def _parse_actions(raw: object) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, str):
        raise ConfigError(
            f'actions: expected a comma-separated string such as "enqueue, allocate, backfill",'
            f" not {_kind(raw)}"
        )
    if not raw.strip():
        return []
    actions = []
    # Like Volcano, every comma-separated item must name an action: "a,,b" and a trailing comma
    # are errors, not skipped.
    for index, item in enumerate(raw.split(",")):
        name = item.strip()
        if name not in ACTIONS:
            what = f'unknown action "{name}"' if name else "empty action name"
            raise ConfigError(f"actions[{index}]: {what}{_suggest(name, ACTIONS)}")
        actions.append(name)
    return actions


def _parse_tiers(raw: object) -> list[Tier]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"tiers: expected a list of {{plugins: [...]}}, not {_kind(raw)}")
    tiers = []
    for index, entry in enumerate(raw):
        where = f"tiers[{index}]"
        if entry is None:
            entry = {}
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: expected a mapping with plugins, not {_kind(entry)}")
        _reject_unknown_keys(entry, ("plugins",), where, "key")
        plugins = entry.get("plugins")
        if plugins is None:
            plugins = []
        if not isinstance(plugins, list):
            raise ConfigError(f"{where}.plugins: expected a list, not {_kind(plugins)}")
        options = [
            _parse_plugin(option, f"{where}.plugins[{position}]")
            for position, option in enumerate(plugins)
        ]
        tiers.append(Tier(plugins=options))
    return tiers


def _parse_plugin(raw: object, where: str) -> PluginOption:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping with a name, not {_kind(raw)}")
    name = raw.get("name")
    if name is None:
        raise ConfigError(f"{where}: missing plugin name")
    if not isinstance(name, str):
        raise ConfigError(f"{where}.name: expected a string, not {_kind(name)}")
    if name not in PLUGINS:
        raise ConfigError(f'{where}: unknown plugin "{name}"{_suggest(name, PLUGINS)}')

    enabled: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in _FLAG_SET:
            hint = _suggest(str(key), ENABLE_FLAGS)
            raise ConfigError(f'{where}: unknown key "{key}" in plugin "{name}"{hint}')
        if not isinstance(value, bool):
            raise ConfigError(f"{where}.{key}: expected true or false, not {value!r}")
        enabled[key] = value

    arguments = raw.get("arguments")
    return PluginOption(
        name=name,
        arguments=_string_keyed(arguments, f"{where}.arguments"),
        enabled=enabled,
    )


def _parse_configurations(raw: object) -> list[dict]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"configurations: expected a list, not {_kind(raw)}")
    result = []
    for index, entry in enumerate(raw):
        where = f"configurations[{index}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: expected a mapping with name and arguments")
        _reject_unknown_keys(entry, ("name", "arguments"), where, "key")
        name = entry.get("name")
        if not isinstance(name, str):
            raise ConfigError(f"{where}.name: expected an action name, not {_kind(name)}")
        if name not in ACTIONS:
            raise ConfigError(f'{where}: unknown action "{name}"{_suggest(name, ACTIONS)}')
        arguments = _string_keyed(entry.get("arguments"), f"{where}.arguments")
        result.append({"name": name, "arguments": arguments})
    return result


def _parse_metrics(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"metrics: expected a mapping of strings, not {_kind(raw)}")
    metrics = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            raise ConfigError(f"metrics: keys must be strings, not {key!r}")
        # Go decodes plain scalars into a string field from their text, so `port: 9090` works.
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, int | float):
            value = str(value)
        elif not isinstance(value, str):
            raise ConfigError(f"metrics.{key}: expected a string, not {_kind(value)}")
        metrics[key] = value
    return metrics


def _check_tier_conflicts(tier: Tier, where: str) -> None:
    names = {option.name for option in tier.plugins}
    hierarchical_drf = any(
        option.name == "drf" and option.is_enabled("enableHierarchy") for option in tier.plugins
    )
    if hierarchical_drf and "proportion" in names:
        raise ConfigError(
            f"{where}: drf with enableHierarchy: true conflicts with proportion in the same tier"
        )


def _string_keyed(raw: object, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping, not {_kind(raw)}")
    for key in raw:
        if not isinstance(key, str):
            raise ConfigError(f"{where}: keys must be strings, not {key!r}")
    return dict(raw)


def _reject_unknown_keys(
    mapping: Mapping[Any, Any], known: tuple[str, ...], where: str, what: str
) -> None:
    for key in mapping:
        if key not in known:
            prefix = f"{where}: " if where else ""
            raise ConfigError(f'{prefix}unknown {what} "{key}"{_suggest(str(key), known)}')


def _suggest(name: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__
