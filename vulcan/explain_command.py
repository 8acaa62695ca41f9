"""`vulcan explain KIND NAME`: flags (light imports: `vulcan --help` builds every parser) and
the command, which prints the explanation or one line of error."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from core.kube.flags import add_client_flags, options_from_args

EXTENDER_ENV = "VULCAN_EXTENDER_URL"


def add_explain_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kind", metavar="KIND", help="pod, podgroup (pg), vcjob (job) or jobflow (jf)"
    )
    parser.add_argument("name", metavar="NAME")
    parser.add_argument("-n", "--namespace", default="default", help="(default: default)")
    add_client_flags(parser)
    parser.add_argument(
        "--extender",
        metavar="URL",
        default=os.environ.get(EXTENDER_ENV) or None,
        help="the extender's base URL (e.g. http://127.0.0.1:8888) for what only it knows: "
        "held binds and their timeout, reservations, backoff, the queues' last pass "
        f"(default: ${EXTENDER_ENV}; none: the API server alone)",
    )
    parser.add_argument(
        "--scheduler-conf",
        metavar="FILE",
        default=None,
        help="the Volcano scheduler conf the extender runs (its --config), for the queue "
        "shares when the extender is not asked (default: Volcano's default conf)",
    )


def main(args: argparse.Namespace) -> int:
    from kubernetes_asyncio.config import ConfigException

    from core.kube.client import KubeClient
    from explain import ExplainError, explain
    from plugins.framework.config import ConfigError, load_scheduler_config
    from plugins.framework.registry import build_policy
    from vulcan.sim_commands import run_async

    # A person waits for the answer: fail in seconds, not after a client's long retries.
    options = dataclasses.replace(options_from_args(args), max_retries=2, request_timeout=15.0)

    try:
        conf = getattr(args, "scheduler_conf", None)
        session = build_policy(load_scheduler_config(conf)) if conf else None
    except ConfigError as exc:
        print(f"vulcan explain: error: {exc}", file=sys.stderr)
        return 1

    async def answer() -> str:
        try:
            client = await KubeClient.connect(options)
        except ValueError as exc:  # no kubeconfig, no in-cluster service account
            raise ExplainError(str(exc)) from None
        async with client:
            return await explain(
                args.kind, args.name, args.namespace, client, args.extender, session
            )

    try:
        text = run_async(answer())
    except (ExplainError, ConfigException, OSError) as exc:
        print(f"vulcan explain: error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0
