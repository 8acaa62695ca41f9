"""`vulcan controllers`: every controller package's controllers on the one runtime
(`core.controller`), under one Lease. The packages never import each other; this front door
puts them together."""

from __future__ import annotations

import argparse

from core.controller.flags import add_runtime_flags
from flow_controller.flags import add_job_flags
from podgroup_controller.flags import add_podgroup_flags

AVAILABLE = (
    "pg-controller, queue-controller, job-controller, cronjob-controller, jobflow-controller and "
    "jobtemplate-controller"
)


def add_controllers_flags(parser: argparse.ArgumentParser) -> None:
    add_runtime_flags(parser, available=AVAILABLE)
    add_podgroup_flags(parser)
    add_job_flags(parser)


async def run(args: argparse.Namespace) -> int:
    from core.controller import manager
    from flow_controller import controllers as flow
    from podgroup_controller import controllers as podgroups

    options = podgroups.options_of(args)
    available = {**podgroups.factories(options), **flow.factories_of(args, options.scheduler_names)}
    return await manager.run(
        args, available, describe={"schedulers": list(options.scheduler_names)}
    )
