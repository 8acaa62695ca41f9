"""The `vcctl` command line: Volcano's command tree, flags and defaults (cmd/cli/*.go,
pkg/cli/**), run against the API server only.

Every leaf command takes `-s/--master` and `-k/--kubeconfig` (per command, as Volcano's cobra
flags are). Success prints what Volcano prints; any failure prints one line,
`vcctl: <reason>`, on stderr and exits 1 (usage errors exit 2, also in one line). Volcano
prints `Failed to <command>: <err>` on stdout and exits 255; a script testing `$? -ne 0` sees
the same, and the reason on stderr keeps stdout parseable.

`vcctl job explain` (vulcan's, not Volcano's) is `vulcan explain vcjob` (vcctl/job_explain.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import platform
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, NoReturn

from core.release import release
from vcctl import flows, job_explain, job_view, jobs, pods, queues
from vcctl.kube import Session, Target, VcctlError, connect, one_line

Handler = Callable[[Session, argparse.Namespace], Awaitable[None]]
Check = Callable[[argparse.Namespace], None]
NAMESPACE_HELP = "the namespace of {} (default: the kubeconfig context's namespace, else default)"


class UsageError(Exception):
    """A command line argparse refused."""


class DefaultsFormatter(argparse.HelpFormatter):
    """Help with `(default "x")` after flags that have a value by default, as cobra shows."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default not in (None, "", False, argparse.SUPPRESS) and action.option_strings:
            shown = f'"{default}"' if isinstance(default, str) else str(default)
            text += f" (default {shown})"
        return text.replace("%", "%%")


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def add_common(parser: argparse.ArgumentParser) -> None:
    """util.InitFlags: the two flags of every vcctl command."""
    parser.add_argument("-s", "--master", default="", help="the address of apiserver")
    parser.add_argument(
        "-k", "--kubeconfig", default="", help="(optional) absolute path to the kubeconfig file"
    )


def leaf(
    group: Any, name: str, help_text: str, handler: Handler, check: Check | None = None
) -> argparse.ArgumentParser:
    parser = group.add_parser(name, help=help_text, description=help_text)
    add_common(parser)
    parser.set_defaults(handler=handler, check=check)
    return parser


def branch(group: Any, name: str, help_text: str) -> Any:
    parser = group.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(usage_of=parser)
    return parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)


def add_namespace(parser: argparse.ArgumentParser, what: str, short: str = "-n") -> None:
    parser.add_argument(short, "--namespace", default=None, help=NAMESPACE_HELP.format(what))


def add_job_commands(root: Any) -> None:
    group = branch(root, "job", "vcctl command line operation job")
    run = leaf(
        group, "run", "run job by parameters from the command line", jobs.run, jobs.check_run
    )
    add_job_run_flags(run, name_short="-N", namespace_short="-n")
    run.add_argument("-f", "--filename", default="", help="the yaml file of job")

    listing = leaf(group, "list", "list job information", jobs.list_jobs)
    listing.add_argument("-q", "--queue", default="", help="list job with specified queue name")
    add_namespace(listing, "job")
    add_job_list_flags(listing)

    view = leaf(group, "view", "show job information", job_view.view, job_view.check_view)
    for verb, handler, short in (
        ("suspend", jobs.suspend, "abort a job"),
        ("resume", jobs.resume, "resume a job"),
        ("delete", jobs.delete, "delete a job"),
    ):
        parser = leaf(group, verb, short, handler, jobs.name_check(verb))
        add_job_name_flags(parser, name_short="-N", namespace_short="-n")
    add_job_name_flags(view, name_short="-N", namespace_short="-n")

    explain = leaf(
        group,
        "explain",
        "say why a job is where it is (vulcan's; the first line names the cause)",
        job_explain.explain_job,
        jobs.name_check("explain"),
    )
    add_job_name_flags(explain, name_short="-N", namespace_short="-n")
    explain.add_argument(
        "--extender",
        default="",
        help="vulcan extender URL, to read its debug endpoints (default: $VULCAN_EXTENDER_URL)",
    )


def add_job_run_flags(
    parser: argparse.ArgumentParser, *, name_short: str, namespace_short: str
) -> None:
    parser.add_argument("-i", "--image", default="busybox", help="the container image of job")
    add_namespace(parser, "job", namespace_short)
    parser.add_argument(name_short, "--name", default="", help="the name of job")
    add_job_shape_flags(parser)
    parser.add_argument("-S", "--scheduler", default="volcano", help="the scheduler for this job")


def add_job_shape_flags(parser: argparse.ArgumentParser) -> None:
    """The job's size and resources, the same in `vcctl job run` and `vsub`."""
    parser.add_argument(
        "-m", "--min", type=int, default=1, help="the minimal available tasks of job"
    )
    parser.add_argument("-r", "--replicas", type=int, default=1, help="the total tasks of job")
    parser.add_argument(
        "-R",
        "--requests",
        default="cpu=1000m,memory=100Mi",
        help="the resource request of the task",
    )
    parser.add_argument(
        "-L", "--limits", default="cpu=1000m,memory=100Mi", help="the resource limit of the task"
    )


def add_job_list_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-S", "--scheduler", default="", help="list job with specified scheduler name"
    )
    parser.add_argument("--all-namespaces", action="store_true", help="list jobs in all namespaces")
    parser.add_argument("--selector", default="", help="fuzzy matching jobName")


def add_job_name_flags(
    parser: argparse.ArgumentParser, *, name_short: str, namespace_short: str
) -> None:
    add_namespace(parser, "job", namespace_short)
    parser.add_argument(name_short, "--name", default="", help="the name of job")


def add_queue_commands(root: Any) -> None:
    group = branch(root, "queue", "Queue Operations")
    create = leaf(group, "create", "creates queue", queues.create, queues.check_create)
    create.add_argument("-n", "--name", default="test", help="the name of queue")
    create.add_argument("-w", "--weight", type=int, default=1, help="the weight of the queue")
    create.add_argument("-S", "--state", default="Open", help="the state of queue")
    delete = leaf(group, "delete", "delete queue", queues.delete, queues.check_named)
    delete.add_argument("-n", "--name", default="", help="the name of queue")
    operate = leaf(group, "operate", "operate queue", queues.operate, queues.check_operate)
    operate.add_argument("-n", "--name", default="", help="the name of queue")
    operate.add_argument("-w", "--weight", type=int, default=0, help="the weight of the queue")
    operate.add_argument(
        "-a",
        "--action",
        default="",
        help="operate action to queue, valid actions are open, close, update",
    )
    leaf(group, "list", "lists all the queue", queues.list_queues)
    get = leaf(group, "get", "get a queue", queues.get, queues.check_get)
    get.add_argument("-n", "--name", default="", help="the name of queue")


def add_flow_commands(root: Any, name: str, kind: flows.FlowKind) -> None:
    noun = kind.noun
    group = branch(root, name, f"vcctl command line operation {name}")
    create = leaf(
        group, "create", f"create a {name}", partial(flows.create, kind=kind), flows.check_file
    )
    create.add_argument(
        "-f",
        "--file",
        "--filename",
        dest="file",
        default="",
        help=f"the path to the YAML file containing the {noun}",
    )
    delete = leaf(
        group,
        "delete",
        f"delete a {name}",
        partial(flows.delete, kind=kind),
        flows.check_delete(kind),
    )
    delete.add_argument("-N", "--name", default="", help=f"the name of {noun}")
    add_namespace(delete, noun)
    delete.add_argument(
        "-f",
        "--file",
        "--filename",
        dest="file",
        default="",
        help=f"the path to the YAML file containing the {noun}",
    )
    listing = leaf(group, "list", f"list {name}s", partial(flows.list_objects, kind=kind))
    add_namespace(listing, noun)
    if kind.with_phase:  # Volcano lists JobTemplates of one namespace only
        listing.add_argument(
            "--all-namespaces", action="store_true", help=f"list {name}s in all namespaces"
        )
    get = leaf(group, "get", f"get a {name}", partial(flows.get, kind=kind), flows.check_get(kind))
    get.add_argument("-N", "--name", default="", help=f"the name of {noun}")
    add_namespace(get, noun)
    describe = leaf(
        group,
        "describe",
        f"describe a {name}",
        partial(flows.describe, kind=kind),
        flows.check_describe,
    )
    describe.add_argument("-N", "--name", default="", help=f"the name of {noun}")
    add_namespace(describe, noun)
    describe.add_argument("-o", "--format", default="yaml", help="the format of output")


def add_pod_commands(root: Any) -> None:
    group = branch(root, "pod", "vcctl command line operation pod")
    listing = leaf(group, "list", "list pod information created by vcjob", pods.list_pods)
    listing.add_argument("-q", "--queue", default="", help="list pod with specified queue name")
    listing.add_argument("-j", "--job", default="", help="list pod with specified job name")
    add_namespace(listing, "pod")
    listing.add_argument(
        "--all-namespaces", action="store_true", help="list pods in all namespaces"
    )


def version_lines() -> list[str]:
    """Volcano's version.Info, with Python where Go's runtime is named."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return [
        "API Version: v1alpha1",
        f"Version: {release()}",
        "Git SHA: Not provided.",
        "Built At: Not provided.",
        f"Python Version: {platform.python_version()}",
        f"Python OS/Arch: {sys.platform}/{arch}",
    ]


def build_parser() -> Parser:
    parser = Parser(prog="vcctl", description="vcctl: Volcano's command line, for vulcan")
    parser.set_defaults(usage_of=parser)
    root = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)
    add_job_commands(root)
    add_queue_commands(root)
    add_flow_commands(root, "jobtemplate", flows.JOBTEMPLATE)
    add_flow_commands(root, "jobflow", flows.JOBFLOW)
    add_pod_commands(root)
    # `version` needs no API server: it runs before any client is made.
    root.add_parser("version", help="Print the version information").set_defaults(
        offline=version_lines
    )
    return parser


async def _run(args: argparse.Namespace, handler: Handler) -> None:
    target = Target(master=args.master or None, kubeconfig=args.kubeconfig or None)
    client = await connect(target)
    try:
        await handler(Session(client, target, sys.stdout), args)
    finally:
        await client.close()


def execute(parser: argparse.ArgumentParser, argv: list[str] | None, prog: str) -> int:
    """Parse, check, run; every failure becomes one line on stderr."""
    # Libraries' warnings (kubernetes-asyncio logs a missing kubeconfig) would otherwise reach
    # stderr through logging's last-resort handler, beside the one line that says it all.
    logging.getLogger().addHandler(logging.NullHandler())
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(one_line(str(exc)), file=sys.stderr)
        return 2
    if getattr(args, "offline", None) is not None:
        print("\n".join(args.offline()))
        return 0
    handler = getattr(args, "handler", None)
    if handler is None:
        args.usage_of.print_help()
        return 0
    try:
        if args.check is not None:
            args.check(args)
        asyncio.run(_run(args, handler))
        sys.stdout.flush()
    except VcctlError as exc:
        print(f"{prog}: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # never a traceback: the reason, on one line
        print(f"{prog}: {type(exc).__name__}: {one_line(str(exc))}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return execute(build_parser(), argv, "vcctl")


if __name__ == "__main__":
    sys.exit(main())
