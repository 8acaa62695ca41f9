"""Volcano's single-purpose binaries (cmd/cli/{vsub,vjobs,vqueues,vcancel,vsuspend,vresume}),
each its own console script over the vcctl commands.

Their flags are NOT vcctl's: `-n` is the job's *name* and `-N` its *namespace* (the reverse of
`vcctl job`), as in Volcano's pkg/cli/v*. Otherwise:
- `vsub` = `job run` without `-f`, plus `-c/--command` (split like a shell, google/shlex), and
  the defaults of `-S`, `-i`, `-N` read from VOLCANO_SCHEDULER_NAME, VOLCANO_DEFAULT_IMAGE,
  VOLCANO_DEFAULT_JOB_NAMESPACE;
- `vjobs` = `job view` with `-n NAME`, else `job list` (`-S`, `--all-namespaces`, `--selector`);
- `vqueues` = `queue get` with `-n NAME`, else `queue list`. Volcano's vqueues prints an older
  table read from the Queue's deprecated status counters; this prints vcctl's (PodGroups counted),
  which vulcan keeps accurate;
- `vcancel` = `job delete` printing `cancel job X successfully`; `vsuspend`/`vresume` = `job
  suspend`/`job resume`.
"""

from __future__ import annotations

import argparse
import os

from vcctl import job_view, jobs, queues
from vcctl.cli import Parser, add_common, add_job_list_flags, add_job_shape_flags, execute
from vcctl.kube import Session, VcctlError

NAMESPACE_HELP = "the namespace of job (default: the kubeconfig context's namespace, else default)"


def _parser(prog: str, description: str) -> Parser:
    parser = Parser(prog=prog, description=description)
    add_common(parser)
    return parser


def _name_flags(parser: Parser) -> None:
    parser.add_argument("-N", "--namespace", default=None, help=NAMESPACE_HELP)
    parser.add_argument("-n", "--name", default="", help="the name of job")


def vsub_parser() -> Parser:
    parser = _parser(
        "vsub",
        "submit a job with specified name and arguments. yaml/json file is not accepted, "
        "you may refer to kubectl.",
    )
    parser.add_argument(
        "-i",
        "--image",
        default=os.environ.get("VOLCANO_DEFAULT_IMAGE") or "busybox",
        help="the container image of job, overwrite the value of 'VOLCANO_DEFAULT_IMAGE' "
        '(default "busybox")',
    )
    parser.add_argument(
        "-N",
        "--namespace",
        default=os.environ.get("VOLCANO_DEFAULT_JOB_NAMESPACE") or None,
        help="the namespace of job, overwrite the value of 'VOLCANO_DEFAULT_JOB_NAMESPACE' "
        "(default: the kubeconfig context's namespace, else default)",
    )
    parser.add_argument("-n", "--name", default="", help="the name of job")
    add_job_shape_flags(parser)
    parser.add_argument(
        "-S",
        "--scheduler",
        default=os.environ.get("VOLCANO_SCHEDULER_NAME") or "volcano",
        help="the scheduler for this job, overwrite the value of 'VOLCANO_SCHEDULER_NAME' "
        '(default "volcano")',
    )
    parser.add_argument("-c", "--command", default="", help="the command of job")
    parser.set_defaults(handler=jobs.run, check=jobs.check_run, filename="")
    return parser


async def _view_or_list(session: Session, args: argparse.Namespace) -> None:
    if args.name:
        await job_view.view(session, args)
    else:
        await jobs.list_jobs(session, args)


def vjobs_parser() -> Parser:
    parser = _parser(
        "vjobs", "view information of a job with specified name or jobs from the same namespace"
    )
    _name_flags(parser)
    add_job_list_flags(parser)
    parser.set_defaults(handler=_view_or_list, check=None)
    return parser


async def _get_or_list(session: Session, args: argparse.Namespace) -> None:
    if args.name:
        await queues.get(session, args)
    else:
        await queues.list_queues(session, args)


def vqueues_parser() -> Parser:
    parser = _parser(
        "vqueues",
        "view information of a queue with specified name or queues from the same namespace",
    )
    parser.add_argument("-n", "--name", default="", help="the name of queue")
    parser.set_defaults(handler=_get_or_list, check=None)
    return parser


def _job_verb_parser(prog: str, description: str, verb: str, handler: object) -> Parser:
    parser = _parser(prog, description)
    _name_flags(parser)

    def check(args: argparse.Namespace) -> None:
        if not args.name:
            raise VcctlError(f"job name is mandatory to {verb} a particular job")

    parser.set_defaults(handler=handler, check=check, verb=verb)
    return parser


def vsub() -> int:
    return execute(vsub_parser(), None, "vsub")


def vjobs() -> int:
    return execute(vjobs_parser(), None, "vjobs")


def vqueues() -> int:
    return execute(vqueues_parser(), None, "vqueues")


def vcancel() -> int:
    description = (
        "cancel a running, pending, or aborted job with specified name in default or "
        "specified namespace"
    )
    return execute(_job_verb_parser("vcancel", description, "cancel", jobs.delete), None, "vcancel")


def vsuspend() -> int:
    description = (
        "suspend a running or pending job with specified name in default or specified namespace"
    )
    return execute(
        _job_verb_parser("vsuspend", description, "suspend", jobs.suspend), None, "vsuspend"
    )


def vresume() -> int:
    description = "resume an aborted job with specified name in default or specified namespace"
    return execute(_job_verb_parser("vresume", description, "resume", jobs.resume), None, "vresume")
