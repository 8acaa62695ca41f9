"""Why a gang (one PodGroup and its pods) waits: the checks, in the order vulcan's extender
meets them (extender/gangs.py: queue, JobValid, enqueue, allocate, placement; then an admitted
gang's pipelined members and held binds), the first that holds naming the cause.

Every check reuses the scheduler's own rules: Volcano's gang counts (`plugins.model.gang`), the
queue share model (`explain.queue_causes`), the whole-gang placement (`plugins.model.placement`).
Pure: a function of the collected objects and the extender's views.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.records import PodGroupRecord, PodRecord
from core.refusal_words import vulcan_refused
from core.resources import ResourceVector
from core.timestamps import epoch_seconds
from explain.cluster_fit import cannot_fit
from explain.focus import key_of, meta
from explain.placement_causes import placement
from explain.placement_causes import plan as placement_plan
from explain.queue_causes import queue_limits, queue_state
from explain.texts import (
    Finding,
    duration,
    event_text,
    event_time,
    events_about,
    origin_reason,
    scheduling_message,
    scheduling_time,
    short,
    unschedulable_message,
)
from explain.topology_causes import network_topology
from explain.world import World
from plugins.model import gang as gangs
from plugins.model import gang_ready
from plugins.model.unserved import NOT_SENT

if TYPE_CHECKING:
    from explain.collect import Collected

_ZERO = ResourceVector()
_HOLD_EVENTS = ("GangHolding", "GangCommitted", "GangTimedOut", "GangReleased")
_NAMED = 3  # pods named in one line; the rest are counted


@dataclass(slots=True)
class GangCase:
    found: Collected
    world: World
    raw: dict[str, Any]  # the PodGroup as the API server holds it
    group: PodGroupRecord
    view: gangs.GangView
    gang: dict[str, Any] | None  # the extender's /debug/gangs view, when it answered
    pods: dict[str, dict[str, Any]] = field(init=False)  # raw pods by "namespace/name"

    def __post_init__(self) -> None:
        self.pods = {key_of(pod): pod for pod in self.found.pods}

    @property
    def admitted(self) -> bool:
        """Admitted by the extender (its word; unknown without it: False, so the queue and
        placement checks are made, as they would pass for an admitted gang anyway)."""
        return bool(self.gang and self.gang.get("admitted"))

    def raw_pod(self, key: str) -> dict[str, Any]:
        return self.pods.get(key) or {}

    def waiting_members(self) -> list[PodRecord]:
        """Members that have no node yet and are not going away."""
        return [
            m for m in self.view.members if m.node is None and not m.terminal and not m.deleting
        ]


def named(keys: list[str]) -> str:
    shown = ", ".join(keys[:_NAMED])
    return shown + (f" and {len(keys) - _NAMED} more" if len(keys) > _NAMED else "")


# ------------------------------------------------------------------------------ checks


def live_bound(view: gangs.GangView) -> list[PodRecord]:
    """Members that keep the gang whole: bound, not being deleted, not Failed."""
    return [m for m in view.members if gangs.counts_for_quorum(m)]


def is_partial(view: gangs.GangView) -> bool:
    """Some but too few of the gang's live members are bound (fewer than minMember, or a
    checked task short of its minimum): the state all-or-nothing binding exists to prevent."""
    running = any(m.phase != gangs.SUCCEEDED for m in live_bound(view))
    return running and not gangs.whole(view)


def partial(case: GangCase) -> Finding | None:
    """First of all: a gang partly placed (e.g. members lost to an eviction, a node failure or
    a deletion while the rest run on), with what the rest waits for."""
    view = case.view
    if not is_partial(view):
        return None
    bound = sorted(m.key for m in live_bound(view))
    text = (
        f"partly placed: {len(bound)} of the {view.min_member} members it needs "
        f"(minMember {view.min_member}) are bound ({named(bound)})"
    )
    _short, tasks = gangs.quorum_shortfall(
        view.min_member,
        view.min_task_member,
        len(bound),
        _per_task(live_bound(view)),
    )
    if tasks:
        text += "; short: " + ", ".join(f"task {t} {g}/{m}" for t, (g, m) in tasks.items())
    broken = [e for e in _group_events(case) if e.get("reason") == "GangBroken"]
    if broken:
        text += f"; {short(event_text(broken[-1]), 200)}"
    rest = next((f for check in CHECKS[2:] if (f := check(case)) is not None), None)
    if rest is None:
        rest = fallback(case)
    waiting = case.waiting_members()
    if waiting:
        text += f"; the other {len(waiting)} wait: {rest.headline}"
    else:
        text += "; the missing members do not exist yet (their controller makes them)"
    unblock = [
        "the extender places the missing members together with the bound ones (all-or-nothing)"
    ]
    return Finding("gang-partial", text, unblock + rest.unblock)


def _per_task(pods: list[PodRecord]) -> dict[str, int]:
    per_task: dict[str, int] = {}
    for pod in pods:
        per_task[pod.task or ""] = per_task.get(pod.task or "", 0) + 1
    return per_task


def scheduled(case: GangCase) -> Finding | None:
    view = case.view
    if view.created == 0 or view.scheduled < max(1, view.min_member):
        return None
    if view.completed == view.scheduled and not case.waiting_members():
        return Finding("finished", f"not waiting: all {view.completed} scheduled members finished")
    extra = len(case.waiting_members())
    text = (
        f"not waiting: {view.scheduled} member{'s are' if view.scheduled != 1 else ' is'} "
        f"scheduled (minMember {view.min_member})"
    )
    if extra:
        text += f"; {extra} more beyond minMember wait for room"
    return Finding("scheduled", text)


def members(case: GangCase) -> Finding | None:
    group, view = case.group, case.view
    if group.phase in ("", "Pending") and view.created == 0:
        return None  # enqueued on minResources first; its pods may come once it is Inqueue
    ok, _reason = gang_ready.valid(view)
    if ok:
        return None
    tasks = gang_ready.task_valid(view)
    if tasks:
        parts = [
            f"task {t} has {n} of the {need} members it needs" for t, (n, need) in tasks.items()
        ]
        text = "the gang is missing members: " + "; ".join(parts) + " (minTaskMember)"
    else:
        text = (
            f"the gang is missing members: {view.valid_num} of the {view.min_member} pods it "
            f"needs exist (minMember {view.min_member})"
        )
    if view.created > view.valid_num:
        extra = view.created - view.valid_num
        text += f"; {extra} more exist but do not count (failed, being deleted or unknown)"
    missing = max(view.min_member - view.valid_num, 1)
    if group.job_owned:
        unblock = ["its job controller creates them: see the Job's events (controllers running?)"]
    else:
        unblock = [
            f"create {missing} more pod(s) annotated scheduling.k8s.io/group-name: {group.name}"
        ]
        if view.valid_num > 0 and not tasks:
            unblock.append(f"or lower the PodGroup's spec.minMember to {view.valid_num}")
    return Finding("gang-members", text, unblock)


def unserved(case: GangCase) -> Finding | None:
    """The extender's verdict that the gang needs pods vulcan is never asked about: no room
    would help, so it comes before the queue's and the nodes' causes."""
    reason = (case.gang or {}).get("reason") or origin_reason(unschedulable_message(case.raw))
    if not reason or NOT_SENT not in reason:
        return None
    text = reason.removeprefix(f"gang {case.group.key}: ")
    owner = "the Volcano Job's spec.schedulerName" if case.group.job_owned else "the pods"
    return Finding(
        "unserved",
        text,
        [f"make {owner} name a scheduler vulcan serves (or its filter entry's marker)"],
    )


def backoff(case: GangCase) -> Finding | None:
    left = float((case.gang or {}).get("backoffSecondsLeft") or 0)
    if left <= 0 or case.admitted:
        return None
    timed_out = [e for e in _group_events(case) if e.get("reason") == "GangTimedOut"]
    why = f" ({short(event_text(timed_out[-1]), 160)})" if timed_out else ""
    return Finding(
        "gang-backoff",
        f"its held binds timed out{why}; it may be admitted again in {duration(left)}",
        ["see why a member could not be placed (its events), it is retried after the backoff"],
    )


def held_binds(case: GangCase) -> Finding | None:
    hold = (case.gang or {}).get("hold") or {}
    held = sorted(hold.get("pods") or ())
    left: float | None = hold.get("secondsLeft")
    if not held:
        if case.gang is not None:
            return None  # the extender says: nothing held
        since = _api_hold(case)
        if since is None:
            return None
        left = since
    missing = _blamed([m for m in case.waiting_members() if m.key not in held], case, bool(held))
    count = f"{len(held)} of {case.view.min_member} members hold" if held else "members hold"
    text = f"{count} their binds, waiting for the rest of the gang"
    unblock = []
    if missing:
        pod = missing[0]
        why = (
            scheduling_message(case.raw_pod(pod.key))
            or _odd_scheduler(case, pod)
            or "kube-scheduler has not tried it yet"
        )
        others = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        text += f": {pod.key}{others} cannot be placed: {short(why, 180)}"
        unblock.append(f"make {pod.key} schedulable ({short(why, 100)})")
    if left is not None:
        text += f"; the hold times out in {duration(left)}"
        unblock.append(
            f"otherwise the held binds fail in {duration(left)} and the gang is tried again "
            "after a backoff"
        )
    return Finding("binds-held", text, unblock)


def _blamed(waiting: list[PodRecord], case: GangCase, known: bool) -> list[PodRecord]:
    """The members the hold waits for. With the extender's list of held pods, every other
    waiting member. Without it, held members are indistinguishable from the others in the API
    (a held bind leaves no trace on the pod): those kube-scheduler last refused for a reason of
    their own come first, newest first; a refusal naming the gang itself (vulcan's filter: "gang
    ns/g: ...", or "podgroup ns/g not found" from before its cache had the group) dates from
    before its admission and is stale, so those members are taken to be the held ones."""
    if known:
        return waiting

    def stale(pod: PodRecord) -> bool:
        return vulcan_refused(scheduling_message(case.raw_pod(pod.key)), case.group.key)

    fresh = [m for m in waiting if not stale(m) and scheduling_message(case.raw_pod(m.key))]
    fresh.sort(key=lambda m: -scheduling_time(case.raw_pod(m.key)))
    # A member no scheduler of its gang picks up leaves no refusal at all: name it too.
    return fresh + [m for m in waiting if m not in fresh and _odd_scheduler(case, m)]


def _odd_scheduler(case: GangCase, pod: PodRecord) -> str | None:
    """Why `pod` may never be tried: it names another scheduler than the rest of its gang (a
    typo in schedulerName leaves it waiting for a scheduler that does not run)."""
    names = [m.scheduler_name for m in case.view.members]
    common = max(sorted(set(names)), key=names.count)
    if pod.scheduler_name == common:
        return None
    return (
        f"its schedulerName is {pod.scheduler_name} while the rest of its gang's is {common}: "
        "no scheduler that places the gang will try it"
    )


def _api_hold(case: GangCase) -> float | None:
    """Without the extender: seconds left of a hold the PodGroup's events say began and did not
    end (its last hold event is GangHolding, "... at most 60s ...")."""
    events = [e for e in _group_events(case) if e.get("reason") in _HOLD_EVENTS]
    if not events or events[-1].get("reason") != "GangHolding":
        return None
    found = re.search(r"at most ([0-9.]+)s", event_text(events[-1]))
    limit = float(found.group(1)) if found else 0.0
    return max(0.0, event_time(events[-1]) + limit - case.found.now)


def promised(case: GangCase) -> Finding | None:
    """Enqueued on the promise of eviction (the extender's debug view names the victims):
    its pods are being made, and it will preempt (or reclaim) them when it is placed."""
    promise = (case.gang or {}).get("promise")
    if not promise or case.admitted:
        return None
    return Finding(
        "will-evict",
        f"enqueued on the promise of eviction: {promise}; it is placed, whole, once its "
        "members exist and those units are evicted",
        ["nothing to do: the eviction happens when its members are created"],
    )


def victims(case: GangCase) -> Finding | None:
    """An admitted gang waits for the pods evicted for it (Volcano's pipelined tasks)."""
    waiting: list[str] = []
    for reservation in (case.gang or {}).get("reservations") or ():
        waiting.extend((reservation.get("waitingFor") or {}).get("pods") or ())
    if not waiting and case.gang is None:
        waiting = _freed_for(case)
    if not waiting:
        return None
    keys = sorted(set(waiting))
    pods = case.world.snapshot.pods
    where = [f"{k} on {pods[k].node}" if k in pods and pods[k].node else k for k in keys]
    ends = [epoch_seconds(meta(case.raw_pod(k)).get("deletionTimestamp")) for k in keys]
    text = f"waiting for {len(keys)} pod(s) evicted for it to terminate: {named(where)}"
    known = [t for t in ends if t is not None]
    if known:
        text += f" (grace period ends in {duration(max(known) - case.found.now)})"
    return Finding(
        "victims-terminating",
        text,
        [
            "nothing to do: its members are bound as soon as those pods are gone",
            "to hurry: kubectl delete pod --grace-period=0 --force "
            + " ".join(k.split("/", 1)[1] for k in keys[:_NAMED]),
        ],
    )


def _freed_for(case: GangCase) -> list[str]:
    """Terminating pods whose room the gang needs: it does not fit now, but fits once they
    are gone (Volcano's FutureIdle)."""
    members, need = gang_ready.pending_members(case.view), gang_ready.members_needed(case.view)
    if not members or need == 0:
        return []
    snapshot = case.world.snapshot
    freed: dict[str, ResourceVector] = {}
    leaving: dict[str, list[str]] = {}
    for pod in snapshot.pods.values():
        if pod.deleting and pod.occupies_node and pod.node is not None:
            freed[pod.node] = freed.get(pod.node, _ZERO) + pod.requests
            leaving.setdefault(pod.node, []).append(pod.key)
    if not freed or placement_plan(case, {}).ok:
        return []
    plan = placement_plan(case, {node: _ZERO - room for node, room in freed.items()})
    if not plan.ok:
        return []
    return sorted(k for node in set(plan.slots.values()) for k in leaving.get(node, ()))


def kube_scheduler(case: GangCase) -> Finding | None:
    for pod in case.waiting_members():
        message = scheduling_message(case.raw_pod(pod.key))
        if message:
            return Finding("scheduler", f"kube-scheduler cannot place {pod.key}: {short(message)}")
    return None


def fallback(case: GangCase) -> Finding:
    reason = (case.gang or {}).get("reason") or origin_reason(unschedulable_message(case.raw))
    if reason:
        return Finding("other", short(reason))
    if case.waiting_members():
        return Finding("binding", "admitted: kube-scheduler is placing and binding its members")
    return Finding("unknown", "no reason recorded yet: the extender has not judged it yet")


CHECKS: tuple[Callable[[GangCase], Finding | None], ...] = (
    partial,
    scheduled,
    queue_state,
    cannot_fit,
    promised,
    members,
    unserved,
    backoff,
    queue_limits,
    held_binds,
    victims,
    network_topology,
    placement,
    kube_scheduler,
)


def explain_gang(case: GangCase) -> Finding:
    for check in CHECKS:
        finding = check(case)
        if finding is not None:
            return finding
    return fallback(case)


def _group_events(case: GangCase) -> list[dict[str, Any]]:
    return events_about(case.found.events, "PodGroup", [case.group.name])
