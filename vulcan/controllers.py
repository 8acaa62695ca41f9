"""`vulcan controllers`: every controller package's controllers on the one runtime
(`core.controller`), under one Lease. The packages never import each other; this front door
puts them together."""

from __future__ import annotations

import argparse

from core.controller.flags import add_runtime_flags
from podgroup_controller.flags import add_podgroup_flags

AVAILABLE = "pg-controller and queue-controller"


def add_controllers_flags(parser: argparse.ArgumentParser) -> None:
    add_runtime_flags(parser, available=AVAILABLE)
    add_podgroup_flags(parser)


async def run(args: argparse.Namespace) -> int:
    from core.controller import manager
    from podgroup_controller.controllers import factories, options_of

    options = options_of(args)
    return await manager.run(
        args, factories(options), describe={"schedulers": list(options.scheduler_names)}
    )
