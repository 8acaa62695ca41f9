"""The plugins and actions vulcan implements, by the names Volcano gives them, and the
session a scheduler conf builds from them.

Adding a plugin is one module (a class with `name` and the extension points it registers,
see `plugins.framework.policy`) and one line in `PLUGINS` below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from plugins.builtin.binpack import BinpackPlugin
from plugins.builtin.conformance import ConformancePlugin
from plugins.builtin.drf import DrfPlugin
from plugins.builtin.gang import GangPlugin
from plugins.builtin.network_topology import NetworkTopologyPlugin
from plugins.builtin.nodeorder import NodeOrderPlugin
from plugins.builtin.numaaware import NumaAwarePlugin
from plugins.builtin.overcommit import OvercommitPlugin
from plugins.builtin.predicates import PredicatesPlugin
from plugins.builtin.priority import PriorityPlugin
from plugins.builtin.queue_plugins import CapacityPlugin, ProportionPlugin
from plugins.builtin.sla import SlaPlugin
from plugins.builtin.task_topology import TaskTopologyPlugin
from plugins.framework.config_types import ConfigError, SchedulerConfig
from plugins.framework.extension_points import check_plugin
from plugins.framework.policy import Policy

__all__ = [
    "IMPLEMENTED_ACTIONS",
    "IMPLEMENTED_PLUGINS",
    "PLUGINS",
    "build_policy",
    "require_implemented",
]

# name -> the plugin's class, built with the conf entry's arguments.
PLUGINS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "priority": PriorityPlugin,
    "gang": GangPlugin,
    "conformance": ConformancePlugin,
    "drf": DrfPlugin,
    "sla": SlaPlugin,
    "proportion": ProportionPlugin,
    "capacity": CapacityPlugin,
    "overcommit": OvercommitPlugin,
    "predicates": PredicatesPlugin,
    "nodeorder": NodeOrderPlugin,
    "binpack": BinpackPlugin,
    "task-topology": TaskTopologyPlugin,
    # Volcano registers it as numa-aware; numaaware is its package's name.
    "numa-aware": NumaAwarePlugin,
    "numaaware": NumaAwarePlugin,
    "network-topology-aware": NetworkTopologyPlugin,
}
IMPLEMENTED_PLUGINS: tuple[str, ...] = tuple(PLUGINS)
# The actions (plugins.actions.allocate): enqueue and allocate (admission and whole-gang placement),
# preempt and reclaim (evictions for a gang that does not fit), backfill (members without
# requests go through kube-scheduler's own path).
IMPLEMENTED_ACTIONS: tuple[str, ...] = ("enqueue", "allocate", "backfill", "preempt", "reclaim")


def require_implemented(config: SchedulerConfig) -> None:
    """Raise ConfigError naming the first plugin, action or option of `config` vulcan does not
    implement, with the names it does: a conf silently half applied is worse than none."""
    for action in config.actions:
        if action not in IMPLEMENTED_ACTIONS:
            raise ConfigError(
                f'actions: "{action}" is a Volcano action vulcan does not implement '
                f"(vulcan implements: {', '.join(IMPLEMENTED_ACTIONS)})"
            )
    for tier_index, tier in enumerate(config.tiers):
        for plugin_index, option in enumerate(tier.plugins):
            where = f"tiers[{tier_index}].plugins[{plugin_index}]"
            if option.name not in PLUGINS:
                raise ConfigError(
                    f'{where}: "{option.name}" is a Volcano plugin vulcan does not implement '
                    f"(vulcan implements: {', '.join(IMPLEMENTED_PLUGINS)})"
                )
            if option.name == "drf" and option.is_enabled("enableHierarchy"):
                raise ConfigError(
                    f"{where}: drf with enableHierarchy: true (hierarchical drf) is not "
                    "implemented; use capacity with enableHierarchy for queue trees"
                )


def build_policy(config: SchedulerConfig, *, require: bool = True) -> Policy:
    """The policy of `config`: each plugin built once, from its last entry's arguments
    (Volcano keys plugins by name) and checked against the extension points
    (`check_plugin`), errors naming the entry. `require=False` leaves out the plugins vulcan
    does not implement instead of refusing the conf (node scoring alone)."""
    if require:
        require_implemented(config)
    instances: dict[str, Any] = {}
    for tier_index, tier in enumerate(config.tiers):
        for plugin_index, option in enumerate(tier.plugins):
            if option.name not in PLUGINS:
                continue
            where = f"tiers[{tier_index}].plugins[{plugin_index}]"
            try:
                plugin = PLUGINS[option.name](option.arguments)
            except ConfigError as exc:
                raise ConfigError(f"{where}.{exc}") from None
            check_plugin(plugin, where)
            instances[option.name] = plugin
    return Policy(config, instances)
