"""The Volcano scheduler configuration's types (`SchedulerConfig`, `Tier`, `PluginOption`), the
names Volcano knows (actions, plugins, the enable flags) and `ConfigError`. Read and checked by
`plugins.framework.config` (`parse_scheduler_config`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACTIONS",
    "ENABLE_FLAGS",
    "PLUGINS",
    "TOP_LEVEL_KEYS",
    "ConfigError",
    "PluginOption",
    "SchedulerConfig",
    "Tier",
    "int_argument",
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
    "numa-aware",
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
