"""Read-only JSON views of what the extender holds in memory, for people and `vulcan explain`:

    GET /debug/gangs/<namespace>/<name>   one PodGroup as the gang scheduler sees it
    GET /debug/queues                     every queue as the last scheduling pass computed it
    GET /debug/memo                       the scheduling memo's mode and, with
                                          --scheduler-memo=check, its divergences
    GET /debug/invariants                 the accounting invariants passes broke (any is a
                                          bug): {"breaches": n, "recent": [...]}

Why: the answer to "why is my job still pending?" is partly in this process only (the gang
ledger, the held binds and their timers, the backoff after a timeout, the deserved shares of
the last pass); the API server holds conditions and events, not these. The views carry names
and numbers only (no pod specs, no secrets) and are built on request, from state the
scheduling pass keeps anyway: nothing is computed for them on the hot path. Building one reads
the cache in place without awaiting, like a pass, so it is consistent.

`--enable-debug-endpoints=false` leaves the routes out (404).

Shapes (quantities are Kubernetes strings, "pods" left out as in the queue plugins):

gang: {"podgroup", "uid", "queue", "phase", "minMember", "minTaskMember", "minResources",
       "admitted", "reason", "members": {"created", "admitted", "holdingBinds", "bound",
       "pending"}, "statuses": {<Volcano task status>: n}, "gangTimeoutSeconds",
       "hold": {"pods", "timeoutSeconds", "secondsLeft"} | null, "committed",
       "backoffSecondsLeft", "reserved", "reservations": [{"pod", "node", "request",
       "waitingFor": {"node", "pods"} | null}], "elasticWaiting": [pod]}
queues: {"plugin", "hierarchical", "total", "queues": [{"name", "state", "open", "weight",
       "priority", "reclaimable", "parent", "capability", "realCapability", "guarantee",
       "deserved", "allocated", "request", "inqueue", "elastic", "share", "bestEffort",
       "overused", "borrowing", "waiting", "podgroups", "starving": {"gang", "sinceSeconds",
       "holding"} | null}], "borrowing": [...], "waiting": [...]}
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from core.api import keys
from core.resources import ResourceVector
from plugins.model import gang as gangs_plugin
from plugins.model.share_json import quantities, queue_rows

if TYPE_CHECKING:
    from extender.gangs import GangScheduler
    from extender.queues import QueuePass

JSON = "application/json"


def gang_view(gangs: GangScheduler, key: str) -> dict[str, Any] | None:
    """One PodGroup ("namespace/name") as the gang scheduler sees it; None if not cached."""
    cache = gangs.cache
    group = cache.podgroups.get(key)
    if group is None:
        return None
    ledger, barrier = gangs.ledger, gangs.barrier
    reserved_pods = ledger.of_group(key)
    hold = barrier.hold_of(key)
    held = hold[0] if hold is not None else []
    view = gangs_plugin.gang_view(
        cache.live_view(), key, allocated=set(reserved_pods), binding=set(held)
    )
    assert view is not None  # the group exists
    reservations = []
    for pod_key in sorted(reserved_pods):
        reservation = ledger.reservation_of(pod_key)
        if reservation is None:
            continue
        blocked = gangs.slots.blockers(pod_key, group=key)
        reservations.append(
            {
                "pod": pod_key,
                "node": reservation.node,
                "request": quantities(reservation.request),
                # The room is held by terminating pods (victims evicted for this gang).
                "waitingFor": {"node": blocked[0], "pods": blocked[1]} if blocked else None,
            }
        )
    timeout = gangs_plugin.annotation_duration(group, keys.GANG_TIMEOUT)
    return {
        "podgroup": key,
        "uid": group.uid,
        "queue": group.queue,
        "phase": group.phase,
        "minMember": group.min_member,
        "minTaskMember": dict(group.min_task_member),
        "minResources": quantities(group.min_resources) if group.min_resources else None,
        "admitted": key in gangs.admitted,
        # Why it is not admitted, word for word what filter answers its members.
        "reason": gangs.reasons.get(key),
        # Enqueued on the promise of eviction: whom it will preempt (or reclaim from).
        "promise": gangs.promises.get(key),
        "members": {
            "created": view.created,
            # Volcano's AllocatedStatus: a reserved slot, a held bind, bound or running.
            "admitted": view.allocated,
            "holdingBinds": len(held),
            "bound": sum(1 for pod in view.members if pod.node is not None),
            "pending": view.pending,
        },
        "statuses": dict(sorted(view.counts.items())),
        "gangTimeoutSeconds": barrier.effective_timeout(timeout),
        "hold": (
            {"pods": sorted(held), "timeoutSeconds": hold[1], "secondsLeft": round(hold[2], 1)}
            if hold is not None
            else None
        ),
        "committed": barrier.committed(key),
        "backoffSecondsLeft": round(barrier.backing_off(key), 1),
        "reserved": quantities(ledger.held_by(key)),
        "reservations": reservations,
        # Members beyond its minimum waiting for a slot (`plugins.actions.backfill`).
        "elasticWaiting": sorted(gangs.elastic.waiting.get(key, ())),
    }


def queues_view(gangs: GangScheduler) -> dict[str, Any] | None:
    """Every queue as the last pass computed it; None before the first pass."""
    queue_pass: QueuePass | None = gangs.queue_pass
    if queue_pass is None:
        return None
    model = queue_pass.model
    rows = []
    borrowing, waiting = [], []
    now = time.time()
    for row in queue_rows(queue_pass):
        name = row["name"]
        share = model.shares[name]
        over = quantities(share.allocated.saturating_sub(share.deserved))
        wants = quantities(share.request.saturating_sub(share.allocated))
        if over and not share.best_effort:
            borrowing.append(name)
        if wants:
            waiting.append(name)
        row["borrowing"] = over  # held above its deserved share
        row["waiting"] = wants  # asked for above what it holds
        row["podgroups"] = dict(sorted(queue_pass.phases.get(name, {}).items()))
        row["starving"] = _starving(gangs, name, now)
        rows.append(row)
    return {
        "plugin": gangs.policy.queue_model,
        "hierarchical": gangs.policy.hierarchical,
        "total": quantities(gangs.cache.total_allocatable),
        # What the overcommit rule counted as taken in the last pass (bound pods' requests
        # plus the gang ledger's reservations) and the reservations alone, node by node.
        "used": quantities(ResourceVector(gangs.pass_state.used)),
        "reservedByNode": {
            node: quantities(amount) for node, amount in sorted(gangs.ledger.by_node.items())
        },
        "queues": rows,
        "borrowing": borrowing,
        "waiting": waiting,
    }


def _starving(gangs: GangScheduler, queue: str, now: float) -> dict[str, Any] | None:
    """The queue's starving gang (`plugins.actions.starvation`): which, for how long the queue has
    had one, and whether the queue is in a hold phase now (its other gangs and elastic members
    wait) or a backfill phase."""
    starving = gangs.starving
    target = starving.target(queue)
    if target is None:
        return None
    return {
        "gang": target,
        "sinceSeconds": round(now - starving.since(queue, now), 1),
        "holding": starving.holding(queue, now) is not None,
    }


def _answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


def add_debug_routes(app: web.Application, gangs: GangScheduler) -> None:
    """Serve the two views on the extender's app (before it starts)."""

    async def gang(request: web.Request) -> web.Response:
        key = f"{request.match_info['namespace']}/{request.match_info['name']}"
        view = gang_view(gangs, key)
        if view is None:
            return _answer({"error": f"podgroup {key} is not in the extender's cache"}, 404)
        return _answer(view)

    async def queues(request: web.Request) -> web.Response:
        view = queues_view(gangs)
        if view is None:
            return _answer({"error": "no scheduling pass yet"}, 503)
        return _answer(view)

    async def memo(request: web.Request) -> web.Response:
        runner = gangs.runner
        return _answer(
            {
                "mode": runner.mode,
                "divergences": runner.divergence_count,
                "recent": [d.describe() for d in runner.divergences],
            }
        )

    app.router.add_get("/debug/gangs/{namespace}/{name}", gang)
    app.router.add_get("/debug/queues", queues)

    async def invariants(request: web.Request) -> web.Response:
        runner = gangs.runner
        recent = [b.describe() for b in runner.breaches]
        return _answer({"breaches": runner.breach_count, "recent": recent})

    app.router.add_get("/debug/memo", memo)
    app.router.add_get("/debug/invariants", invariants)
