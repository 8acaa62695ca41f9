"""plugins.model.podgroup_status: phases, counts and conditions as Volcano writes them at session
close (spec/volcano.md §3.3, §3.4), one transition per test, messages computed by hand."""

from __future__ import annotations

from typing import Any

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord
from plugins.model.gang import GangView, gang_view
from plugins.model.podgroup_status import (
    fit_error,
    gang_condition,
    podgroup_phase,
    podgroup_status,
    status_changed,
)

NOW = "2026-03-01T12:00:00Z"
EARLIER = "2026-03-01T11:00:00Z"
TID = "pass-2"
GPU_SHORT = "not enough nvidia.com/gpu (need 4, free 2)"


def pod(name: str, state: str) -> PodRecord:
    """state: pending | bound | running | succeeded | failed | releasing (running, deleting)."""
    phase = {"pending": "Pending", "bound": "Pending", "releasing": "Running"}.get(
        state, state.capitalize()
    )
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "annotations": {"scheduling.k8s.io/group-name": "pg"},
    }
    if state == "releasing":
        meta["deletionTimestamp"] = EARLIER
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    }
    if state != "pending":
        spec["nodeName"] = "n1"
    return PodRecord({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def view(min_member: int, states: dict[str, int], *, allocated: int = 0) -> GangView:
    """A gang of `states` members (state -> how many); the first `allocated` pending members
    hold a ledger reservation."""
    cache = ClusterCache()
    cache.on_node_add(
        NodeRecord({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "64"}}})
    )
    cache.on_podgroup_add(
        PodGroupRecord(
            {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": min_member}}
        )
    )
    pending: list[str] = []
    for state, count in states.items():
        for i in range(count):
            record = pod(f"{state}-{i}", state)
            cache.on_pod_add(record)
            if state == "pending":
                pending.append(record.key)
    result = gang_view(cache.snapshot(), "ns/pg", allocated=set(pending[:allocated]))
    assert result is not None
    return result


def status(
    gang: GangView,
    *,
    admitted: bool = False,
    previous_phase: str = "Pending",
    reason: str | None = None,
    previous_conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return podgroup_status(
        gang,
        admitted=admitted,
        previous_phase=previous_phase,
        unschedulable_reason=reason,
        now=NOW,
        previous_conditions=previous_conditions or [],
        transition_id=TID,
    )


def unschedulable(message: str, *, when: str = NOW, tid: str = TID) -> dict[str, Any]:
    return {
        "type": "Unschedulable",
        "status": "True",
        "transitionID": tid,
        "lastTransitionTime": when,
        "reason": "NotEnoughResources",
        "message": message,
    }


def scheduled(*, when: str = NOW, tid: str = TID) -> dict[str, Any]:
    return {
        "type": "Scheduled",
        "status": "True",
        "transitionID": tid,
        "lastTransitionTime": when,
        "reason": "tasks in gang are ready to be scheduled",
        "message": "",
    }


# --------------------------------------------------------------------------------- phases


def test_pending_group_not_admitted_stays_pending() -> None:
    out = status(view(4, {"pending": 4}))
    assert out == {
        "phase": "Pending",
        "conditions": [
            unschedulable(
                "4/4 tasks in gang unschedulable: pod group is not ready, "
                "4 Pending, 4 minAvailable; Pending: 4 Undetermined"
            )
        ],
        "running": 0,
        "succeeded": 0,
        "failed": 0,
    }


def test_admitted_group_goes_inqueue_and_says_why_it_cannot_be_placed() -> None:
    out = status(view(4, {"pending": 4}), admitted=True, reason=GPU_SHORT)
    assert out["phase"] == "Inqueue"
    assert out["conditions"] == [
        unschedulable(
            "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, "
            "4 minAvailable; Pending: 4 Unschedulable. Origin reason is: " + GPU_SHORT
        )
    ]


def test_group_without_pods_vcjob_style() -> None:
    # A vcjob's pods are created only once its PodGroup is Inqueue: no members, no condition.
    assert status(view(4, {}), admitted=True) == {
        "phase": "Inqueue",
        "conditions": [],
        "running": 0,
        "succeeded": 0,
        "failed": 0,
    }
    assert status(view(4, {}), previous_phase="")["phase"] == "Pending"
    # Not admitted this pass but already Inqueue: it stays Inqueue (no dequeue in Volcano).
    assert status(view(4, {}), previous_phase="Inqueue")["phase"] == "Inqueue"


def test_reserved_gang_is_scheduled_but_still_inqueue_until_bound() -> None:
    out = status(view(4, {"pending": 4}, allocated=4), previous_phase="Inqueue")
    assert out["phase"] == "Inqueue"  # reservations are not ScheduledStatus
    assert out["conditions"] == [scheduled()]


def test_running_once_min_member_are_bound() -> None:
    out = status(view(4, {"bound": 2, "running": 2}), previous_phase="Inqueue")
    assert out["phase"] == "Running"
    assert out["running"] == 2
    assert out["conditions"] == [scheduled()]


def test_running_group_that_loses_members_is_unknown() -> None:
    out = status(view(4, {"running": 2, "pending": 2}), previous_phase="Running", reason=GPU_SHORT)
    assert out["phase"] == "Unknown"
    assert out["conditions"] == [
        unschedulable(
            "2/4 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 Running, "
            "4 minAvailable; Pending: 2 Unschedulable. Origin reason is: " + GPU_SHORT
        )
    ]


def test_inqueue_with_some_running_and_the_rest_unplaceable_is_unknown() -> None:
    out = status(view(2, {"running": 1, "pending": 1}), previous_phase="Inqueue")
    assert out["phase"] == "Unknown"


def test_histogram_sorts_as_strings_like_volcano() -> None:
    # As reported in volcano-sh/volcano#2462: 8 of 20 running, nothing pending.
    out = status(view(20, {"running": 8}), previous_phase="Running")
    assert out["phase"] == "Unknown"
    assert out["conditions"][0]["message"] == (
        "12/8 tasks in gang unschedulable: pod group is not ready, 20 minAvailable, 8 Running"
    )
    assert out["running"] == 8


def test_all_succeeded_is_completed() -> None:
    out = status(view(4, {"succeeded": 4}), previous_phase="Running")
    assert out["phase"] == "Completed"
    assert out["succeeded"] == 4
    assert out["conditions"] == [scheduled()]  # Succeeded members count as ready


def test_finished_with_failures_is_completed_and_keeps_its_conditions() -> None:
    before = [scheduled(when=EARLIER, tid="pass-1")]
    out = status(
        view(4, {"succeeded": 3, "failed": 1}),
        previous_phase="Running",
        previous_conditions=before,
    )
    assert out["phase"] == "Completed"
    assert (out["succeeded"], out["failed"]) == (3, 1)
    # Not ready (3 < 4) but nothing pending and enough scheduled: Volcano sets no condition.
    assert out["conditions"] == before


def test_terminating_members_keep_the_group_running() -> None:
    out = status(view(2, {"releasing": 2}), previous_phase="Running")
    assert out["phase"] == "Running"
    assert out["conditions"] == []
    assert out["running"] == 0  # Releasing is not Running


def test_too_few_scheduled_members_fall_back_to_pending() -> None:
    out = status(view(2, {"releasing": 1}), previous_phase="Running")
    assert out["phase"] == "Pending"
    assert out["conditions"] == [
        unschedulable(
            "2/1 tasks in gang unschedulable: pod group is not ready, 1 Releasing, 2 minAvailable"
        )
    ]


def test_min_member_zero_without_pods_is_completed_as_in_volcano() -> None:
    # getPodGroupPhase: scheduled (0) >= minMember (0) and scheduled == completed (0).
    assert status(view(0, {}), admitted=True)["phase"] == "Completed"


def test_phase_function_alone() -> None:
    gang = view(3, {"running": 1, "bound": 1, "pending": 1})
    assert podgroup_phase(gang, current_phase="Inqueue", unschedulable=True) == "Unknown"
    assert podgroup_phase(gang, current_phase="Inqueue", unschedulable=False) == "Inqueue"
    assert podgroup_phase(gang, current_phase="Running", unschedulable=False) == "Pending"


# ----------------------------------------------------------------------------- conditions


def test_unchanged_condition_keeps_its_time_and_transition_id() -> None:
    message = (
        "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
        "Pending: 4 Undetermined"
    )
    before = [unschedulable(message, when=EARLIER, tid="pass-1")]
    out = status(view(4, {"pending": 4}), previous_conditions=before)
    assert out["conditions"] == before
    # A different message is a transition: new time, new ID.
    changed = status(view(4, {"pending": 4}), previous_conditions=before, reason=GPU_SHORT)
    assert changed["conditions"][0]["lastTransitionTime"] == NOW
    assert changed["conditions"][0]["transitionID"] == TID


def test_conditions_of_the_other_type_stay_as_they_were() -> None:
    old_unschedulable = unschedulable("old", when=EARLIER, tid="pass-1")
    out = status(
        view(2, {"running": 2}), previous_phase="Running", previous_conditions=[old_unschedulable]
    )
    # Volcano replaces a condition of the same type in place and leaves the other type alone.
    assert out["conditions"] == [old_unschedulable, scheduled()]


def test_duplicate_conditions_of_one_type_are_collapsed() -> None:
    before = [scheduled(when=EARLIER, tid="pass-1"), scheduled(when=EARLIER, tid="pass-0")]
    out = status(view(1, {"running": 1}), previous_phase="Running", previous_conditions=before)
    assert out["conditions"] == [before[0]]


def test_fit_error_with_explicit_pending_reasons() -> None:
    gang = view(6, {"pending": 6})
    assert fit_error(
        gang, pending_reasons={"Unschedulable": 1, "Undetermined": 2, "Schedulable": 3}
    ) == (
        "pod group is not ready, 6 Pending, 6 minAvailable; "
        "Pending: 1 Unschedulable, 2 Undetermined, 3 Schedulable"
    )


def test_status_changed_ignores_times_and_ids() -> None:
    gang = view(4, {"pending": 4})
    first = status(gang)
    again = podgroup_status(
        gang,
        admitted=False,
        previous_phase="Pending",
        unschedulable_reason=None,
        now="2026-03-01T13:00:00Z",
        transition_id="pass-3",
    )
    assert not status_changed(first, again)
    assert status_changed(first, status(gang, admitted=True))
    assert status_changed(first, {**first, "running": 1})
    # Volcano omits zero counts and empty conditions: absent equals zero.
    assert not status_changed({"phase": "Inqueue"}, status(view(4, {}), admitted=True))
    # A PodGroup with no status yet gets its first phase written.
    assert status_changed(None, status(view(4, {})))


def test_a_group_refused_before_it_has_members_says_why() -> None:
    """Volcano's gang plugin sets Unschedulable on every job that is not ready, its tasks
    there or not: a group refused at enqueue before its pods exist carries the reason; one
    enqueued and waiting for its job's pods carries none."""
    empty = view(2, {})
    reason = "gang ns/pg: waiting for admission: queue q cannot hold minResources: cpu need 4"
    condition = gang_condition(empty, unschedulable_reason=reason)
    assert condition is not None and condition["type"] == "Unschedulable"
    assert condition["message"] == (
        "2/0 tasks in gang unschedulable: pod group is not ready, 2 minAvailable. "
        f"Origin reason is: {reason}"
    )
    assert gang_condition(empty) is None
