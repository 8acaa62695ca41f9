"""Volcano's `sla` plugin: a job's waiting time comes from its
PodGroup's `volcano.sh/sla-waiting-time` (or `sla-waiting-time`) annotation, else the
plugin's `sla-waiting-time` argument (a Go duration). Jobs with a waiting time are ordered
first, earlier deadline (creation + waiting time) first; once a job has waited that long, its
enqueue and pipelining are permitted, which (tier votes) bypasses later tiers' quota checks."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from core.durations import parse_duration
from plugins.framework.config_types import ConfigError
from plugins.framework.extension_points import ABSTAINED, PERMITTED, PassState, SessionPlugin, Vote
from plugins.model.gang import GangView
from plugins.model.job_order import JobInput, parse_time

ARGUMENT = "sla-waiting-time"


class SlaPlugin(SessionPlugin):
    name = "sla"
    helpers = ("deadline",)
    clock_dependent = True  # a job's enqueue is permitted once its waiting time has passed

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        super().__init__(arguments)
        self.waiting_seconds: float | None = None
        raw = arguments.get(ARGUMENT)
        if raw is not None:
            try:
                seconds = parse_duration(str(raw))
            except argparse.ArgumentTypeError as exc:
                raise ConfigError(f'arguments["{ARGUMENT}"]: {exc}') from None
            self.waiting_seconds = seconds if seconds > 0 else None

    def deadline(self, job: JobInput) -> float | None:
        waiting = job.sla_waiting_seconds
        if waiting is None:
            waiting = self.waiting_seconds
        if waiting is None or waiting <= 0:
            return None
        return parse_time(job.creation) + waiting

    def job_order_key(self, job: JobInput, state: PassState) -> tuple[int, float]:
        deadline = self.deadline(job)
        return (0, deadline) if deadline is not None else (1, 0.0)

    def job_enqueueable(self, job: JobInput, state: PassState) -> Vote:
        return self._permit_when_due(job, state)

    def job_pipelined(self, view: GangView, job: JobInput, state: PassState) -> Vote:
        return self._permit_when_due(job, state)

    def _permit_when_due(self, job: JobInput, state: PassState) -> Vote:
        deadline = self.deadline(job)
        return PERMITTED if deadline is not None and state.now >= deadline else ABSTAINED
