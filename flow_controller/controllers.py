"""The controllers of this package, as the runtime (`core.controller`) takes them."""

from __future__ import annotations

import argparse

from core.controller.clock import Clock
from core.controller.manager import ControllerFactory
from core.controller.reconcile import RetryPolicy
from flow_controller.cronjob.controller import CRONJOB, CronJobController
from flow_controller.job.controller import JOB, JobController
from flow_controller.jobflow.controller import JOBFLOW, JobFlowController
from flow_controller.jobflow.templates import JOBTEMPLATE, JobTemplateController


def factories(
    retries: RetryPolicy,
    *,
    job_workers: int = 3,
    pod_markers: tuple[str, ...] = (),
    clock: Clock | None = None,
) -> dict[str, ControllerFactory]:
    return {
        JOB: lambda client, informers, recorder, metrics: JobController(
            client,
            informers,
            recorder,
            metrics,
            retries,
            workers=job_workers,
            pod_markers=pod_markers,
        ),
        JOBFLOW: lambda client, informers, recorder, metrics: JobFlowController(
            client, informers, recorder, metrics, retries
        ),
        JOBTEMPLATE: lambda client, informers, recorder, metrics: JobTemplateController(
            client, informers, recorder, metrics, retries
        ),
        CRONJOB: lambda client, informers, recorder, metrics: CronJobController(
            client, informers, recorder, metrics, retries, clock
        ),
    }


def factories_of(args: argparse.Namespace) -> dict[str, ControllerFactory]:
    return factories(
        RetryPolicy(max_retries=args.max_requeue_num),
        job_workers=args.worker_threads,
        pod_markers=args.pod_resource_markers,
    )
