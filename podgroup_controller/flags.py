"""The pg- and queue-controller's own flags of `vulcan controllers` (no heavy imports).

Names follow Volcano's controller-manager (`--scheduler-name`, `--worker-threads-for-podgroup`,
`--inherit-owner-annotations`); the runtime's flags are in `core.controller.flags`.
"""

from __future__ import annotations

import argparse

from core.controller.flags import positive
from core.kube.flags import parse_bool

# = core.api.keys.DEFAULT_SCHEDULER_NAME, spelled out: importing core.api loads the pydantic
# models (~0.4 s), and every `vulcan` command builds this parser.
DEFAULT_SCHEDULER_NAME = "volcano"


def scheduler_names(args: argparse.Namespace) -> tuple[str, ...]:
    """`--scheduler-name` is repeatable and takes comma-separated lists; default `volcano`."""
    names: list[str] = []
    for value in args.scheduler_name or (DEFAULT_SCHEDULER_NAME,):
        for name in value.split(","):
            if name.strip() and name.strip() not in names:
                names.append(name.strip())
    return tuple(names) or (DEFAULT_SCHEDULER_NAME,)


def add_podgroup_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scheduler-name",
        action="append",
        metavar="NAME[,NAME...]",
        help="schedulerName(s) of the pods to make PodGroups for (repeatable; default volcano)",
    )
    parser.add_argument(
        "--inherit-owner-annotations",
        type=parse_bool,
        nargs="?",
        const=True,
        default=True,
        help="PodGroups of workloads take minMember (scheduling.volcano.sh/group-min-member) "
        "and the volcano.sh/* annotations from the pod's owner (default true)",
    )
    parser.add_argument(
        "--worker-threads-for-podgroup",
        type=positive,
        default=5,
        help="concurrent PodGroup reconciles (default 5)",
    )
    parser.add_argument(
        "--worker-threads-for-queue",
        type=positive,
        default=5,
        help="concurrent Queue reconciles (default 5)",
    )
