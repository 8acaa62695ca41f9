"""`vulcan controllers` flags (no heavy imports: parsed before anything starts).

Names follow Volcano's controller-manager (`--controllers`, `--scheduler-name`,
`--worker-threads-for-podgroup`, `--max-requeue-num`, `--inherit-owner-annotations`) and
Kubernetes' component flags (`--kubeconfig`, `--kube-api-qps`, `--leader-elect*`).
"""

from __future__ import annotations

import argparse

from core.kube.flags import add_client_flags, add_leader_election_flags, parse_bool
from podgroup_controller.selection import DEFAULT_SELECTION, SelectionError, parse_selection

LEASE_NAME = "vulcan-controllers"
DEFAULT_PORT = 8081  # Volcano's controller-manager serves its metrics on :8081
# = core.api.keys.DEFAULT_SCHEDULER_NAME, spelled out: importing core.api loads the pydantic
# models (~0.4 s), and every `vulcan` command builds this parser.
DEFAULT_SCHEDULER_NAME = "volcano"


def _selection(text: str) -> str:
    try:
        parse_selection(text)
    except SelectionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def scheduler_names(args: argparse.Namespace) -> tuple[str, ...]:
    """`--scheduler-name` is repeatable and takes comma-separated lists; default `volcano`."""
    names: list[str] = []
    for value in args.scheduler_name or (DEFAULT_SCHEDULER_NAME,):
        for name in value.split(","):
            if name.strip() and name.strip() not in names:
                names.append(name.strip())
    return tuple(names) or (DEFAULT_SCHEDULER_NAME,)


def add_controllers_flags(parser: argparse.ArgumentParser) -> None:
    # Above Volcano's 50/100: each workload pod costs a PodGroup create-or-update and a pod
    # patch, and a 1,000-pod ReplicaSet should be grouped in seconds, not in 40 s.
    add_client_flags(parser, qps=500.0, burst=1000)
    parser.add_argument(
        "--bind-address", default="0.0.0.0", help="address for /healthz, /readyz and /metrics"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port for /healthz, /readyz and /metrics (default {DEFAULT_PORT}; 0: any free "
        "port, announced on the first line of output)",
    )
    parser.add_argument(
        "--controllers",
        type=_selection,
        default=DEFAULT_SELECTION,
        help="controllers to run: * for all (on by default), NAME to enable one, -NAME to "
        "disable one, comma-separated (Volcano's syntax, e.g. '*,-queue-controller'); "
        "this build has pg-controller and queue-controller",
    )
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
        type=_positive,
        default=5,
        help="concurrent PodGroup reconciles (default 5)",
    )
    parser.add_argument(
        "--worker-threads-for-queue",
        type=_positive,
        default=5,
        help="concurrent Queue reconciles (default 5)",
    )
    parser.add_argument(
        "--max-requeue-num",
        type=int,
        default=15,
        help="retries of a failing reconcile (backoff 5ms x 2^n) before it is dropped with a "
        "Warning event (-1: no limit; default 15)",
    )
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    add_leader_election_flags(parser, default_name=LEASE_NAME)
