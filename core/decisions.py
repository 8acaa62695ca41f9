"""Decision log lines: one structured INFO line per decision a user may ask "why?" about (a gang
admitted, its binds released or timed out, a reclaim, a queue or job state change, a give-up).

Every line goes to the `vulcan.decisions` logger with the decision in `msg` and its fields as
structured extras: `--log-format json` writes them as keys, `text` as `key=value` after the
message. A line about a gang names its job (`job`: the vcjob that owns the PodGroup, else the
PodGroup), so `grep 'job=default/train'` follows one job from end to end.
"""

from __future__ import annotations

import logging
from typing import Any

from core.records import PodGroupRecord

log = logging.getLogger("vulcan.decisions")


def job_of(group: PodGroupRecord) -> str:
    """namespace/name of the workload a PodGroup stands for: its owning vcjob (or other
    controller), else the PodGroup itself."""
    if group.owner is not None:
        return f"{group.namespace}/{group.owner.name}"
    return group.key


def decision(what: str, *, level: int = logging.INFO, **fields: Any) -> None:
    """Log one decision: `what` happened, with `fields` (job, queue, reason, ...)."""
    log.log(level, what, extra={"decision": what, **fields})


def gang_decision(what: str, group: PodGroupRecord, **fields: Any) -> None:
    decision(what, job=job_of(group), podgroup=group.key, queue=group.queue, **fields)
