"""What `vulcan explain` reads: the object asked about and everything its diagnosis needs, from
the API server (conditions, events, Queue status, pods, nodes) and, when one is given, the
extender's read-only debug endpoints. All the I/O of `vulcan explain` is here; the diagnosis
(`explain.diagnose`) is a pure function of the `Collected` this returns.

Everything is listed once (pods, PodGroups and Queues cluster-wide: a queue's share and a
node's free room depend on all of them), so the diagnosis never has to ask again.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from core.kube.client import (
    EVENTS,
    JOBFLOWS,
    JOBTEMPLATES,
    NODES,
    PODGROUPS,
    PODS,
    QUEUES,
    VCJOBS,
    ApiError,
    KubeClient,
    Resource,
)
from explain.focus import Focus, focus_of

# The kinds asked about, by every name a user may type (kubectl's short names too).
KINDS: dict[str, str] = {
    "pod": "pod",
    "pods": "pod",
    "po": "pod",
    "podgroup": "podgroup",
    "podgroups": "podgroup",
    "pg": "podgroup",
    "vcjob": "job",
    "vcjobs": "job",
    "vj": "job",
    "job": "job",
    "jobs": "job",
    "jobflow": "jobflow",
    "jobflows": "jobflow",
    "jf": "jobflow",
}
_RESOURCES: dict[str, Resource] = {
    "pod": PODS,
    "podgroup": PODGROUPS,
    "job": VCJOBS,
    "jobflow": JOBFLOWS,
}
EXTENDER_TIMEOUT = 3.0  # seconds: the explanation must not hang on an unreachable extender


class ExplainError(Exception):
    """The explanation cannot be given (object not found, API server unreachable ...)."""


@dataclass(slots=True)
class Collected:
    """Raw API objects (JSON as the API server returns them) and the extender's views."""

    kind: str  # "pod" | "podgroup" | "job" | "jobflow"
    namespace: str
    name: str
    target: dict[str, Any]
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)  # every namespace
    podgroups: list[dict[str, Any]] = field(default_factory=list)  # every namespace
    queues: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)  # vcjobs of the namespace
    templates: list[dict[str, Any]] = field(default_factory=list)  # JobTemplates (flows)
    events: list[dict[str, Any]] = field(default_factory=list)  # events of the namespace
    extender_url: str | None = None
    extender_gang: dict[str, Any] | None = None  # GET /debug/gangs/<ns>/<name>
    extender_queues: dict[str, Any] | None = None  # GET /debug/queues
    extender_error: str | None = None  # why the extender's views are missing
    now: float = 0.0  # epoch seconds

    @property
    def focus(self) -> Focus:
        return focus_of(self)


def kind_of(text: str) -> str:
    kind = KINDS.get(text.lower())
    if kind is None:
        raise ExplainError(f"unknown kind {text!r}: use pod, pg, vcjob or jf")
    return kind


async def collect(
    client: KubeClient, kind: str, name: str, namespace: str, extender_url: str | None
) -> Collected:
    kind = kind_of(kind)
    resource = _RESOURCES[kind]
    try:
        target = await client.get(resource, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            raise ExplainError(f"{kind} {namespace}/{name} not found") from None
        raise ExplainError(f"reading {kind} {namespace}/{name}: {exc}") from None
    try:
        nodes, pods, podgroups, queues, jobs, events = await asyncio.gather(
            _items(client, NODES),
            _items(client, PODS),
            _items(client, PODGROUPS),
            _items(client, QUEUES),
            _items(client, VCJOBS, namespace),
            _items(client, EVENTS, namespace),
        )
        templates = await _items(client, JOBTEMPLATES, namespace) if kind == "jobflow" else []
    except ApiError as exc:
        raise ExplainError(f"reading the cluster: {exc}") from None
    found = Collected(
        kind,
        namespace,
        name,
        target,
        nodes=nodes,
        pods=pods,
        podgroups=podgroups,
        queues=queues,
        jobs=jobs,
        templates=templates,
        events=events,
        extender_url=extender_url.rstrip("/") if extender_url else None,
        now=time.time(),
    )
    if found.extender_url:
        await _ask_extender(found)
    return found


async def _items(client: KubeClient, resource: Resource, namespace: str | None = None) -> list[Any]:
    try:
        answer = await client.list(resource, namespace)
    except ApiError as exc:
        if exc.not_found:  # a CRD not installed: nothing of that kind
            return []
        raise
    return list((answer or {}).get("items") or [])


async def _ask_extender(found: Collected) -> None:
    """The extender's views of the PodGroup in focus and of the queues. Failing to reach it
    is not an error: the explanation then says it is from the API server alone."""
    base = found.extender_url
    group = found.focus.podgroup_key
    timeout = aiohttp.ClientTimeout(total=EXTENDER_TIMEOUT)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            found.extender_queues = await _get_json(http, f"{base}/debug/queues")
            if group is not None:
                found.extender_gang = await _get_json(http, f"{base}/debug/gangs/{group}")
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        found.extender_error = str(exc) or type(exc).__name__


async def _get_json(http: aiohttp.ClientSession, url: str) -> dict[str, Any] | None:
    async with http.get(url) as response:
        body = await response.read()
        if response.status == 404 and b'"error"' not in body:
            raise ValueError("no /debug endpoints (--enable-debug-endpoints=false?)")
        if response.status != 200:
            return None  # not known to the extender (yet), or no pass yet
        answer = orjson.loads(body)
        return answer if isinstance(answer, dict) else None
