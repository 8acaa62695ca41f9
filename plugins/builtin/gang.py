"""Volcano's `gang` plugin as a session plugin, over the gang rules of
`plugins.model.gang`: JobValid, JobReady, JobPipelined, JobStarving and JobOrder (not-ready first).

Victims: Volcano's gang filter evicts members only while their job keeps minAvailable. vulcan
never evicts part of a running gang — a unit is a whole gang or a lone pod
(`plugins.actions.evictions.victim_units`) — so the rule holds by construction and the plugin
abstains rather than decide its tier with an unfiltered list."""

from __future__ import annotations

from plugins.framework.extension_points import (
    ABSTAINED,
    PERMITTED,
    REJECT,
    PassState,
    SessionPlugin,
    Vote,
)
from plugins.model import gang, gang_ready
from plugins.model.gang import GangView
from plugins.model.job_order import JobInput


class GangPlugin(SessionPlugin):
    name = "gang"

    def job_order_key(self, job: JobInput, state: PassState) -> int:
        return 1 if job.ready else 0  # jobs not ready yet first

    def job_valid(self, view: GangView) -> str | None:
        ok, why = gang_ready.valid(view)
        return None if ok else why

    def job_ready(self, view: GangView) -> bool:
        return gang_ready.ready(view)

    def job_pipelined(self, view: GangView, job: JobInput, state: PassState) -> Vote:
        waiting = view.count(gang.PIPELINED)
        placed = view.ready_num + waiting + view.pending_best_effort
        if placed >= view.min_member and gang_ready.task_ready(view):
            return PERMITTED
        return Vote(REJECT, f"gang {view.group_key}: {placed}/{view.min_member} placed")

    def job_starving(self, view: GangView) -> bool:
        return view.ready_num + view.count(gang.PIPELINED) < view.min_member


__all__ = ["ABSTAINED", "GangPlugin"]
