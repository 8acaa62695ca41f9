"""The controllers of this package, as the runtime (`core.controller`) takes them: factories by
Volcano's controller name."""

from __future__ import annotations

import argparse

from core.controller.manager import ControllerFactory
from core.controller.selection import PODGROUP, QUEUE
from podgroup_controller.flags import scheduler_names
from podgroup_controller.options import ControllerOptions
from podgroup_controller.podgroups import PodGroupController
from podgroup_controller.queues import QueueController


def factories(options: ControllerOptions) -> dict[str, ControllerFactory]:
    return {
        PODGROUP: lambda client, informers, recorder, metrics: PodGroupController(
            client, informers, recorder, metrics, options
        ),
        QUEUE: lambda client, informers, recorder, metrics: QueueController(
            client, informers, recorder, metrics, options
        ),
    }


def options_of(args: argparse.Namespace) -> ControllerOptions:
    return ControllerOptions(
        scheduler_names=scheduler_names(args),
        inherit_owner_annotations=args.inherit_owner_annotations,
        podgroup_workers=args.worker_threads_for_podgroup,
        queue_workers=args.worker_threads_for_queue,
        max_retries=args.max_requeue_num,
    )
