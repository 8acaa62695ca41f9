"""`vulcan explain`: why is my job (pod, PodGroup, JobFlow) still pending?

    text = await explain("vcjob", "tf-b", "default", client, "http://extender:8888")

reads the object and what its diagnosis needs from the API server (`collect`, all the I/O)
and, when `extender_url` is given, the extender's read-only debug endpoints; `diagnose` turns
that into an `Explanation` (pure), rendered as one screen whose first line names the cause.
A package of its own, between `plugins` (whose formulas it reuses) and the two commands that
show it: `vulcan explain` (`vulcan/explain_command.py`) and `vcctl job explain`; it imports
`core` and `plugins` only.
"""

from __future__ import annotations

from core.kube.client import KubeClient
from explain.collect import KINDS, Collected, ExplainError, collect
from explain.diagnose import Explanation, diagnose, render
from plugins.framework.policy import Policy

__all__ = [
    "KINDS",
    "Collected",
    "ExplainError",
    "Explanation",
    "collect",
    "diagnose",
    "explain",
    "explanation",
    "render",
]


async def explanation(
    kind: str,
    name: str,
    namespace: str,
    client: KubeClient,
    extender_url: str | None = None,
    session: Policy | None = None,
) -> Explanation:
    """The structured explanation (its `cause` is a stable key). Raises ExplainError.
    `session`: the scheduler conf's (`plugins.framework.registry.build_policy`; Volcano's default
    conf when None)."""
    return diagnose(await collect(client, kind, name, namespace, extender_url), session)


async def explain(
    kind: str,
    name: str,
    namespace: str,
    client: KubeClient,
    extender_url: str | None = None,
    session: Policy | None = None,
) -> str:
    """The explanation as text (first line: the cause). Raises ExplainError."""
    return render(await explanation(kind, name, namespace, client, extender_url, session))
