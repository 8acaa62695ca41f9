"""`vulcan demo gang` (split from `vulcan.demo`, which heads the demos): its two acts, each on a
fresh cluster (kube-scheduler stand-in alone, then with vulcan's extender), their bounded waits,
the summary of what happened, and `run_gang`. The jobs they run and follow live in
`vulcan.demo_gang_jobs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vulcan.demo_cluster import (
    NODE_PROFILE,
    NODES,
    _cluster_args,
    _interruptible,
    _stop_fully,
)
from vulcan.demo_gang_jobs import (
    JOBS,
    NAMESPACE,
    RUN_TIME,
    WORKERS,
    Run,
    _scheduled_message,
    _state,
)

POLL = 0.1
# Bounded waits. The stand-in fills the 4 GPUs within a second or two; "no progress" can only
# be shown by waiting several run times; the vulcan run needs two run times plus the extender's
# admission passes and held binds (seconds), so a minute is far more than enough.
PLACE_TIMEOUT = 30.0
STALL_WINDOW = 3 * RUN_TIME
VULCAN_TIMEOUT = 60.0
# Bindings of a gang land one by one: a gang seen partially placed for less than this is just
# its binds landing, not a half-placed gang.
BIND_SLACK = 0.5


@contextlib.asynccontextmanager
async def _cluster(state_dir: Path, with_extender: bool) -> Any:
    from vulcan.sim_up import Cluster

    state_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(_cluster_args(state_dir, with_extender))
    began = time.monotonic()
    # `sim up`'s start-up lines (URLs, kubeconfig, export hints) are for a cluster one keeps
    # using; the demo's reader needs one line, so they go to a file beside the logs.
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            await cluster.start()
        print(
            f"  cluster up in {time.monotonic() - began:.1f}s: {NODES} hollow nodes "
            f"({NODE_PROFILE}), kube-scheduler stand-in"
            + (" calling vulcan's extender" if with_extender else ""),
            flush=True,
        )
        yield cluster
    finally:
        (state_dir / "sim-up.txt").write_text(captured.getvalue())
        await _stop_fully(cluster)


async def _picture(client: Any, path: Path, title: str) -> None:
    """Draw the run as `vulcan timeline` does (pods per node over time) while its cluster is
    still up, and say where. A picture that cannot be drawn is said, and the demo goes on."""
    from vulcan.timeline.command import capture

    try:
        await capture(client, path, namespace=NAMESPACE, title=title)
    except Exception as exc:  # the story does not depend on the picture
        print(f"  timeline: not drawn: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return
    print(f"  timeline: {path.resolve()}", flush=True)


@dataclass
class PlainResult:
    deadlocked: bool = False
    waited: float = 0.0
    why_pending: str = ""
    story: str = ""


async def _plain(state_dir: Path, pictures: Path | None = None) -> PlainResult:
    print("\n1. kube-scheduler alone (the stand-in, no vulcan)", flush=True)
    result = PlainResult()
    async with _cluster(state_dir, with_extender=False) as cluster:
        run = Run(cluster.client)
        await run.submit()
        print(
            f"  submitted PodGroups {' and '.join(JOBS)} (minMember {WORKERS}) and their "
            f"{WORKERS * len(JOBS)} workers, interleaved",
            flush=True,
        )
        deadline = time.monotonic() + PLACE_TIMEOUT
        snap = await run.poll()
        # Wait for the scheduler to hand out every GPU (or to get nowhere, bounded).
        while sum(snap.placed(j) for j in JOBS) < NODES:
            if time.monotonic() > deadline:
                result.story = f"the scheduler did not place {NODES} workers in {PLACE_TIMEOUT:g}s"
                print(f"  {result.story}", flush=True)
                return result
            await asyncio.sleep(POLL)
            snap = await run.poll()
        # Each worker would finish RUN_TIME after its gang runs whole; showing that nothing
        # happens takes several times that.
        quiet_until = time.monotonic() + STALL_WINDOW
        while time.monotonic() < quiet_until:
            await asyncio.sleep(POLL)
            snap = await run.poll()
        result.waited = STALL_WINDOW
        half = all(snap.n(j, "running") == WORKERS // 2 for j in JOBS) and all(
            snap.n(j, "pending") == WORKERS - WORKERS // 2 for j in JOBS
        )
        result.deadlocked = half and not any(snap.n(j, "succeeded") for j in JOBS)
        pending = [p for j in JOBS for p in snap.pods[j] if _state(p) == "pending"]
        result.why_pending = next((m for p in pending if (m := _scheduled_message(p))), "")
        if result.deadlocked:
            result.story = (
                f"deadlock: all {NODES} GPUs taken, each job has {WORKERS // 2} of its {WORKERS} "
                f"workers running and none finished in {STALL_WINDOW:g}s"
            )
        else:
            result.story = f"no deadlock this time: {snap.line()}"
        print(f"  {result.story}", flush=True)
        if result.why_pending:
            print(f"  the pending workers' PodScheduled: {result.why_pending}", flush=True)
        if pictures is not None:
            ending = "deadlocked" if result.deadlocked else "no deadlock"
            title = f"vulcan demo gang, run 1: kube-scheduler alone ({ending})"
            await _picture(cluster.client, pictures / "gang-deadlock.png", title)
    return result


@dataclass
class VulcanResult:
    completed: bool = False
    first: str = ""
    second: str = ""
    bound_at: dict[str, float] = field(default_factory=dict)
    done_at: dict[str, float] = field(default_factory=dict)
    held: dict[str, dict[str, Any]] = field(default_factory=dict)  # job -> PodGroup condition
    held_filter: dict[str, str] = field(default_factory=dict)  # job -> pod's PodScheduled text
    longest_partial: dict[str, float] = field(default_factory=dict)
    story: str = ""


def _reason(condition: dict[str, Any]) -> str:
    if not condition:
        return ""
    return f"{condition.get('reason')}: {condition.get('message')}"


async def _vulcan(state_dir: Path, pictures: Path | None = None) -> VulcanResult:
    print("\n2. kube-scheduler + vulcan's extender (a fresh cluster, same jobs)", flush=True)
    result = VulcanResult()
    async with _cluster(state_dir, with_extender=True) as cluster:
        run = Run(cluster.client)
        await run.submit()
        print(f"  submitted the same PodGroups and {WORKERS * len(JOBS)} workers", flush=True)
        deadline = time.monotonic() + VULCAN_TIMEOUT
        while True:
            snap = await run.poll(groups=True)
            for job, other in (JOBS, JOBS[::-1]):
                # What vulcan says about the gang it holds back while the other one has the GPUs:
                # the PodGroup's Unschedulable condition and the pods' scheduling failure. (Read
                # only then: before both gangs' pods all exist, the condition is about members
                # still missing, which is not the story.)
                if other not in run.bound_at or snap.placed(job):
                    continue
                condition = snap.unschedulable(job)
                if condition is not None:
                    old = result.held.get(job) or {}
                    if _reason(condition) != _reason(old):
                        text = _reason(condition)
                        run.say(f"{job} held at filter; PodGroup Unschedulable: {text}")
                    result.held[job] = condition
                message = next((m for p in snap.pods[job] if (m := _scheduled_message(p))), "")
                if message:
                    result.held_filter[job] = message
            if all(snap.n(j, "succeeded") == WORKERS for j in JOBS):
                result.completed = True
                break
            if snap.n(JOBS[0], "failed") or snap.n(JOBS[1], "failed"):
                result.story = f"a worker failed: {snap.line()}"
                break
            if time.monotonic() > deadline:
                result.story = f"not done after {VULCAN_TIMEOUT:g}s: {snap.line()}"
                break
            await asyncio.sleep(POLL)
        result.bound_at, result.done_at = dict(run.bound_at), dict(run.done_at)
        result.longest_partial = dict(run.longest_partial)
        if result.completed:
            result.first, result.second = sorted(JOBS, key=lambda j: run.done_at[j])
            result.story = f"both jobs completed: all {WORKERS * len(JOBS)} workers Succeeded"
        print(f"  {result.story}", flush=True)
        if pictures is not None:
            ending = "both jobs completed, in turn" if result.completed else "not completed"
            title = f"vulcan demo gang, run 2: kube-scheduler + vulcan's extender ({ending})"
            await _picture(cluster.client, pictures / "gang-vulcan.png", title)
    return result


def _summary(plain: PlainResult, vulcan: VulcanResult) -> list[str]:
    lines = []
    if plain.deadlocked:
        # kube-scheduler's message goes on with the preemption attempt; its first sentence is
        # the point.
        why = plain.why_pending.split(". ")[0].rstrip(".")
        lines.append(
            f"Without vulcan the scheduler placed workers one at a time: each job got "
            f"{WORKERS // 2} of the {NODES} GPUs and would wait forever for the other's, a deadlock"
            + (f" (pending workers: {why})." if why else ".")
        )
    else:
        lines.append(f"Without vulcan: {plain.story}.")
    if not vulcan.completed:
        lines.append(f"With vulcan: {vulcan.story}.")
        return lines
    first, second = vulcan.first, vulcan.second
    lines.append(
        f"With vulcan, {first} was admitted whole: its {WORKERS} workers were bound together "
        f"(at {vulcan.bound_at[first]:.1f}s) and finished at {vulcan.done_at[first]:.1f}s."
    )
    # "At filter" only when the pods' scheduling failure carries the extender's reason.
    where = " at filter" if "gang " in vulcan.held_filter.get(second, "") else ""
    condition = vulcan.held.get(second)
    if condition is not None:
        lines.append(
            f"Meanwhile vulcan held {second}'s pods{where}, none placed; its PodGroup's "
            f"Unschedulable condition said {_reason(condition)}"
        )
    else:
        lines.append(
            f"Meanwhile vulcan held {second}'s pods{where}, none placed"
            + (f" ({vulcan.held_filter[second]})" if second in vulcan.held_filter else "")
            + "; no Unschedulable condition was seen on its PodGroup while it waited."
        )
    after = vulcan.bound_at[second] >= vulcan.done_at[first] - BIND_SLACK
    whole = all(vulcan.longest_partial.get(j, 0.0) < BIND_SLACK for j in JOBS)
    ending = ": one after the other" if after else ", its binds overlapping the first's end"
    lines.append(
        f"When {first}'s GPUs were free, vulcan admitted {second} (bound at "
        f"{vulcan.bound_at[second]:.1f}s, finished at {vulcan.done_at[second]:.1f}s){ending}"
        + (", neither ever half-placed." if whole else ".")
    )
    return lines


async def _gang(timeline_dir: str | None = None) -> int:
    began = time.monotonic()
    print(
        f"vulcan demo: two training jobs ({', '.join(JOBS)}), {WORKERS} workers each, 1 GPU per "
        f"worker, {RUN_TIME:g}s of work; {NODES} nodes with 1 GPU each.\n"
        f"A job makes progress only while all {WORKERS} of its workers run "
        f"(PodGroup minMember {WORKERS}).",
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="vulcan-demo-"))
    ok = keep = False
    try:
        pictures = Path(timeline_dir) if timeline_dir else None
        plain = await _plain(workdir / "plain", pictures)
        vulcan = await _vulcan(workdir / "vulcan", pictures)
        print("\nWhat happened:", flush=True)
        for line in _summary(plain, vulcan):
            print(f"  {line}", flush=True)
        ok = vulcan.completed
        keep = not ok
    except Exception as exc:  # a part did not start, the API failed: say so, exit 1
        print(f"\nerror: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        keep = True
    finally:
        # The clusters' logs are worth keeping only when something went wrong (not on Ctrl-C).
        if keep:
            print(f"logs kept in {workdir}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\ndemo finished in {time.monotonic() - began:.1f}s: "
        f"{'vulcan completed both jobs' if ok else 'FAILED'}",
        flush=True,
    )
    return 0 if ok else 1


def run_gang(timeline_dir: str | None = None) -> int:
    """The gang demo; with `timeline_dir`, each run is drawn there as `vulcan timeline` draws
    (gang-deadlock.png, gang-vulcan.png, each with its .json)."""
    import logging

    from vulcan.logs import setup_logging
    from vulcan.sim_commands import run_async

    # The in-process kubelets log every pod at INFO; the demo prints its own story.
    setup_logging("text", logging.WARNING)
    return int(run_async(_interruptible(_gang(timeline_dir))))
