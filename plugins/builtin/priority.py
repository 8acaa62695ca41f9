"""Volcano's `priority` plugin: higher-priority jobs first, and a job
may preempt only lower-priority work."""

from __future__ import annotations

from collections.abc import Sequence

from plugins.framework.extension_points import PassState, Preemptor, SessionPlugin
from plugins.model.gang import GangView
from plugins.model.job_order import JobInput
from plugins.model.victims import VictimUnit


class PriorityPlugin(SessionPlugin):
    name = "priority"

    def job_order_key(self, job: JobInput, state: PassState) -> int:
        return -job.priority  # PriorityClass value, higher first

    def preemptable(
        self, preemptor: Preemptor, candidates: Sequence[VictimUnit], state: PassState
    ) -> list[VictimUnit]:
        """Only work of a lower priority than the preemptor's job (a whole unit: its job's)."""
        return [unit for unit in candidates if unit.priority < preemptor.priority]

    def job_starving(self, view: GangView) -> bool:
        """Not every member of the job is placed (ready or waiting for room)."""
        return view.ready_num + view.count("Pipelined") < len(view.members)
