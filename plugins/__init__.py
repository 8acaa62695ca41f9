"""Scheduling policy: Volcano's plugins as pure functions of a cluster snapshot.

No I/O and no asyncio here, and nothing from the extender, the simulator or the controllers: the
extender builds `NodeState`s from its cache and calls `Framework`; tests and the simulator do the
same with hand-made snapshots. Only `core` (resource arithmetic) is imported.
"""

from plugins.binpack import BinpackPlugin
from plugins.config import (
    DEFAULT_SCHEDULER_CONF,
    ConfigError,
    PluginOption,
    SchedulerConfig,
    Tier,
    default_config,
    load_scheduler_config,
    parse_scheduler_config,
)
from plugins.framework import BatchScorePlugin, Framework, NodeState, ScorePlugin
from plugins.nodeorder import NodeOrderPlugin

__all__ = [
    "DEFAULT_SCHEDULER_CONF",
    "BatchScorePlugin",
    "BinpackPlugin",
    "ConfigError",
    "Framework",
    "NodeOrderPlugin",
    "NodeState",
    "PluginOption",
    "SchedulerConfig",
    "ScorePlugin",
    "Tier",
    "default_config",
    "load_scheduler_config",
    "parse_scheduler_config",
]
