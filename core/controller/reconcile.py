"""The reconcile loop every controller runs: workers over a keyed work queue (one key never
reconciled twice at once), each reconcile timed and counted, failures retried with per-key
exponential backoff, and a key given up on turned into a Warning event on its object."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from core.controller.metrics import ControllerMetrics
from core.decisions import decision
from core.kube.events import WARNING, EventRecorder
from core.kube.workqueue import WorkQueue

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failing reconcile is retried (client-go's controller rate limiter)."""

    max_retries: int = 15  # Volcano's --max-requeue-num (-1: no limit)
    base: float = 0.005  # 5 ms x 2^n ...
    max_delay: float = 1000.0  # ... up to 1000 s


async def run_reconciler(
    queue: WorkQueue[K],
    controller: str,
    workers: int,
    handler: Callable[[K], Awaitable[Any]],
    metrics: ControllerMetrics,
    retries: RetryPolicy,
    on_give_up: Callable[[K, BaseException], Any],
) -> None:
    """Run `workers` workers over `queue` until cancelled: failures are retried with
    per-key exponential backoff, then given up (`on_give_up`)."""
    syncs = metrics.syncs
    seconds = metrics.sync_seconds.labels(controller)

    async def timed(key: K) -> None:
        start = time.perf_counter()
        try:
            await handler(key)
        except Exception:
            syncs.labels(controller, "error").inc()
            raise
        else:
            syncs.labels(controller, "success").inc()
        finally:
            seconds.observe(time.perf_counter() - start)

    def give_up(key: K, exc: BaseException) -> None:
        syncs.labels(controller, "dropped").inc()
        on_give_up(key, exc)

    metrics.queue_depth.labels(controller).set_function(lambda: len(queue))
    await queue.run_workers(workers, timed, max_retries=retries.max_retries, on_give_up=give_up)


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
