"""Volcano's `overcommit` plugin: a job is enqueueable only if its
`minResources` fit in the cluster's allocatable × `overcommit-factor` minus what admitted jobs
already take. Its argument `overcommit-factor` (float, default 1.2; values below 1 are replaced
by 1.2, as Volcano does). Without the plugin in the conf there is no such rule at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from core.resources import ResourceVector, format_shortfall
from plugins.framework.config_types import ConfigError
from plugins.framework.extension_points import CLUSTER, PERMITTED, REJECT, PassState, Vote
from plugins.model.job_order import JobInput

NAME = "overcommit"
ARGUMENT = "overcommit-factor"
DEFAULT_FACTOR = 1.2


def parse_factor(arguments: Mapping[str, Any]) -> float:
    """The `overcommit-factor` argument (default 1.2; below 1 means 1.2, as in Volcano)."""
    raw = arguments.get(ARGUMENT, DEFAULT_FACTOR)
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ConfigError(f'arguments["{ARGUMENT}"]: expected a number, not {raw!r}')
    try:
        factor = float(raw)
    except ValueError:
        raise ConfigError(f'arguments["{ARGUMENT}"]: expected a number, not {raw!r}') from None
    return factor if factor >= 1.0 else DEFAULT_FACTOR


def shortfall(
    min_resources: ResourceVector | None,
    total: Mapping[str, int],
    used: Mapping[str, int],
    factor: float | None,
) -> str:
    """Why `min_resources` do not fit in total × factor − used ("" when they do, when the job
    has no minResources, or when the rule is off: `factor` None)."""
    if factor is None or min_resources is None:
        return ""
    for name, amount in min_resources.items():
        if name == "pods" or amount <= 0:
            continue
        idle = int(total.get(name, 0) * factor) - used.get(name, 0)
        if amount > idle:
            return format_shortfall(name, amount, max(idle, 0))
    return ""


class OvercommitPlugin:
    """The session plugin: JobEnqueueable (Reject with the shortfall, else Permit) and
    JobEnqueued (what was admitted counts as used for the rest of the pass)."""

    name = NAME
    # What its vote reads: the job's minResources, the cluster's sums.
    job_fields: ClassVar[Mapping[str, tuple[str, ...]]] = {"job_enqueueable": ("min_resources",)}
    inputs: ClassVar[Mapping[str, frozenset[str]]] = {"job_enqueueable": frozenset({CLUSTER})}

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self.factor = parse_factor(arguments)

    def job_enqueueable(self, job: JobInput, state: PassState) -> Vote:
        short = shortfall(job.min_resources, state.total, state.used, self.factor)
        if short:
            return Vote(REJECT, short)
        return PERMITTED

    def job_enqueued(self, job: JobInput, state: PassState) -> None:
        if job.min_resources is None:
            return
        for name, amount in job.min_resources.items():
            state.used[name] = state.used.get(name, 0) + amount

    def job_allocated(self, job: JobInput, held: ResourceVector, state: PassState) -> None:
        """A gang admitted whole was enqueued and allocated at once: its minResources count
        as used for the rest of the pass, as an enqueued job's do."""
        self.job_enqueued(job, state)
