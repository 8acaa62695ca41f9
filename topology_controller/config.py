"""Volcano's HyperNode discovery configuration: the `volcano-controller.conf` key of its
controller ConfigMap (`networkTopologyDiscovery`, a list of sources). vulcan reads the `label`
source; the others (ufm, roce) need their fabric managers and are reported and skipped.

    networkTopologyDiscovery:
      - source: label
        enabled: true
        config:
          networkTopologyTypes:
            topologyA2:
              - nodeLabel: volcano.sh/tor            # tier 1
              - nodeLabel: kubernetes.io/hostname    # the nodes themselves
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger("vulcan.controllers.hypernode")

MAX_TYPE_NAME = 20  # Volcano's limit on a topology type's name


class DiscoveryConfigError(ValueError):
    """A discovery configuration that cannot be used: names the file, the field and why."""


@dataclass(frozen=True, slots=True)
class LabelDiscovery:
    """Per topology type, the label keys of its tiers from tier 1 upward (the list's last
    entry, the node's own label, dropped as Volcano drops it)."""

    tiers: dict[str, tuple[str, ...]]


def parse(text: str, where: str = "discovery config") -> LabelDiscovery | None:
    """The label source's configuration, or None when no enabled label source is configured."""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise DiscoveryConfigError(f"{where}: not YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise DiscoveryConfigError(f"{where}: expected a mapping with networkTopologyDiscovery")
    sources = doc.get("networkTopologyDiscovery") or []
    if not isinstance(sources, list):
        raise DiscoveryConfigError(f"{where}: networkTopologyDiscovery: expected a list")
    label: LabelDiscovery | None = None
    for index, source in enumerate(sources):
        path = f"{where}: networkTopologyDiscovery[{index}]"
        if not isinstance(source, dict):
            raise DiscoveryConfigError(f"{path}: expected a mapping")
        if not source.get("enabled"):
            continue
        if source.get("source") != "label":
            log.warning(
                "%s: source %r is not supported by vulcan; skipped", path, source.get("source")
            )
            continue
        label = _label_source(source.get("config") or {}, f"{path}.config")
    return label


def _label_source(config: Any, path: str) -> LabelDiscovery:
    types = config.get("networkTopologyTypes") if isinstance(config, dict) else None
    if not isinstance(types, dict) or not types:
        raise DiscoveryConfigError(f"{path}.networkTopologyTypes: Required value")
    tiers: dict[str, tuple[str, ...]] = {}
    for name, entries in types.items():
        where = f"{path}.networkTopologyTypes.{name}"
        if len(str(name)) > MAX_TYPE_NAME:
            raise DiscoveryConfigError(f"{where}: name longer than {MAX_TYPE_NAME} characters")
        if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("nodeLabel"), str) and e["nodeLabel"]
            for e in entries
        ):
            raise DiscoveryConfigError(f"{where}: expected a list of {{nodeLabel: KEY}}")
        keys = [e["nodeLabel"] for e in entries]
        if len(set(keys)) != len(keys):
            raise DiscoveryConfigError(f"{where}: there are duplicate labels")
        tiers[str(name)] = tuple(reversed(keys[:-1]))
    return LabelDiscovery(tiers)


def load(path: str) -> LabelDiscovery | None:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise DiscoveryConfigError(f"{path}: {exc.strerror}") from None
    return parse(text, path)
