"""The controllers of this package, as the runtime (`core.controller`) takes them: each
reconciler wired by `core.controller.runtime.build`, by Volcano's controller name."""

from __future__ import annotations

import argparse

from core.controller.informers import SharedInformers
from core.controller.manager import Controller, ControllerFactory
from core.controller.metrics import ControllerMetrics
from core.controller.runtime import Together, build
from core.controller.selection import PODGROUP, QUEUE
from core.kube.client import KubeClient
from core.kube.events import EventRecorder
from podgroup_controller.flags import scheduler_names
from podgroup_controller.options import ControllerOptions
from podgroup_controller.podgroups import PodGroupReconciler
from podgroup_controller.queue_commands import QueueCommandReconciler
from podgroup_controller.queues import QueueReconciler


def factories(options: ControllerOptions) -> dict[str, ControllerFactory]:
    retries = options.retries

    def podgroup(
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
    ) -> Controller:
        groups = PodGroupReconciler(client, recorder, metrics, options)
        return build(
            groups, informers, recorder, metrics, retries=retries, workers=options.podgroup_workers
        )

    def queue(
        client: KubeClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        metrics: ControllerMetrics,
    ) -> Controller:
        queues = QueueReconciler(client, recorder, metrics)
        wired = build(
            queues, informers, recorder, metrics, retries=retries, workers=options.queue_workers
        )
        commands = QueueCommandReconciler(client, recorder, metrics, queues)
        return Together(
            QUEUE, wired, build(commands, informers, recorder, metrics, retries=retries)
        )

    return {PODGROUP: podgroup, QUEUE: queue}


def options_of(args: argparse.Namespace) -> ControllerOptions:
    return ControllerOptions(
        scheduler_names=scheduler_names(args),
        inherit_owner_annotations=args.inherit_owner_annotations,
        podgroup_workers=args.worker_threads_for_podgroup,
        queue_workers=args.worker_threads_for_queue,
        max_retries=args.max_requeue_num,
    )
