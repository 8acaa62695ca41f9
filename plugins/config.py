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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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

TOP_LEVEL_KEYS = ("actions", "tiers", "configurations", "metrics")

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
    # Imported here: the field readers build this module's types.
    from plugins.config_fields import read_document

    return read_document(text)


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
