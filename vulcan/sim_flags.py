"""Flags of `vulcan sim up` (no heavy imports: parsed before anything starts)."""

from __future__ import annotations

import argparse

from core.durations import parse_duration


def add_up_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nodes", type=int, help="hollow nodes (with one --node-profile without count=)"
    )
    parser.add_argument(
        "--node-profile",
        action="append",
        metavar="SPEC",
        help="node capacity, e.g. cpu=32,memory=128Gi,nvidia.com/gpu=8; add count=N (and "
        "label.KEY=VALUE items) to give several profiles (repeatable)",
    )
    parser.add_argument(
        "--kubeconfig-out",
        metavar="PATH",
        help="where to write the kubeconfig (default: <state dir>/kubeconfig)",
    )
    parser.add_argument(
        "--scheduler-config",
        metavar="FILE",
        help="KubeSchedulerConfiguration for the kube-scheduler stand-in (default: profiles "
        "default-scheduler and volcano; with --with-extender, vulcan's extender entries)",
    )
    parser.add_argument(
        "--with-extender", action="store_true", help="run vulcan's extender and call it"
    )
    parser.add_argument("--with-controllers", action="store_true", help="run vulcan's controllers")
    parser.add_argument(
        "--workload-controllers",
        default="*",
        metavar="LIST",
        help="kube-controller-manager's workload controllers to run (sim.controllers): "
        "a list of deployment,replicaset,statefulset,daemonset,job; * (all, the default) or none",
    )
    parser.add_argument(
        "--rbac",
        action="store_true",
        help="enforce RBAC: the extender and controllers run with the tokens of the install's "
        "ServiceAccounts and its ClusterRoles (manifests/base); decisions in <state dir>/audit.log",
    )
    parser.add_argument(
        "--install-mode",
        choices=("second-scheduler", "cluster-scheduler"),
        default="second-scheduler",
        help="how vulcan is plugged into the scheduler, as the install's overlays do: "
        "second-scheduler (every pod of the stand-in goes through the extender) or "
        "cluster-scheduler (only pods with vulcan's managedResources markers, which the "
        "controllers add to Volcano Jobs' pods; see manifests/overlays/cluster-scheduler)",
    )
    parser.add_argument("--extender-config", metavar="FILE", help="Volcano scheduler conf")
    parser.add_argument(
        "--scheduler-memo",
        choices=("on", "off", "check"),
        default="on",
        help="the extender's --scheduler-memo: its passes decide again only what changed (on), "
        "everything (off), or both, compared (check) (default on)",
    )
    parser.add_argument(
        "--gang-backoff",
        type=parse_duration,
        default=10.0,
        help="the extender's --gang-backoff: how long a gang that timed out waits (10s)",
    )
    parser.add_argument(
        "--member-reach-timeout",
        type=parse_duration,
        default=30.0,
        help="the extender's --member-reach-timeout: how long an admitted gang's members may "
        "take to reach its filter before the gang loses its admission, and an enqueued "
        "gang's pods to be made before it goes back to Pending (30s)",
    )
    parser.add_argument("--port", type=int, default=0, help="API server port (0: any free)")
    parser.add_argument("--extender-port", type=int, default=0, help="extender port (0: any)")
    parser.add_argument(
        "--webhook-port",
        type=int,
        default=0,
        help="HTTPS port of the extender's admission webhooks (0: any)",
    )
    parser.add_argument(
        "--pod-duration",
        type=duration_or_forever,
        default=10.0,
        help="how long a pod runs without a vulcan.sh/sim-duration annotation "
        "(Go duration; 'forever' = until deleted; default 10s)",
    )
    parser.add_argument(
        "--pod-eviction-timeout",
        type=int,
        default=300,
        help="seconds pods tolerate a NotReady/unreachable node before they are evicted "
        "(kube-apiserver's --default-not-ready-toleration-seconds; default 300)",
    )
    parser.add_argument(
        "--node-monitor-grace-period",
        type=parse_duration,
        default=40.0,
        help="how long a node may miss heartbeats before it is marked unreachable (40s)",
    )
    parser.add_argument("--state-dir", metavar="DIR", help="kubeconfig, config and logs")
    parser.add_argument(
        "--start-timeout", type=float, default=60.0, help="seconds each part may take to start"
    )
    parser.add_argument("--log-format", choices=("text", "json"), default="text")


def duration_or_forever(text: str) -> float | None:
    if text.strip().lower() in ("forever", "inf", "none"):
        return None
    return parse_duration(text)
