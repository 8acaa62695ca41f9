"""Client flags and options, kept free of heavy imports so `vulcan --help` stays fast."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from core.durations import parse_duration
from core.release import release


def user_agent(component: str) -> str:
    """`vulcan-<component>/<version>`: the API server names the field manager of a write that
    names none after the part before the slash (as `kubectl get --show-managed-fields` shows),
    and its audit log and metrics name the client by it."""
    return f"vulcan-{component}/{release()}"


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
    # Requests in flight at once (HTTP/1.1 keep-alive connections; kubernetes-asyncio's 100).
    connections: int = 100
    user_agent: str = "vulcan"


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


def options_from_args(args: Any, component: str = "client") -> ClientOptions:
    """The options the client flags ask for; `component` names vulcan's part to the API
    server (`user_agent`)."""
    return ClientOptions(
        kubeconfig=args.kubeconfig,
        master=args.master,
        context=args.context,
        qps=args.kube_api_qps,
        burst=args.kube_api_burst,
        user_agent=user_agent(component),
    )


def parse_bool(text: str) -> bool:
    """A Go bool flag's value (`true`, `false`, `1`, `0`, ...)."""
    value = text.strip().lower()
    if value in ("true", "1", "yes", "t"):
        return True
    if value in ("false", "0", "no", "f"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}")


def add_leader_election_flags(
    parser: argparse.ArgumentParser,
    *,
    default_name: str = "vulcan",
    default_namespace: str = "vulcan-system",
    default_leader_elect: bool = True,
) -> None:
    """The component-base flags; durations accept Go syntax (`15s`) as Kubernetes does.

    The Lease lives in vulcan's install namespace, `vulcan-system` (where its webhook Service
    is too), not Volcano's `volcano-system`: a cluster moving from Volcano may still run
    Volcano there, and sharing its namespace would mix the two installs' objects."""
    group = parser.add_argument_group("leader election")
    # `--leader-elect` alone means true, `--leader-elect=false` turns it off (Go bool flags).
    group.add_argument(
        "--leader-elect",
        type=parse_bool,
        nargs="?",
        const=True,
        default=default_leader_elect,
        help="run leader election so only one replica acts "
        f"(default {str(default_leader_elect).lower()})",
    )
    group.add_argument(
        "--leader-elect-lease-duration",
        type=parse_duration,
        default=15.0,
        help="how long followers wait after the last renewal before taking over (default 15s)",
    )
    group.add_argument(
        "--leader-elect-renew-deadline",
        type=parse_duration,
        default=10.0,
        help="how long the leader keeps retrying a renewal before it steps down (default 10s)",
    )
    group.add_argument(
        "--leader-elect-retry-period",
        type=parse_duration,
        default=2.0,
        help="the pause between acquire/renew attempts (default 2s)",
    )
    group.add_argument(
        "--leader-elect-resource-name",
        default=default_name,
        help=f"the Lease's name (default {default_name})",
    )
    group.add_argument(
        "--leader-elect-resource-namespace",
        default=default_namespace,
        help=f"the Lease's namespace (default {default_namespace})",
    )
