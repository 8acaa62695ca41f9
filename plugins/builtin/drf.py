"""Volcano's `drf` plugin: jobs with the smaller dominant resource
share first, and a victim only when its job keeps at least the share the preemptor would
reach. Hierarchical drf (`enableHierarchy: true`) is not implemented: a conf asking for it is
refused at start-up (`plugins.framework.registry`)."""

from __future__ import annotations

from collections.abc import Sequence

from core.resources import ResourceVector
from plugins.framework.extension_points import PassState, Preemptor, SessionPlugin
from plugins.model.job_order import JobInput, drf_share
from plugins.model.victims import VictimUnit

_EPSILON = 1e-6  # Volcano's shareDelta


class DrfPlugin(SessionPlugin):
    name = "drf"

    def job_order_key(self, job: JobInput, state: PassState) -> float:
        return drf_share(job.allocated, ResourceVector(state.total))

    def preemptable(
        self, preemptor: Preemptor, candidates: Sequence[VictimUnit], state: PassState
    ) -> list[VictimUnit]:
        """A unit whose job, without it, still has at least the preemptor's share with its
        request. A unit is its job's whole placed part (or a lone pod), so what the job keeps
        is nothing: only a preemptor that would still hold no share may take it."""
        wanted = drf_share(preemptor.allocated + preemptor.request, ResourceVector(state.total))
        left = 0.0  # the victim job's share without the unit: a unit is all it holds
        return [unit for unit in candidates if left + _EPSILON >= wanted]
