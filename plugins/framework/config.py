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

from plugins.framework.config_fields import read_document
from plugins.framework.config_types import (
    ACTIONS,
    ENABLE_FLAGS,
    PLUGINS,
    ConfigError,
    PluginOption,
    SchedulerConfig,
    Tier,
    int_argument,
)

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


# -------------------------------------------------------------------------------- parsing


def parse_scheduler_config(text: str) -> SchedulerConfig:
    """Parse and check a Volcano scheduler configuration (YAML text)."""
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
