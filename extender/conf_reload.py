"""Scheduler conf reload: the extender follows a changed `--config` file without a restart.

Volcano's scheduler watches its conf (a ConfigMap mounted as a file) with fsnotify and uses the
new one from its next session. Here the file's content is read every `--config-reload-period`
and compared by hash: reading through the path follows the kubelet's `..data` symlink swap of
a ConfigMap volume (an inotify watch on the old target would miss it), and a touch that changes
nothing is no reload. A new conf is parsed and built (plugins, their arguments) before anything
switches; a bad one is refused — a log line, a Warning Event `SchedulerConfRefused` regarding
the extender's Lease (Volcano only logs; a Lease is what `kubectl get events -n <namespace>`
shows next to the extender) and `vulcan_scheduler_conf_reloads_total{result="refused"}` — and
the running conf stays. A good one replaces the policy and the node order
between two passes (a pass never awaits, so no pass sees half of each); the gang ledger, the
held binds and the admitted gangs are kept. `vulcan_scheduler_conf_info{hash}` names the
active conf.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from core.kube.client import LEASES
from core.kube.events import NORMAL, WARNING
from plugins.framework.config import DEFAULT_SCHEDULER_CONF, ConfigError, parse_scheduler_config
from plugins.framework.node_order import Framework
from plugins.framework.policy import Policy
from plugins.framework.registry import build_policy

log = logging.getLogger("vulcan.extender.conf")

DEFAULT_PERIOD = 5.0


def conf_hash(text: str) -> str:
    """The label of a conf in `vulcan_scheduler_conf_info`: sha256 of its text, 16 hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class BuiltConf:
    """Everything the extender derives from one conf, built before it is used."""

    text: str
    policy: Policy
    framework: Framework

    @property
    def hash(self) -> str:
        return conf_hash(self.text)


def build_conf(text: str, adjust: Callable[[Policy], None] | None = None) -> BuiltConf:
    """Parse and build a conf; ConfigError (field + reason) if it cannot be used."""
    config = parse_scheduler_config(text)
    policy = build_policy(config)
    if adjust is not None:
        adjust(policy)
    return BuiltConf(text, policy, Framework(policy))


def read_conf(path: str | None) -> str:
    """The conf's text (Volcano's default conf without a path)."""
    if path is None:
        return DEFAULT_SCHEDULER_CONF
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot read the scheduler configuration: {reason}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text: {exc.reason}") from None


class ConfMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.info = Gauge(
            "vulcan_scheduler_conf_info",
            "The scheduler conf in use (1 for its hash: sha256 of the file, 16 hex digits).",
            ["hash"],
            registry=registry,
        )
        self.reloads = Counter(
            "vulcan_scheduler_conf_reloads_total",
            "Changed scheduler confs seen, by result (applied, refused).",
            ["result"],
            registry=registry,
        )
        self._active: str | None = None

    def active(self, hash_: str) -> None:
        if self._active is not None:
            self.info.remove(self._active)
        self.info.labels(hash_).set(1)
        self._active = hash_


class ConfReloader:
    """Polls `path`; `apply` switches the extender to a built conf, `record` writes an Event."""

    def __init__(
        self,
        path: str,
        current: BuiltConf,
        apply: Callable[[BuiltConf], None],
        metrics: ConfMetrics,
        *,
        adjust: Callable[[Policy], None] | None = None,
        record: Callable[[str, str, str], None] | None = None,
        period: float = DEFAULT_PERIOD,
    ) -> None:
        self.path = path
        self.current = current
        self.apply = apply
        self.metrics = metrics
        self.adjust = adjust
        self.record = record
        self.period = period
        # The last text looked at (applied or refused): a refused conf is told once, not at
        # every poll, and the same text written back is no reload.
        self._seen = current.text
        metrics.active(current.hash)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            self.check()

    def check(self) -> bool | None:
        """One look at the file: True if a new conf was applied, False if refused, None if
        nothing changed."""
        try:
            text = read_conf(self.path)
        except ConfigError as exc:
            # A ConfigMap volume mid-swap, or a file being rewritten: looked at again at the
            # next poll. Told once per distinct reason.
            text = f"\0unreadable: {exc}"
            if text != self._seen:
                self._seen = text
                log.warning(
                    "scheduler configuration unreadable; keeping the one in use",
                    extra={"config": self.path, "error": str(exc), "hash": self.current.hash},
                )
            return None
        if text == self._seen:
            return None
        self._seen = text
        new_hash = conf_hash(text)
        try:
            built = build_conf(text, self.adjust)
        except ConfigError as exc:
            self.metrics.reloads.labels("refused").inc()
            log.error(
                "scheduler configuration refused; keeping the one in use",
                extra={
                    "config": self.path,
                    "error": str(exc),
                    "refused_hash": new_hash,
                    "hash": self.current.hash,
                },
            )
            self._event(
                WARNING,
                "SchedulerConfRefused",
                f"{self.path} (hash {new_hash}) refused: {exc}; keeping conf {self.current.hash}",
            )
            return False
        if built.hash == self.current.hash:
            return None  # back to the conf in use after a refused one
        old = self.current.hash
        self.apply(built)
        self.current = built
        self.metrics.active(built.hash)
        self.metrics.reloads.labels("applied").inc()
        log.info(
            "scheduler configuration reloaded",
            extra={"config": self.path, "hash": built.hash, "previous_hash": old},
        )
        self._event(
            NORMAL,
            "SchedulerConfReloaded",
            f"{self.path}: conf {built.hash} in use from the next scheduling pass (was {old})",
        )
        return True

    def _event(self, type_: str, reason: str, note: str) -> None:
        if self.record is not None:
            self.record(type_, reason, note)


def lease_recorder(args: argparse.Namespace, recorder: Any) -> Callable[[str, str, str], None]:
    """Events about the conf regard the extender's Lease (`--leader-elect-resource-*`)."""
    ref = LEASES.reference(args.leader_elect_resource_name, args.leader_elect_resource_namespace)

    def record(type_: str, reason: str, note: str) -> None:
        if recorder is not None:
            recorder.record(ref, type_, reason, note)

    return record
