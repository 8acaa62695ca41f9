"""Client flags and options, kept free of heavy imports so `vulcan --help` stays fast."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class ClientOptions:
    """How to reach the API server and how hard to push it (Kubernetes' flag names)."""

    kubeconfig: str | None = None
    master: str | None = None
    context: str | None = None
    qps: float = 50.0
    burst: int = 100
    request_timeout: float = 30.0
    max_retries: int = 8
    retry_initial: float = 0.2
    retry_max: float = 10.0


def add_client_flags(parser: Any, *, qps: float = 50.0, burst: int = 100) -> None:
    """`--kubeconfig`, `--master`, `--context`, `--kube-api-qps`, `--kube-api-burst`, as
    Kubernetes components and Volcano name them."""
    parser.add_argument(
        "--kubeconfig",
        help="path to a kubeconfig (default: $KUBECONFIG, "
        "in-cluster service account, ~/.kube/config)",
    )
    parser.add_argument("--master", help="API server URL (overrides the kubeconfig's server)")
    parser.add_argument("--context", help="kubeconfig context to use")
    parser.add_argument(
        "--kube-api-qps",
        type=float,
        default=qps,
        help=f"steady requests per second to the API server (0: unlimited; default {qps:g})",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=int,
        default=burst,
        help=f"requests allowed in a burst above the QPS (default {burst})",
    )


def options_from_args(args: Any) -> ClientOptions:
    return ClientOptions(
        kubeconfig=args.kubeconfig,
        master=args.master,
        context=args.context,
        qps=args.kube_api_qps,
        burst=args.kube_api_burst,
    )
