"""Reading a Volcano scheduler configuration's YAML into `plugins.framework.config_types`, field by
field, with errors that name the field (`tiers[1].plugins[0]: unknown key ...`, with a
did-you-mean), duplicate keys refused as Go's decoder refuses them."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import yaml

from plugins.framework.config_types import (
    ACTIONS,
    ENABLE_FLAGS,
    PLUGINS,
    TOP_LEVEL_KEYS,
    ConfigError,
    PluginOption,
    SchedulerConfig,
    Tier,
)

ENABLE_FLAG_SET = frozenset(ENABLE_FLAGS)


def read_document(text: str) -> SchedulerConfig:
    """The configuration in `text` (`plugins.framework.config.parse_scheduler_config`)."""
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}") from None
    if document is None:
        raise ConfigError("the configuration is empty")
    if not isinstance(document, Mapping):
        raise ConfigError(f"expected a mapping at the top level, not {_kind(document)}")
    _reject_unknown_keys(document, TOP_LEVEL_KEYS, "", "key")

    config = SchedulerConfig(
        actions=_parse_actions(document.get("actions")),
        tiers=_parse_tiers(document.get("tiers")),
        configurations=_parse_configurations(document.get("configurations")),
        metrics=_parse_metrics(document.get("metrics")),
    )
    for index, tier in enumerate(config.tiers):
        _check_tier_conflicts(tier, f"tiers[{index}]")
    return config


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
    if name not in PLUGINS and not _registered(name):
        raise ConfigError(f'{where}: unknown plugin "{name}"{_suggest(name, PLUGINS)}')

    enabled: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in ENABLE_FLAG_SET:
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


def _registered(name: str) -> bool:
    """A plugin vulcan's registry has beyond Volcano's names (one added in its module and the
    registry, as docs/architecture.md's example does). Imported here, not at the top: the
    registry builds on this parser."""
    from plugins.framework import registry

    return name in registry.PLUGINS
