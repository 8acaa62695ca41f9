"""Flags of `vulcan sim up` (no heavy imports: parsed before anything starts)."""

from __future__ import annotations

import argparse

from core.durations import parse_duration

CONTROL_PLANES = ("embedded", "real")
DEFAULT_START_TIMEOUT = {"embedded": 60.0, "real": 180.0}
# What only the embedded cluster has: with --control-plane real they are refused if set.
EMBEDDED_ONLY = (
    "scheduler_config",
    "workload_controllers",
    "port",
    "extender_port",
    "webhook_port",
)


def add_up_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--control-plane",
        choices=CONTROL_PLANES,
        default="embedded",
        help="embedded (default): vulcan's in-memory API server and the kube-scheduler "
        "stand-in, no binaries needed. real: etcd, kube-apiserver, kube-controller-manager and "
        "kube-scheduler from --kube-assets, with vulcan installed from the --install-mode "
        "overlay (CRDs, RBAC, ConfigMaps applied; the extender and the controllers run as "
        "processes with the install's ServiceAccount tokens; kube-scheduler with the install's "
        "configuration; the admission webhooks registered with a certificate made for them) and "
        "hollow nodes; the extender and controllers always run, under RBAC",
    )
    parser.add_argument(
        "--kube-assets",
        metavar="DIR",
        help="with --control-plane real: the directory of etcd, kube-apiserver, "
        "kube-controller-manager and kube-scheduler, unpacked or as NAME.xz, checked against "
        "its SHA256SUMS when it has one (required for .xz; unpacked once into "
        "~/.cache/vulcan/kube-assets) (default: $KUBEBUILDER_ASSETS, else $VULCAN_KUBE_ASSETS)",
    )
    parser.add_argument(
        "--nodes", type=int, help="hollow nodes (with one --node-profile without count=)"
    )
    parser.add_argument(
        "--node-profile",
        action="append",
        metavar="SPEC",
        help="node capacity, e.g. cpu=32,memory=128Gi,nvidia.com/gpu=8; add count=N (and "
        "label.KEY=VALUE items) to give several profiles; numa=CELLSxCPUS (e.g. 2x16) and "
        "tm-policy=none|best-effort|restricted|single-numa-node give it NUMA cells and a "
        "Numatopology (repeatable)",
    )
    parser.add_argument(
        "--kubeconfig-out",
        metavar="PATH",
        help="where to write the kubeconfig (default: <state dir>/kubeconfig; with "
        "--control-plane real <state dir>/admin.kubeconfig, a system:masters user's token, "
        "kept at PATH when the cluster stops)",
    )
    parser.add_argument(
        "--scheduler-config",
        metavar="FILE",
        help="KubeSchedulerConfiguration for the kube-scheduler stand-in (default: profiles "
        "default-scheduler and volcano; with --with-extender, vulcan's extender entries) "
        "(embedded only)",
    )
    parser.add_argument(
        "--with-extender",
        action="store_true",
        help="run vulcan's extender and call it (always with --control-plane real)",
    )
    parser.add_argument(
        "--with-controllers",
        action="store_true",
        help="run vulcan's controllers (always with --control-plane real)",
    )
    parser.add_argument(
        "--hypernode-discovery-config",
        metavar="FILE",
        help="with --with-controllers: Volcano's controller configuration whose "
        "networkTopologyDiscovery label source builds HyperNodes from node labels (passed to "
        "`vulcan controllers`; embedded only)",
    )
    parser.add_argument(
        "--workload-controllers",
        default="*",
        metavar="LIST",
        help="kube-controller-manager's workload controllers to run (sim.controllers): "
        "a list of deployment,replicaset,statefulset,daemonset,job; * (all, the default) or none "
        "(embedded only: the real kube-controller-manager runs every controller)",
    )
    parser.add_argument(
        "--rbac",
        action="store_true",
        help="enforce RBAC: the extender and controllers run with the tokens of the install's "
        "ServiceAccounts and its ClusterRoles (manifests/base); decisions in <state dir>/audit.log "
        "(always with --control-plane real)",
    )
    parser.add_argument(
        "--install-mode",
        choices=("second-scheduler", "cluster-scheduler"),
        default="second-scheduler",
        help="how vulcan is plugged into the scheduler, as the install's overlays do: "
        "second-scheduler (every pod of the volcano scheduler goes through the extender) or "
        "cluster-scheduler (only pods with vulcan's managedResources markers, which the "
        "controllers add to Volcano Jobs' pods; see manifests/overlays/cluster-scheduler)",
    )
    parser.add_argument(
        "--extender-config",
        metavar="FILE",
        help="Volcano scheduler conf for the extender (default: the extender's own; with "
        "--control-plane real, the install's vulcan-scheduler-conf)",
    )
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
    parser.add_argument(
        "--port", type=int, default=0, help="API server port (0: any free) (embedded only)"
    )
    parser.add_argument(
        "--extender-port", type=int, default=0, help="extender port (0: any) (embedded only)"
    )
    parser.add_argument(
        "--webhook-port",
        type=int,
        default=0,
        help="HTTPS port of the extender's admission webhooks (0: any) (embedded only)",
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
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="kubeconfig, config and logs (default: a temporary directory; with "
        "--control-plane real it is removed when the cluster stops, a --state-dir is kept)",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        help="seconds each part may take to start (default 60; 180 with --control-plane real)",
    )
    parser.add_argument("--log-format", choices=("text", "json"), default="text")


def duration_or_forever(text: str) -> float | None:
    if text.strip().lower() in ("forever", "inf", "none"):
        return None
    return parse_duration(text)


def real_flag_problem(args: argparse.Namespace) -> str | None:
    """Why these flags cannot go together (one line naming the flag), or None. Fills in the
    start timeout's default, which depends on the control plane."""
    if args.start_timeout is None:
        args.start_timeout = DEFAULT_START_TIMEOUT[args.control_plane]
    if args.control_plane == "embedded":
        if args.kube_assets:
            return "--kube-assets: only with --control-plane real"
        return None
    defaults = argparse.ArgumentParser()
    add_up_flags(defaults)
    for dest in EMBEDDED_ONLY:
        if getattr(args, dest) != defaults.get_default(dest):
            flag = "--" + dest.replace("_", "-")
            return f"{flag}: only with --control-plane embedded"
    return None
