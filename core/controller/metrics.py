"""Prometheus metrics of `vulcan controllers`, in a registry of their own (several controller
managers in one test process must not collide).

Volcano's controller-manager names where Volcano has one (the per-queue PodGroup counts,
`volcano_queue_pod_group_<phase>_count{queue_name}`); vulcan's own under `vulcan_controller_`.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# PodGroup phases Volcano counts per queue (the Queue status fields of the same names).
QUEUE_PHASES = ("Inqueue", "Pending", "Running", "Unknown", "Completed")

_SYNC_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.queue_podgroups = {
            phase: Gauge(
                f"volcano_queue_pod_group_{phase.lower()}_count",
                f"PodGroups in phase {phase} per queue.",
                ["queue_name"],
                registry=self.registry,
            )
            for phase in QUEUE_PHASES
        }
        self.syncs = Counter(
            "vulcan_controller_syncs_total",
            "Reconciles by controller and result (success, error: retried, dropped: gave up).",
            ["controller", "result"],
            registry=self.registry,
        )
        self.sync_seconds = Histogram(
            "vulcan_controller_sync_duration_seconds",
            "Time of one reconcile, API calls included.",
            ["controller"],
            buckets=_SYNC_BUCKETS,
            registry=self.registry,
        )
        self.changes = Counter(
            "vulcan_controller_object_changes_total",
            "Objects the controllers wrote, by kind and operation.",
            ["kind", "operation"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "vulcan_controller_workqueue_depth",
            "Keys waiting in a controller's work queue.",
            ["controller"],
            registry=self.registry,
        )
        # Volcano's job controller metrics (pkg/controllers/job/state/metrics.go), under
        # Volcano's exact names: Gauges only increased, as Python's Counter would add _total.
        self.job_completed = Gauge(
            "volcano_job_completed_phase_count",
            "Jobs that reached Completed.",
            ["job_name", "queue_name"],
            registry=self.registry,
        )
        self.job_failed = Gauge(
            "volcano_job_failed_phase_count",
            "Jobs that reached Failed.",
            ["job_name", "queue_name"],
            registry=self.registry,
        )
        # Volcano's JobFlow controller metrics (pkg/controllers/jobflow/state/metrics.go).
        self.jobflow_succeed = Gauge(
            "volcano_jobflow_succeed_phase_count",
            "JobFlows that reached Succeed.",
            ["jobflow_namespace"],
            registry=self.registry,
        )
        self.jobflow_failed = Gauge(
            "volcano_jobflow_failed_phase_count",
            "JobFlows that reached Failed.",
            ["jobflow_namespace"],
            registry=self.registry,
        )
        self.jobflows = Gauge(
            "vulcan_jobflows",
            "JobFlows by status.state.phase, as this controller last wrote or saw it.",
            ["phase"],
            registry=self.registry,
        )
        # Kubernetes' cronjob_controller_job_creation_skew_duration_seconds (its buckets).
        self.cronjob_creation_skew = Histogram(
            "vulcan_cronjob_job_creation_skew_duration_seconds",
            "Time between a CronJob's scheduled time and the creation of its Job.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
            registry=self.registry,
        )
        self.leader = Gauge(
            "vulcan_controller_leader",
            "1 while this instance holds the controllers' Lease (or runs without election).",
            registry=self.registry,
        )

    def set_queue_counts(self, queue: str, counts: dict[str, int]) -> None:
        for phase, gauge in self.queue_podgroups.items():
            gauge.labels(queue).set(counts.get(phase, 0))

    def forget_queue(self, queue: str) -> None:
        for gauge in self.queue_podgroups.values():
            with contextlib.suppress(KeyError):
                gauge.remove(queue)
