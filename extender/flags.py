"""The extender's command-line flags (no heavy imports: parsed before anything starts)."""

from __future__ import annotations

import argparse
import os

from core.api import keys
from core.durations import parse_duration
from core.kube.flags import add_client_flags, add_leader_election_flags, parse_bool
from extender.webhook_flags import add_webhook_flags


def bind_marker(text: str) -> str:
    """`--bind-marker`: one extended resource in vulcan's domain, or empty for none."""
    name = text.strip()
    group, _, rest = name.partition("/")
    if name and (group != keys.MARKER_RESOURCE_GROUP or not rest or "," in name):
        raise argparse.ArgumentTypeError(
            f"{name!r}: the bind marker is one extended resource in vulcan's domain "
            f"({keys.MARKER_RESOURCE_GROUP}/NAME), as the bind entry's managedResources names it"
        )
    return name


def add_extender_flags(parser: argparse.ArgumentParser) -> None:
    # Volcano's scheduler defaults (2000/2000), not client-go's 50/100: a gang's Bindings and
    # the admission stamps of its members go out in one burst (a 1,000-member gang at 50/s
    # stayed partly bound for 18 s in bench/gang_admission.py).
    add_client_flags(parser, qps=2000.0, burst=2000)
    # Off by default (one extender, as `vulcan sim up` runs it); the install runs two replicas
    # with it on: the gang ledger lives in one process, so only the leader may decide, and the
    # Services reach the leader alone (by its pod's label, or by /readyz without --pod-name).
    add_leader_election_flags(parser, default_name="vulcan-extender", default_leader_elect=False)
    parser.add_argument(
        "--pod-name",
        default=os.environ.get("POD_NAME", ""),
        help="this replica's pod (default $POD_NAME; the install sets it): with --leader-elect "
        "the leader marks itself on its pod with the label vulcan.sh/leader=true (the others "
        "false), which the Services select, and every synced replica is ready; without it only "
        "the leader is ready",
    )
    parser.add_argument(
        "--pod-namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        help="the namespace of --pod-name (default $POD_NAMESPACE)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=8888,
        help="port for /v1/<verb>, /healthz, /readyz and /metrics (urlPrefix: http://HOST:PORT/v1)",
    )
    parser.add_argument("--bind-address", default="0.0.0.0", help="address to listen on")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="Volcano scheduler configuration (actions and tiers of plugins); a changed file "
        "is applied without a restart (--config-reload-period)",
    )
    parser.add_argument(
        "--config-reload-period",
        type=parse_duration,
        default=5.0,
        help="how often the --config file is looked at for a changed conf: applied from the "
        "next scheduling pass when valid, refused (log line, Event on the extender's Lease) "
        "when not (default 5s; 0 disables)",
    )
    parser.add_argument(
        "--scheduler-name",
        action="append",
        metavar="NAME[,NAME...]",
        help="schedulerName(s) the podgroup controller groups pods of (its --scheduler-name; "
        "repeatable; default volcano): such a pod is refused until it names its PodGroup",
    )
    parser.add_argument(
        "--served-scheduler-name",
        action="append",
        metavar="NAME[,NAME...]",
        help="schedulerName(s) of the kube-scheduler profiles that call this extender "
        "(repeatable; default: the --scheduler-name values): reclaim and preempt evict only "
        "their pods, never another scheduler's",
    )
    parser.add_argument(
        "--filter-marker",
        default="",
        metavar="NAME",
        help="the managedResources marker of kube-scheduler's filter extender entry (e.g. "
        "vulcan.sh/managed, the cluster-scheduler install): only pods that carry it reach "
        "vulcan, so only they may be evicted by reclaim and preempt (default none: pods are "
        "told by --served-scheduler-name)",
    )
    parser.add_argument(
        "--scheduler-memo",
        choices=("on", "off", "check"),
        default="on",
        help="the scheduling passes' memo: on (a pass decides again only what a change can "
        "affect), off (every pass decides everything afresh), check (both every pass, compared: "
        "a difference is logged and counted in vulcan_scheduler_memo_divergences_total, and the "
        "pass without the memo applied; for soaks) (default on)",
    )
    parser.add_argument(
        "--gang-timeout",
        type=parse_duration,
        default=60.0,
        help="how long a gang's held binds wait for the rest of the gang (default 60s; per "
        "PodGroup with annotation vulcan.sh/gang-timeout); keep it below the bind entry's "
        "httpTimeout and above podMaxBackoffSeconds (10s) in the KubeSchedulerConfiguration: "
        "members whose binds failed are retried up to that far apart",
    )
    parser.add_argument(
        "--gang-backoff",
        type=parse_duration,
        default=10.0,
        help="how long a gang that timed out waits before it may be admitted again (10s)",
    )
    parser.add_argument(
        "--member-reach-timeout",
        type=parse_duration,
        default=30.0,
        help="how long an admitted gang's members may take to reach the extender's filter: "
        "kube-scheduler refuses a pod before it asks the extender when its own checks fail "
        "(e.g. an unbound PersistentVolumeClaim), and a gang none of whose members comes, "
        "with one turned away so (its PodScheduled condition in kube-scheduler's words, not "
        "vulcan's), loses its admission and its reserved room, with a Warning event, and "
        "backs off from --gang-backoff, doubling; an enqueued gang whose pods are still not "
        "all made after it goes back to Pending the same way (default 30s, 3x kube-scheduler's "
        "podMaxBackoffSeconds; 0: never)",
    )
    parser.add_argument(
        "--stranded-gang-after",
        type=parse_duration,
        default=10.0,
        help="how long past the end of its grace period a member of a gang short of its quorum "
        "may stay terminating (its node lost: no kubelet confirms it gone, and its controller "
        "cannot make it again under the same name) before the gang's surviving members are "
        "evicted, with a GangStranded event, so that it is placed again whole; only members "
        "some controller makes again are evicted (default 10s; 0: never)",
    )
    parser.add_argument(
        "--bind-marker",
        type=bind_marker,
        default="",
        metavar="NAME",
        help="the managedResources marker of kube-scheduler's bind extender entry (e.g. "
        "vulcan.sh/managed-bind): kube-scheduler binds a pod without it itself, past the gang "
        "barrier, so filter refuses such a pod when it is a member of a gang of minMember > 1, "
        "saying why (default none: the bind entry takes every pod)",
    )
    parser.add_argument(
        "--scheduler-bind-timeout",
        type=parse_duration,
        help="kube-scheduler's httpTimeout for the bind extender entry, to warn at start when "
        "it is not longer than --gang-timeout",
    )
    parser.add_argument(
        "--min-pass-interval",
        type=parse_duration,
        default=0.01,
        help="least time between two scheduling passes: the changes heard in between share "
        "one pass (a change after a quiet spell is served at once; default 10ms, 0: a pass "
        "per wake)",
    )
    parser.add_argument(
        "--pass-idle-ratio",
        type=float,
        default=1.0,
        help="after a scheduling pass of d seconds the next waits at least this times d: a "
        "pass holds the extender's event loop, and kube-scheduler's filter calls (on its "
        "serial path) wait for it, so under a backlog the verbs keep at least 1/(1+ratio) of "
        "it (default 1: half; 0: passes back to back)",
    )
    parser.add_argument(
        "--plain-pod-pass-delay",
        type=parse_duration,
        default=0.1,
        help="how long the scheduling pass may wait after a change of a pod in no PodGroup "
        "that frees no room (created, bound): such changes only move queue numbers, and at "
        "hundreds a second a pass each cost more than the rest of the extender (default "
        "100ms; 0: like any change)",
    )
    parser.add_argument(
        "--pipelined-wait",
        type=parse_duration,
        default=0.5,
        help="how long filter waits for vulcan's cache to see a member's reserved room freed "
        "when kube-scheduler already offers that node (its victims terminated); refused "
        "instead, the member would wait out kube-scheduler's backoff. Also how long it waits "
        "for the first pass to judge a gang it is asked about before any pass saw the member "
        "in it (0: never wait; 0.5s)",
    )
    parser.add_argument(
        "--overcommit-factor",
        type=float,
        default=None,
        help="deprecated: the overcommit plugin's overcommit-factor argument in --config "
        "(default 1.2); given, it overrides the conf's",
    )
    # kubelet's flags and defaults: events are best-effort, and a 1,000-member gang records
    # one per member on admission and again on commit; paced, they wait in the recorder's queue
    # instead of competing with the admission stamps and Bindings for the API server.
    parser.add_argument(
        "--event-qps",
        type=float,
        default=50.0,
        help="steady Event writes per second (0: as fast as --kube-api-qps allows; default 50)",
    )
    parser.add_argument(
        "--event-burst",
        type=int,
        default=100,
        help="Event writes allowed in a burst above --event-qps (default 100)",
    )
    # On by default: read-only names and numbers (no specs, no secrets), built only when asked,
    # and the one place a pending gang's holds, backoff and reservations can be seen.
    parser.add_argument(
        "--enable-debug-endpoints",
        type=parse_bool,
        nargs="?",
        const=True,
        default=True,
        help="serve GET /debug/gangs/<namespace>/<name> and /debug/queues, read-only JSON "
        "for `vulcan explain` (default true; =false: 404)",
    )
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    add_webhook_flags(parser)
