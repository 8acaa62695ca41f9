"""`vcctl job explain -N NAME [-n NAMESPACE] [--extender URL]`: vulcan's answer to "why is my job
still pending?" (not in Volcano's vcctl), the same screen as `vulcan explain vcjob NAME`: its
first line names the cause. The extender's debug endpoints are read when `--extender` or
`$VULCAN_EXTENDER_URL` names it; otherwise only the API server."""

from __future__ import annotations

import argparse
import os

from vcctl.kube import Session, VcctlError


async def explain_job(session: Session, args: argparse.Namespace) -> None:
    # Imported here: the diagnosis pulls in the scheduling formulas (`plugins`), which no
    # other vcctl command needs at start. `explain` is the package vcctl and vulcan share.
    from explain import ExplainError, explain

    namespace = session.namespace(args.namespace)
    extender = args.extender or os.environ.get("VULCAN_EXTENDER_URL") or None
    try:
        text = await explain("vcjob", args.name, namespace, session.client, extender)
    except ExplainError as exc:
        raise VcctlError(str(exc)) from None
    session.print(text.rstrip("\n"))
