"""What the pg- and queue-controller are configured with (`vulcan controllers` flags)."""

from __future__ import annotations

from dataclasses import dataclass

from core.controller.reconcile import RetryPolicy


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    scheduler_names: tuple[str, ...] = ("volcano",)
    inherit_owner_annotations: bool = True
    podgroup_workers: int = 5
    queue_workers: int = 5
    max_retries: int = 15  # Volcano's --max-requeue-num
    retry_base: float = 0.005  # client-go's controller rate limiter: 5 ms x 2^n ...
    retry_max: float = 1000.0  # ... up to 1000 s

    @property
    def retries(self) -> RetryPolicy:
        return RetryPolicy(self.max_retries, self.retry_base, self.retry_max)
