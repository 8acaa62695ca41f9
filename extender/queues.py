"""Queues in the extender: the status and gauges the last session's queues imply (its inputs
are `plugins.model.queue_inputs`', its share model the conf's queue plugin's)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from core.resources import ResourceVector, format_quantity
from plugins.model.queue_inputs import QueuePass, gated_request, members_request

__all__ = [
    "QueueCollector",
    "QueuePass",
    "gated_request",
    "members_request",
    "queue_status",
]

_ZERO = ResourceVector()


# ------------------------------------------------------------------------------ status


def queue_status(queue_pass: QueuePass, name: str) -> dict[str, Any]:
    """What vulcan writes into a Queue's status: `allocated` (Volcano's scheduler field) and
    the PodGroup counts per phase that vcctl and `kubectl get queue` show."""
    share = queue_pass.model.shares.get(name)
    allocated = share.allocated if share is not None else _ZERO
    counts = queue_pass.phases.get(name, {})
    status: dict[str, Any] = {
        "allocated": {
            n: format_quantity(n, amount) for n, amount in allocated.items() if amount > 0
        },
    }
    for phase, field in (
        ("Pending", "pending"),
        ("Inqueue", "inqueue"),
        ("Running", "running"),
        ("Unknown", "unknown"),
        ("Completed", "completed"),
    ):
        status[field] = counts.get(phase, 0)
    return status


# ----------------------------------------------------------------------------- metrics

_VECTOR_GAUGES = (
    ("allocated", "volcano_queue_allocated", "What the queue's pods hold, and its reservations."),
    ("request", "volcano_queue_request", "What the queue holds plus what its waiting work asks."),
    (
        "deserved",
        "volcano_queue_deserved",
        "The queue's fair share (proportion or capacity plugin).",
    ),
    ("capability", "volcano_queue_capacity", "The queue's spec.capability: a hard limit."),
    ("real_capability", "volcano_queue_real_capacity", "The most the queue may hold now."),
    ("inqueue", "volcano_queue_inqueue", "The minResources of admitted gangs not placed yet."),
    ("guarantee", "vulcan_queue_guarantee", "The queue's spec.guarantee.resource."),
)


def _unit(resource: str) -> str:
    if resource == "cpu":
        return "milli_cpu"
    if resource == "memory":
        return "memory_bytes"
    return "scalar_resources"


class QueueCollector:
    """Prometheus gauges per queue, read from the latest pass at scrape time (nothing is
    updated on the scheduling path). Names follow Volcano's scheduler metrics."""

    def __init__(self, latest: Any) -> None:
        self._latest = latest  # () -> QueuePass | None

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []

    def collect(self) -> Iterable[GaugeMetricFamily]:
        queue_pass: QueuePass | None = self._latest()
        if queue_pass is None:
            return
        shares = queue_pass.model.shares
        for attribute, prefix, doc in _VECTOR_GAUGES:
            families = {
                unit: GaugeMetricFamily(
                    f"{prefix}_{unit}",
                    doc,
                    labels=["queue_name", "resource"]
                    if unit == "scalar_resources"
                    else ["queue_name"],
                )
                for unit in ("milli_cpu", "memory_bytes", "scalar_resources")
            }
            for name, share in shares.items():
                vector = getattr(share, attribute)
                if attribute == "capability" and vector.is_zero():
                    continue  # no capability set: unbounded, nothing to report
                for resource, amount in vector.items():
                    unit = _unit(resource)
                    labels = [name, resource] if unit == "scalar_resources" else [name]
                    families[unit].add_metric(labels, float(amount))
            yield from families.values()
        share_family = GaugeMetricFamily(
            "volcano_queue_share",
            "The queue's share: the largest allocated/deserved over its resources.",
            labels=["queue_name"],
        )
        weight_family = GaugeMetricFamily(
            "volcano_queue_weight", "The queue's spec.weight.", labels=["queue_name"]
        )
        overused_family = GaugeMetricFamily(
            "volcano_queue_overused",
            "1 when the queue holds its deserved share or more (as in Volcano, an idle queue "
            "that deserves nothing counts as overused).",
            labels=["queue_name"],
        )
        groups_family = GaugeMetricFamily(
            "vulcan_queue_podgroups",
            "PodGroups of the queue, by phase.",
            labels=["queue_name", "phase"],
        )
        for name, share in shares.items():
            share_family.add_metric([name], share.share)
            source = queue_pass.inputs.get(name)
            weight_family.add_metric([name], float(source.weight if source else 1))
            overused_family.add_metric([name], 1.0 if queue_pass.model.overused(name) else 0.0)
            counts = queue_pass.phases.get(name, {})
            for phase in ("Pending", "Inqueue", "Running", "Unknown", "Completed"):
                groups_family.add_metric([name, phase], float(counts.get(phase, 0)))
        yield share_family
        yield weight_family
        yield overused_family
        yield groups_family
