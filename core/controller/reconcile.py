"""How the runtime (`runtime.py`) retries a failing reconcile, and the Warning event it records
on the object of a key it gives up on."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from core.decisions import decision
from core.kube.events import WARNING, EventRecorder


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failing reconcile is retried (client-go's controller rate limiter)."""

    max_retries: int = 15  # Volcano's --max-requeue-num (-1: no limit)
    base: float = 0.005  # 5 ms x 2^n ...
    max_delay: float = 1000.0  # ... up to 1000 s


def warn_given_up(
    recorder: EventRecorder, regarding: dict[str, str], what: str, exc: BaseException
) -> None:
    recorder.record(regarding, WARNING, "FailedSync", f"gave up syncing {what}: {exc}")
    namespace, name = regarding.get("namespace"), regarding.get("name", "")
    decision(
        "gave up",
        level=logging.WARNING,
        kind=regarding.get("kind", ""),
        object=f"{namespace}/{name}" if namespace else name,
        about=what,
        error=str(exc),
    )
