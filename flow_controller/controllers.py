"""The controllers of this package, as the runtime (`core.controller`) takes them: each
reconciler wired by `core.controller.runtime.build`, by Volcano's controller name."""

from __future__ import annotations

import argparse

from core.controller.clock import Clock, RealClock
from core.controller.informers import SharedInformers
from core.controller.manager import Controller, ControllerFactory
from core.controller.metrics import ControllerMetrics
from core.controller.reconcile import RetryPolicy
from core.controller.runtime import Together, build
from core.kube.client import KubeClient
from core.kube.events import EventRecorder
from flow_controller.cronjob.controller import CRONJOB, CronJobReconciler
from flow_controller.job.commands import JobCommandReconciler
from flow_controller.job.controller import JOB, JobReconciler
from flow_controller.job.objects import BindMarker
from flow_controller.jobflow.controller import JOBFLOW, JobFlowReconciler
from flow_controller.jobflow.templates import JOBTEMPLATE, JobTemplateReconciler


def factories(
    retries: RetryPolicy,
    *,
    job_workers: int = 3,
    pod_markers: tuple[str, ...] = (),
    gated_schedulers: frozenset[str] | None = None,
    bind_marker: BindMarker | None = None,
    clock: Clock | None = None,
) -> dict[str, ControllerFactory]:
    def job(
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
    ) -> Controller:
        jobs = JobReconciler(client, recorder, metrics, pod_markers, gated_schedulers, bind_marker)
        wired = build(jobs, informers, recorder, metrics, retries=retries, workers=job_workers)
        commands = JobCommandReconciler(client, recorder, metrics, jobs.events)
        return Together(JOB, wired, build(commands, informers, recorder, metrics, retries=retries))

    def jobflow(
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
    ) -> Controller:
        flows = JobFlowReconciler(client, recorder, metrics)
        # Volcano runs one worker.
        return build(flows, informers, recorder, metrics, retries=retries)

    def jobtemplate(
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
    ) -> Controller:
        templates = JobTemplateReconciler(client, metrics)
        return build(templates, informers, recorder, metrics, retries=retries)

    def cronjob(
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
    ) -> Controller:
        at = clock or RealClock()
        cronjobs = CronJobReconciler(client, recorder, metrics, at)
        return build(cronjobs, informers, recorder, metrics, retries=retries, clock=at)

    return {JOB: job, JOBFLOW: jobflow, JOBTEMPLATE: jobtemplate, CRONJOB: cronjob}


def factories_of(
    args: argparse.Namespace, schedulers: tuple[str, ...] = ()
) -> dict[str, ControllerFactory]:
    """`schedulers`: the schedulerNames vulcan schedules (`--scheduler-name`, the pg-controller's
    flag), whose Job pods `--queue-allocation-gate` gates."""
    return factories(
        RetryPolicy(max_retries=args.max_requeue_num),
        job_workers=args.worker_threads,
        pod_markers=args.pod_resource_markers,
        gated_schedulers=frozenset(schedulers) if args.queue_allocation_gate else None,
        bind_marker=(
            BindMarker(args.bind_marker, frozenset(schedulers)) if args.bind_marker else None
        ),
    )
