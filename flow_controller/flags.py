"""The job controller's own flags of `vulcan controllers` (no heavy imports)."""

from __future__ import annotations

import argparse

from core.controller.flags import positive
from core.kube.flags import parse_bool

# = core.api.keys.MARKER_RESOURCE_GROUP, spelled out (no heavy imports here).
MARKER_GROUP = "vulcan.sh"


def marker_names(text: str) -> tuple[str, ...]:
    """`--pod-resource-markers`: comma-separated extended resources in vulcan's domain."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for name in names:
        group, _, rest = name.partition("/")
        if group != MARKER_GROUP or not rest:
            raise argparse.ArgumentTypeError(
                f"{name!r}: a marker is an extended resource in vulcan's domain "
                f"({MARKER_GROUP}/NAME), which vulcan never counts as capacity"
            )
    return names


def bind_marker_name(text: str) -> str:
    """`--bind-marker`: one marker, or empty for none."""
    names = marker_names(text)
    if len(names) > 1:
        raise argparse.ArgumentTypeError(f"{text!r}: one marker, the bind entry's")
    return names[0] if names else ""


def add_job_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--worker-threads",
        type=positive,
        default=3,
        help="concurrent Job reconciles (Volcano's job-controller flag; default 3)",
    )
    parser.add_argument(
        "--pod-resource-markers",
        type=marker_names,
        default=(),
        metavar="NAME[,NAME...]",
        help="extended resources (1 each) added to the limits of every pod a Volcano Job "
        "creates: the managedResources markers by which the cluster's own kube-scheduler "
        "sends pods to vulcan's extender (cluster-scheduler install; e.g. "
        "vulcan.sh/managed,vulcan.sh/managed-bind; default none)",
    )
    parser.add_argument(
        "--bind-marker",
        type=bind_marker_name,
        default="",
        metavar="NAME",
        help="an extended resource (1) added to the limits of the pods of Volcano Jobs that "
        "vulcan schedules (schedulerName one of --scheduler-name): the managedResources marker "
        "of kube-scheduler's bind extender entry in the second-scheduler install, so their "
        "binds come to vulcan's gang barrier (e.g. vulcan.sh/managed-bind; default none)",
    )
    parser.add_argument(
        "--queue-allocation-gate",
        type=parse_bool,
        nargs="?",
        const=True,
        default=True,
        help="create the pods of Volcano Jobs that vulcan schedules (schedulerName one of "
        "--scheduler-name, or every Job pod with --pod-resource-markers) with the scheduling "
        "gate scheduling.volcano.sh/queue-allocation-gate, which vulcan's extender lifts when "
        "the job's gang is admitted: kube-scheduler then never tries the pods of a job that "
        "waits for its queue (default true)",
    )
