"""`vulcan controllers`: every controller package's controllers on the one runtime
(`core.controller`), under one Lease. The packages never import each other; this front door
puts them together."""

from __future__ import annotations

import argparse

from core.controller.flags import add_runtime_flags
from flow_controller.flags import add_job_flags
from podgroup_controller.flags import add_podgroup_flags
from topology_controller.flags import add_hypernode_flags

AVAILABLE = (
    "pg-controller, queue-controller, job-controller, cronjob-controller, jobflow-controller, "
    "jobtemplate-controller and hypernode-controller"
)


def add_controllers_flags(parser: argparse.ArgumentParser) -> None:
    add_runtime_flags(parser, available=AVAILABLE)
    add_podgroup_flags(parser)
    add_job_flags(parser)
    add_hypernode_flags(parser)


async def run(args: argparse.Namespace) -> int:
    from core.controller import manager
    from core.controller.reconcile import RetryPolicy
    from flow_controller import controllers as flow
    from podgroup_controller import controllers as podgroups
    from topology_controller import config as discovery_config
    from topology_controller import controllers as topology

    options = podgroups.options_of(args)
    discovery = None
    if args.hypernode_discovery_config:
        try:
            discovery = discovery_config.load(args.hypernode_discovery_config)
        except discovery_config.DiscoveryConfigError as exc:
            raise SystemExit(f"vulcan controllers: --hypernode-discovery-config {exc}") from None
    available = {
        **podgroups.factories(options),
        **flow.factories_of(args, options.scheduler_names),
        **topology.factories(discovery, RetryPolicy(max_retries=args.max_requeue_num)),
    }
    return await manager.run(
        args, available, describe={"schedulers": list(options.scheduler_names)}
    )
