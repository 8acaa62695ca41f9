"""The controller runtime's flags (no heavy imports: parsed before anything starts).

Names follow Volcano's controller-manager (`--controllers`, `--max-requeue-num`) and Kubernetes'
component flags (`--kubeconfig`, `--kube-api-qps`, `--leader-elect*`). Each controller package
adds its own (e.g. `--scheduler-name`)."""

from __future__ import annotations

import argparse

from core.controller.selection import DEFAULT_SELECTION, SelectionError, parse_selection
from core.kube.flags import add_client_flags, add_leader_election_flags

LEASE_NAME = "vulcan-controllers"
DEFAULT_PORT = 8081  # Volcano's controller-manager serves its metrics on :8081


def _selection(text: str) -> str:
    try:
        parse_selection(text)
    except SelectionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_runtime_flags(parser: argparse.ArgumentParser, *, available: str) -> None:
    """`available`: the controllers this build has, for `--controllers`' help."""
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
        f"this build has {available}",
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
