"""The end of a soak: every submitted object accounted for, what happened counted, every
violation printed with the objects involved, and the closing line."""

from __future__ import annotations

from collections import Counter
from typing import Any, TextIO

from bench.soak_actions import Actor, Submitted
from bench.soak_checker import Checker, Violation
from bench.soak_model import JOB_FINAL, TERMINAL
from bench.soak_watch import Tally


def account(
    actor: Actor,
    checker: Checker,
    tally: Tally,
    now: float,
    deployments: dict[str, str] | None = None,
) -> tuple[Counter[str], list[str]]:
    """Each submitted object's fate (a Counter of outcomes) and the details of the ones still
    running or pending; an object gone that nobody accounts for becomes a `lost` violation."""
    outcomes: Counter[str] = Counter()
    open_items: list[str] = []
    for record in actor.submitted.values():
        outcome, note = _fate(record, actor, checker, tally, deployments or {})
        outcomes[f"{record.kind}: {outcome}"] += 1
        if outcome == "lost":
            checker.violations.append(
                Violation("lost", f"{record.kind} {record.key}", now, now, note)
            )
        elif outcome.startswith("still"):
            open_items.append(f"{record.kind} {record.key}: {note}")
        elif outcome == "rejected":
            checker.violations.append(
                Violation("rejected", f"{record.kind} {record.key}", now, now, note)
            )
    return outcomes, open_items


def _fate(
    record: Submitted, actor: Actor, checker: Checker, tally: Tally, deployments: dict[str, str]
) -> tuple[str, str]:
    if record.rejected:
        return "rejected", record.rejected
    if record.deleted:
        return "deleted by the soak", ""
    if record.cleaned:
        return f"{record.cleaned} (then cleaned up)", ""
    if record.kind == "Deployment":
        if record.key not in deployments:
            return "lost", "the Deployment is gone and the soak did not delete it"
        return "still running", deployments[record.key]
    if record.kind == "Job":
        job = checker.jobs.get(record.key)
        if job is None and record.key in tally.jobs_completed | tally.jobs_failed:
            ended = "Completed" if record.key in tally.jobs_completed else "Failed"
            return f"{ended} (then removed by its TTL)", ""
        if job is None:
            return "lost", "the Job is gone and the soak did not delete it"
        if job.phase in JOB_FINAL:
            return job.phase, ""
        group = next((g for g in checker.groups.values() if g.job == record.key), None)
        why = f"phase {job.phase or '-'}"
        if group is not None:
            bound = sum(1 for p in checker.members(group.key) if p.live_bound)
            why += (
                f", PodGroup {group.key} {group.phase or '-'} {bound}/{group.min_member} bound"
                f"{': ' + group.message if group.message else ''}"
            )
        return f"still {job.phase or 'Pending'}", why
    if record.kind == "PodGroup":
        group = checker.groups.get(record.key)
        if group is None:
            return "lost", "the PodGroup is gone and the soak did not delete it"
        members = checker.members(record.key)
        if record.key in checker.completed:
            return "Completed", ""
        if members and all(p.phase in TERMINAL for p in members):
            return "Failed" if any(p.phase == "Failed" for p in members) else "Completed", ""
        bound = sum(1 for p in members if p.live_bound)
        if record.key in checker.degraded and 0 < bound < group.min_member:
            return "still running short (members evicted)", _members(members)
        return (
            f"still {group.phase or 'Pending'}",
            f"{bound}/{group.min_member} bound: {group.message or 'no condition'}",
        )
    pod = checker.pods.get(record.key)
    if pod is None or pod.uid != record.uid:
        if record.uid in actor.deleted_pods:
            return "deleted by the soak", ""
        if record.uid in tally.evicted:
            return f"evicted ({tally.evicted[record.uid]})", ""
        last = tally.last_state.get(record.uid, "")
        return "lost", "the pod is gone; neither the soak nor an eviction deleted it" + (
            f" ({last})" if last else ""
        )
    if pod.phase in TERMINAL:
        return pod.phase, ""
    if pod.uid in tally.evicted:
        return f"evicted ({tally.evicted[pod.uid]})", ""
    return f"still {'Running' if pod.node else 'Pending'}", f"on {pod.node or 'no node'}"


def _members(members: list) -> str:
    return "; ".join(f"{p.key} {p.phase}{'@' + p.node if p.node else ''}" for p in members)


def gangs_completed(checker: Checker, tally: Tally) -> int:
    return len(tally.jobs_completed) + len(checker.completed)


def print_report(
    out: TextIO,
    *,
    seed: int,
    soaked: float,
    actor: Actor,
    checker: Checker,
    tally: Tally,
    outcomes: Counter[str],
    open_items: list[str],
    notes: list[str],
) -> int:
    """Everything, then the closing line; returns the number of violations."""
    w = out.write
    w(f"seed={seed}\n")
    for note in notes:
        w(f"note: {note}\n")
    w("what the soak did:\n")
    for name, count in sorted(actor.counts.items()):
        w(f"  {name}: {count}\n")
    w("what the cluster did:\n")
    w(f"  gangs seen whole (ran): {len(checker.whole)}\n")
    w(
        f"  ... with a networkTopology: {len(checker.whole_in_domain)}; subgroups seen whole: "
        f"{len(checker.whole_subgroups)}\n"
    )
    w(f"  gangs completed: {gangs_completed(checker, tally)} ({len(tally.jobs_completed)} jobs)\n")
    w(f"  jobs failed: {len(tally.jobs_failed)}\n")
    w(f"  evictions: {len(tally.evicted)} pods ({_reasons(tally)})\n")
    w(f"  reclaims: {tally.reclaim_decisions} decisions, {len(tally.reclaimed_pods)} pods\n")
    w(f"  preemptions: {tally.preempt_decisions} decisions, {len(tally.preempted_pods)} pods\n")
    for t, node, state in tally.node_changes:
        w(f"  node {node} {state} at t={t - checker.origin:.1f}s\n")
    w(f"  gang timeouts (binds held too long): {tally.gang_timeouts}\n")
    w(f"  job restarts (retryCount): {sum(tally.job_retries.values())}\n")
    w(f"  container restarts: {sum(tally.pod_restarts.values())}\n")
    w(f"  bare gangs that lost members while running: {len(checker.degraded)}\n")
    short = [
        key
        for key in sorted(checker.degraded)
        if (group := checker.groups.get(key)) is not None
        and 0 < sum(1 for p in checker.members(key) if p.live_bound) < group.min_member
    ]
    if short:
        w(f"  ... still short at the end: {', '.join(short)}\n")
    w("accounting of submitted objects:\n")
    for outcome, count in sorted(outcomes.items()):
        w(f"  {outcome}: {count}\n")
    for item in open_items[:40]:
        w(f"  open: {item}\n")
    if len(open_items) > 40:
        w(f"  open: ... and {len(open_items) - 40} more\n")
    for violation in checker.violations:
        w(violation.describe(checker.origin) + "\n")
    violations = len(checker.violations)
    w(
        f"soak_seconds={soaked:.0f} gangs_completed={gangs_completed(checker, tally)} "
        f"evictions={len(tally.evicted)} violations={violations} "
        f"worst_partial_s={checker.worst_partial:.1f}\n"
    )
    out.flush()
    return violations


def _reasons(tally: Tally) -> str:
    counts = Counter(tally.evicted.values())
    return ", ".join(f"{reason} {count}" for reason, count in sorted(counts.items())) or "none"


# Violations about one gang: the extender's view of it is printed with them.
GANG_KINDS = ("stall", "partial-gang", "partial-subgroup", "domain-split")


def extender_summary(view: Any, queues: Any) -> str:
    """What the extender thinks of a gang (its `/debug/gangs` view) and of its queue (its row
    of `/debug/queues`), in one line: admitted or not and why, its members, its slots."""
    if not isinstance(view, dict) or "podgroup" not in view:
        error = view.get("error") if isinstance(view, dict) else None
        return f"no view ({error or 'no answer'})"
    members = view.get("members") or {}
    parts = [
        f"admitted={view.get('admitted')}",
        f"committed={view.get('committed')}",
        f"phase={view.get('phase')}",
        "members " + ", ".join(f"{k} {v}" for k, v in members.items()),
        f"reserved {view.get('reserved') or {}}",
        f"hold {view.get('hold')}",
        f"backoff {view.get('backoffSecondsLeft')}s",
        f"elastic waiting {view.get('elasticWaiting') or '-'}",
        f"reason: {view.get('reason')}",
    ]
    rows = queues.get("queues", ()) if isinstance(queues, dict) else ()
    row = next((q for q in rows if q.get("name") == view.get("queue")), None)
    if row is not None:
        parts.append(
            f"queue {row['name']}: allocated {row.get('allocated')}, inqueue "
            f"{row.get('inqueue')}, elastic {row.get('elastic')}, deserved {row.get('deserved')}"
            + (f", starving {row['starving']}" if row.get("starving") else "")
        )
    if isinstance(queues, dict):
        parts.append(f"cluster used {queues.get('used')}, reserved {queues.get('reservedByNode')}")
    return "; ".join(parts)


def members_summary(pods: list[dict[str, Any]], view: Any) -> list[str]:
    """One line per unbound member of a gang, as the API server shows it and the extender
    holds it: its gates, its last PodScheduled condition (who tried it last, and when), the
    admission stamp, and its slot (and the pods still holding that room)."""
    slots = {}
    if isinstance(view, dict):
        slots = {r.get("pod"): r for r in view.get("reservations") or ()}
    lines = []
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if spec.get("nodeName") or meta.get("deletionTimestamp"):
            continue
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        scheduled = next(
            (
                c
                for c in (pod.get("status") or {}).get("conditions") or ()
                if c.get("type") == "PodScheduled"
            ),
            {},
        )
        gates = [g.get("name", "") for g in spec.get("schedulingGates") or ()]
        slot = slots.get(key)
        where = "no slot"
        if slot is not None:
            where = f"slot {slot.get('node')}"
            if slot.get("waitingFor"):
                where += f" waiting for {slot['waitingFor'].get('pods')}"
        lines.append(
            f"{meta.get('name')}: gates {gates or '-'}; PodScheduled "
            f"{scheduled.get('status', '-')}/{scheduled.get('reason', '-')} at "
            f"{scheduled.get('lastTransitionTime', '-')} "
            f"{str(scheduled.get('message', ''))[:80]!r}; admitted "
            f"{(meta.get('annotations') or {}).get('vulcan.sh/gang-admitted', '-')}; {where}"
        )
    return lines
