"""What every controller here shares: its options, and a work-queue loop that times and counts
reconciles and turns a key given up on into a Warning event on the object."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from core.kube.events import WARNING, EventRecorder
from core.kube.workqueue import WorkQueue
from podgroup_controller.metrics import ControllerMetrics

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    scheduler_names: tuple[str, ...] = ("volcano",)
    inherit_owner_annotations: bool = True
    podgroup_workers: int = 5
    queue_workers: int = 5
    max_retries: int = 15  # Volcano's --max-requeue-num
    retry_base: float = 0.005  # client-go's controller rate limiter: 5 ms x 2^n ...
    retry_max: float = 1000.0  # ... up to 1000 s


async def run_reconciler(
    queue: WorkQueue[K],
    controller: str,
    workers: int,
    handler: Callable[[K], Awaitable[Any]],
    metrics: ControllerMetrics,
    options: ControllerOptions,
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
    await queue.run_workers(workers, timed, max_retries=options.max_retries, on_give_up=give_up)


def warn_given_up(
    recorder: EventRecorder, regarding: dict[str, str], what: str, exc: BaseException
) -> None:
    recorder.record(regarding, WARNING, "FailedSync", f"gave up syncing {what}: {exc}")
