"""`vulcan demo`: what vulcan is for, shown on the embedded cluster.

`vulcan demo gang` (also plain `vulcan demo`) replays the case Volcano was built for: two
TFJob-like training jobs of 4 workers, 1 GPU each, on 4 nodes with 1 GPU each. First on a cluster
with the kube-scheduler stand-in alone: it places pods one at a time, each job gets 2 GPUs, and
since a job only makes progress while all its workers run, both hang. Then on a fresh cluster
with vulcan's extender: one job is admitted whole and finishes, then the other. Exit status 0
only when the vulcan run completed both jobs.

`vulcan demo extender` is the older walkthrough: the extender's HTTP verbs called by hand, the
way kube-scheduler calls them.

The clusters are `vulcan sim up`'s `Cluster`, run in this process (API server, extender and
scheduler stand-in still as child processes), so the demo stops them itself, also on Ctrl-C.
Every wait polls the API server with a deadline.

The demos live in modules of their own, re-exported here: `vulcan.demo_gang` and
`vulcan.demo_gang_jobs` (gang), `vulcan.demo_job` (job), `vulcan.demo_flow` (flow) and
`vulcan.demo_extender` (extender); this module maps `vulcan demo WHICH` to them.
"""

from __future__ import annotations

from vulcan.demo_cluster import NODE_PROFILE, NODES
from vulcan.demo_extender import run_extender_walkthrough
from vulcan.demo_gang import (
    BIND_SLACK,
    PLACE_TIMEOUT,
    POLL,
    STALL_WINDOW,
    VULCAN_TIMEOUT,
    PlainResult,
    VulcanResult,
    run_gang,
)
from vulcan.demo_gang_jobs import (
    JOB_LABEL,
    JOBS,
    NAMESPACE,
    RUN_TIME,
    STATES,
    WORKERS,
    Run,
    Snapshot,
)

__all__ = [
    "BIND_SLACK",
    "DEMOS",
    "JOBS",
    "JOB_LABEL",
    "NAMESPACE",
    "NODES",
    "NODE_PROFILE",
    "PLACE_TIMEOUT",
    "POLL",
    "RUN_TIME",
    "STALL_WINDOW",
    "STATES",
    "VULCAN_TIMEOUT",
    "WORKERS",
    "PlainResult",
    "Run",
    "Snapshot",
    "VulcanResult",
    "run",
    "run_extender_walkthrough",
    "run_flow",
    "run_gang",
    "run_job",
]


def run_job() -> int:
    from vulcan.demo_job import run_job as job

    return job()


def run_flow() -> int:
    from vulcan.demo_flow import run_flow as flow

    return flow()


DEMOS = {
    "gang": run_gang,
    "job": run_job,
    "flow": run_flow,
    "extender": run_extender_walkthrough,
}


def run(which: str | None = None, timeline_dir: str | None = None) -> int:
    """`vulcan demo WHICH`; `timeline_dir` (--timeline-dir) is the gang demo's: where it draws
    its two runs."""
    if (which or "gang") == "gang":
        return run_gang(timeline_dir)
    return DEMOS[which or "gang"]()
