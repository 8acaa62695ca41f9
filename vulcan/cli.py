"""The `vulcan` command: one front door, a subcommand per part."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

from core.release import release


def _cmd_validate(args: argparse.Namespace) -> int:
    from vulcan.validate import validate_paths

    return validate_paths(args.files)


def _cmd_crds(args: argparse.Namespace) -> int:
    from core.api.crds import all_crds, render, write_crds

    if args.out:
        for path in write_crds(args.out):
            print(path)
        return 0
    sys.stdout.write("---\n".join(render(doc) for doc in all_crds()))
    return 0


def _cmd_sim_apiserver(args: argparse.Namespace) -> int:
    from vulcan.sim_commands import run_apiserver

    return run_apiserver(args)


def _cmd_sim_scheduler(args: argparse.Namespace) -> int:
    from vulcan.sim_commands import run_scheduler

    return run_scheduler(args)


def _cmd_sim_up(args: argparse.Namespace) -> int:
    from vulcan.sim_up import run_up

    return run_up(args)


def _cmd_sim_kubelets(args: argparse.Namespace) -> int:
    from vulcan.sim_kubelets import run_kubelets

    return run_kubelets(args)


def _cmd_extender(args: argparse.Namespace) -> int:
    from extender.main import run
    from vulcan.logs import setup_logging
    from vulcan.sim_commands import run_async

    setup_logging(args.log_format)
    return int(run_async(run(args)) or 0)


def _cmd_controllers(args: argparse.Namespace) -> int:
    from core.controller.selection import SelectionError
    from vulcan.controllers import run
    from vulcan.logs import setup_logging
    from vulcan.sim_commands import run_async

    setup_logging(args.log_format)
    try:
        return int(run_async(run(args)))
    except SelectionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main_of(module: str) -> Callable[[argparse.Namespace], int]:
    """`module.main`, imported only when its command runs: `vulcan --help` and the other
    commands do not pay for matplotlib, cryptography or the explain chain."""

    def run(args: argparse.Namespace) -> int:
        return importlib.import_module(module).main(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vulcan",
        description="Volcano-compatible gang and queue scheduling for the stock kube-scheduler.",
    )
    parser.add_argument("--version", action="version", version=f"vulcan {release()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    validate = sub.add_parser(
        "validate",
        help="check Volcano YAML (Job, CronJob, PodGroup, Queue, Command, JobFlow, JobTemplate)",
        description="Check every object vulcan knows against the models and Volcano's admission "
        "rules. Prints FILE: KIND/NAME: FIELD: reason per problem; exits 1 if any.",
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML file, or - for stdin")
    validate.set_defaults(func=_cmd_validate)

    crds = sub.add_parser("crds", help="print (or write) the CustomResourceDefinitions")
    crds.add_argument("--out", metavar="DIR", help="write one file per CRD into DIR")
    crds.set_defaults(func=_cmd_crds)

    scoring = sub.add_parser(
        "scheduler-scoring",
        help="what vulcan's kube-scheduler profile needs for a conf (prioritize or scoring)",
        description="Say whether the kube-scheduler profile that calls vulcan needs the "
        "extender's prioritize call for this Volcano conf, and why; when the conf's node order "
        "(nodeorder, binpack) is expressible as kube-scheduler's own scoring, print the "
        "profile's plugins and pluginConfig that render it.",
    )
    scoring.add_argument(
        "--config",
        metavar="FILE",
        help="the extender's Volcano scheduler conf (default: vulcan's default conf)",
    )
    scoring.add_argument(
        "--kube-version",
        default="1.36",
        metavar="MAJOR.MINOR",
        help="the kube-scheduler's version (default 1.36): from 1.36 on, BalancedAllocation "
        "scores the change in balance, and nodeorder's balance term is not expressible",
    )
    scoring.set_defaults(func=_main_of("vulcan.scheduler_scoring"))

    extender = sub.add_parser(
        "extender",
        help="the scheduler extender kube-scheduler calls (filter/prioritize/preempt/bind)",
        description="Serve kube-scheduler's HTTP extender protocol on --port: POST /v1/filter, "
        "/v1/prioritize, /v1/preempt, /v1/bind, plus GET /healthz, /readyz, /metrics.",
    )
    from extender.flags import add_extender_flags

    add_extender_flags(extender)
    extender.set_defaults(func=_cmd_extender)

    controllers = sub.add_parser(
        "controllers",
        help="the controllers: Volcano Jobs, CronJobs, JobFlows, JobTemplates, PodGroups, "
        "Queues, Commands",
        description="Run vulcan's controllers under leader election (Lease vulcan-controllers), "
        "as Volcano's controller-manager does. job-controller runs Volcano Jobs (its PodGroup, "
        "pods, services and plugins, policies and retries, state, TTL clean-up) and takes the "
        "bus.volcano.sh Commands aimed at Jobs (suspend, resume, restart, ...); "
        "cronjob-controller makes a Job from a CronJob's jobTemplate on its schedule; "
        "jobflow-controller runs JobFlows (each step a Job made from its JobTemplate, in "
        "dependsOn order); jobtemplate-controller keeps JobTemplates' status (the Jobs made "
        "from them); pg-controller makes PodGroups for pods of --scheduler-name that are in no "
        "group (one per ReplicaSet/StatefulSet/DaemonSet/Job, minMember from the owner's "
        "scheduling.volcano.sh/group-min-member) and annotates the pods; queue-controller "
        "creates the root and default queues, keeps their status and runs the "
        "Open/Closing/Closed state machine driven by the Commands aimed at Queues; "
        "hypernode-controller keeps HyperNodes' status.nodeCount, reports members that select "
        "nothing, and with --hypernode-discovery-config builds HyperNodes from node labels. "
        "--controllers picks which run. GET /healthz, /readyz, /metrics on --port.",
    )
    from vulcan.controllers import add_controllers_flags

    add_controllers_flags(controllers)
    controllers.set_defaults(func=_cmd_controllers)

    webhook_certs = sub.add_parser(
        "webhook-certs",
        help="make (or keep) the webhooks' certificate and put its CA in their configurations",
        description="Without cert-manager: keep the kubernetes.io/tls Secret --secret when its "
        "certificate is for the Service --service and not due for renewal, else write a new CA "
        "and certificate into it; then set every webhook's caBundle in the Mutating- and "
        "ValidatingWebhookConfiguration --webhook-configuration (waiting up to --wait for "
        "them). Idempotent: the Job of manifests/components/self-signed-webhooks runs it.",
    )
    from vulcan.webhook_certs_flags import add_webhook_certs_flags

    add_webhook_certs_flags(webhook_certs)
    webhook_certs.set_defaults(func=_main_of("vulcan.webhook_certs"))

    timeline = sub.add_parser(
        "timeline",
        help="draw what the scheduler did: a Gantt chart of pods per node (or queue) over time",
        description="Read pods, events, PodGroups and nodes from the API server and draw one "
        "bar per pod on its node's row from its bind to its end (or now, while it runs), gangs "
        "(PodGroups) in one colour each, pods that never bound hatched. Writes --output (.png "
        "or .svg) and the bars as drawn to --data-out (default: the picture's name with .json).",
    )
    from vulcan.timeline.command import add_timeline_flags

    add_timeline_flags(timeline)
    timeline.set_defaults(func=_main_of("vulcan.timeline.command"))

    explain = sub.add_parser(
        "explain",
        help="why is it pending? the cause first, then flow -> job -> PodGroup -> queue -> "
        "gang -> nodes",
        description="Explain in plain words why a pod, PodGroup (pg), Volcano Job (vcjob, job) "
        "or JobFlow (jf) is where it is: the first line names the cause, then the chain and "
        "what would unblock it. Reads the API server and, with --extender, the extender's "
        "read-only /debug endpoints. Exits 1 with one line on error.",
    )
    from vulcan.explain_command import add_explain_flags

    add_explain_flags(explain)
    explain.set_defaults(func=_main_of("vulcan.explain_command"))

    demo = sub.add_parser(
        "demo",
        help="show on the embedded cluster what vulcan is for (gang scheduling)",
        description="gang (the default): two 4-worker GPU jobs on 4 GPUs, first with the "
        "kube-scheduler stand-in alone (they deadlock half-placed), then with vulcan's extender "
        "(one runs whole, then the other); exit status 0 when the vulcan run completes both. "
        "job: a Volcano Job (TensorFlow ps/workers) from submission through its PodGroup, gang "
        "placement and completion to its TTL clean-up. "
        "flow: Volcano's JobFlow pipeline (A, B, then C and D in parallel, then E), stage by "
        "stage. "
        "extender: the extender's HTTP verbs called by hand, as kube-scheduler calls them.",
    )
    demo.add_argument(
        "which", nargs="?", choices=("gang", "job", "flow", "extender"), default="gang"
    )
    demo.add_argument(
        "--timeline-dir",
        metavar="DIR",
        help="gang: draw each run as `vulcan timeline` does, into DIR/gang-deadlock.png and "
        "DIR/gang-vulcan.png",
    )
    demo.set_defaults(
        func=lambda args: __import__("vulcan.demo", fromlist=["run"]).run(
            args.which, timeline_dir=args.timeline_dir
        )
    )

    sim = sub.add_parser("sim", help="the embedded cluster (no real Kubernetes needed)")
    sim_sub = sim.add_subparsers(dest="sim_command", metavar="COMMAND")
    apiserver = sim_sub.add_parser(
        "apiserver",
        help="serve the embedded Kubernetes API server until SIGINT/SIGTERM",
        description="An in-memory Kubernetes API server that kubectl, kubernetes-asyncio and a "
        "stock kube-scheduler (JSON mode) accept, with vulcan's CRDs served from start.",
    )
    apiserver.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (0: any)")
    apiserver.add_argument(
        "--kubeconfig-out", metavar="PATH", help="write a kubeconfig for this server to PATH"
    )
    apiserver.add_argument(
        "--crds", metavar="DIR", help="serve the CRDs in DIR (default: manifests/crds)"
    )
    apiserver.add_argument(
        "--watch-history",
        type=int,
        default=10_000,
        help="changes kept per resource for watch resumption (older: 410)",
    )
    apiserver.add_argument(
        "--default-not-ready-toleration-seconds",
        type=int,
        default=300,
        help="tolerationSeconds of the not-ready:NoExecute toleration added to every pod",
    )
    apiserver.add_argument(
        "--default-unreachable-toleration-seconds",
        type=int,
        default=300,
        help="tolerationSeconds of the unreachable:NoExecute toleration added to every pod",
    )
    apiserver.add_argument(
        "--token-auth-file",
        metavar="FILE",
        help="authenticate bearer tokens from FILE (kube-apiserver's format: "
        'token,user,uid,"group1,group2") and authorize requests by RBAC; the kubeconfig written '
        "uses the first system:masters user's token (default: no authentication, all allowed)",
    )
    apiserver.add_argument(
        "--tls-cert-file", metavar="FILE", help="serve HTTPS with this certificate (PEM)"
    )
    apiserver.add_argument("--tls-private-key-file", metavar="FILE", help="its private key (PEM)")
    apiserver.add_argument(
        "--tls-ca-file",
        metavar="FILE",
        help="the CA that signed it, trusted by the kubeconfig written (--kubeconfig-out)",
    )
    apiserver.add_argument(
        "--audit-log-path",
        metavar="FILE",
        help="with --token-auth-file: append every authorization decision to FILE (JSON lines)",
    )
    apiserver.add_argument("--log-format", choices=("text", "json"), default="text")
    apiserver.set_defaults(func=_cmd_sim_apiserver)

    scheduler = sim_sub.add_parser(
        "scheduler",
        help="the kube-scheduler stand-in: schedules pods, calls extenders as kube-scheduler does",
        description="Schedules the pods of the profiles in --config (a kube-scheduler "
        "KubeSchedulerConfiguration, kubescheduler.config.k8s.io/v1) one at a time: in-tree "
        "filters and least-allocated scoring, then the configured extenders' filter, "
        "prioritize, preempt and bind, exactly as kube-scheduler calls them.",
    )
    from core.kube.flags import add_client_flags

    add_client_flags(scheduler)
    scheduler.add_argument(
        "--config",
        metavar="FILE",
        help="KubeSchedulerConfiguration (default: one profile default-scheduler, no extenders)",
    )
    scheduler.add_argument("--seed", type=int, help="seed for tie-breaking (default: random)")
    scheduler.add_argument("--log-format", choices=("text", "json"), default="text")
    scheduler.add_argument(
        "--extender-stats-out",
        metavar="FILE",
        help="on exit, write each extender verb's call latencies as the stand-in saw them "
        "(JSON: verb -> seconds), for benchmarks",
    )
    scheduler.set_defaults(func=_cmd_sim_scheduler)

    up = sim_sub.add_parser(
        "up",
        help="a whole cluster: API server, hollow nodes, kube-scheduler (+ vulcan)",
        description="Start the embedded API server, N hollow kubelets, the kube-scheduler "
        "stand-in and optionally vulcan's extender and controllers; or, with --control-plane "
        "real, a real control plane (etcd, kube-apiserver, kube-controller-manager, "
        "kube-scheduler) with vulcan installed and N hollow nodes. Print the kubeconfig and "
        "how to use kubectl with it; stop everything on Ctrl-C (with --control-plane real, "
        "the temporary state directory is removed too).",
    )
    from vulcan.sim_flags import add_up_flags

    add_up_flags(up)
    up.set_defaults(func=_cmd_sim_up)

    kubelets = sim_sub.add_parser(
        "kubelets",
        help="hollow nodes for any API server (real or embedded) until SIGINT/SIGTERM",
        description="Register N hollow nodes with the API server of --kubeconfig and run the "
        "pods bound to them as `vulcan sim up`'s nodes do (vulcan.sh/sim-duration, "
        "sim-exit-code, gangs). On SIGINT/SIGTERM they stop and their Nodes stay, as a stopped "
        "kubelet's do (--delete-nodes deletes them); started again, they adopt them.",
    )
    from vulcan.sim_kubelets import add_kubelets_flags

    add_kubelets_flags(kubelets)
    kubelets.set_defaults(func=_cmd_sim_kubelets)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
