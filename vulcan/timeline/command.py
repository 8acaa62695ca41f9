"""`vulcan timeline`: read pods, events (events.k8s.io/v1), PodGroups and nodes from the API
server, make the timeline (`vulcan.timeline.data`), draw it (`vulcan.timeline.render`) and write
the drawn data as JSON next to the picture. `capture` is the same for a caller that already has a
client (`vulcan demo gang` draws each of its runs with it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.kube.client import KubeClient, Resource

PAGE = 500
# A command someone waits for: an API server that does not answer is reported within seconds.
RETRIES = 3


def add_timeline_flags(parser: argparse.ArgumentParser) -> None:
    from core.kube.flags import add_client_flags

    add_client_flags(parser)
    parser.add_argument(
        "--output",
        "-o",
        required=True,
        metavar="FILE",
        help="the picture to write: FILE.png or FILE.svg",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", default="default", help="the pods' namespace (default: default)"
    )
    scope.add_argument(
        "--all-namespaces", "-A", action="store_true", help="pods of every namespace"
    )
    parser.add_argument(
        "--lanes",
        choices=("nodes", "queues"),
        default="nodes",
        help="a row per node (default), or per queue (the pods' PodGroups' spec.queue)",
    )
    parser.add_argument(
        "--data-out",
        metavar="PATH",
        help="where to write the bars as drawn, as JSON (default: FILE with .json)",
    )
    parser.add_argument("--title", default="", help="the chart's title")


async def _list_all(
    client: KubeClient, resource: Resource, namespace: str | None, *, optional: bool = False
) -> list[dict[str, Any]]:
    """Every object (page by page); with `optional`, none when the API refuses or lacks the kind
    (a cluster without vulcan's CRDs; a user who may not list nodes)."""
    from core.kube.client import ApiError

    items: list[dict[str, Any]] = []
    token = ""
    while True:
        try:
            page = await client.list(resource, namespace, limit=PAGE, **{"continue": token or None})
        except ApiError as exc:
            if optional and exc.status in (403, 404):
                return []
            raise
        items += page.get("items") or ()
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


async def collect(client: KubeClient, namespace: str | None) -> dict[str, list[dict[str, Any]]]:
    """What a timeline is made of, as the API holds it (`namespace` None: every namespace)."""
    from core.kube.client import EVENTS, HYPERNODES, NODES, PODGROUPS, PODS

    pods, events, podgroups, nodes, hypernodes = await asyncio.gather(
        _list_all(client, PODS, namespace),
        _list_all(client, EVENTS, namespace, optional=True),
        _list_all(client, PODGROUPS, namespace, optional=True),
        _list_all(client, NODES, None, optional=True),
        _list_all(client, HYPERNODES, None, optional=True),
    )
    return {
        "pods": pods,
        "events": events,
        "podgroups": podgroups,
        "nodes": nodes,
        "hypernodes": hypernodes,
    }


def draw(
    objects: dict[str, list[dict[str, Any]]],
    output: Path,
    *,
    now: datetime,
    lanes_by: str = "nodes",
    title: str = "",
    data_out: Path | None = None,
) -> dict[str, Any]:
    """Make the timeline of `objects` as of `now`, draw it into `output` and write its data
    (default: `output` with .json); returns the data. A run whose picture with a row per pod
    would be taller than a screen is drawn with a row per gang instead."""
    from vulcan.timeline.data import build_timeline
    from vulcan.timeline.render import height_px, render
    from vulcan.timeline.render_folded import SCREEN_PX, render_folded

    timeline = build_timeline(
        objects["pods"],
        objects["events"],
        objects["podgroups"],
        objects["nodes"],
        now=now,
        lanes_by=lanes_by,
        hypernodes=objects.get("hypernodes") or (),
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    fits = height_px(timeline) <= SCREEN_PX
    data = (render if fits else render_folded)(timeline, output, title=title)
    target = data_out or output.with_suffix(".json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=1) + "\n")
    return data


async def capture(
    client: KubeClient,
    output: Path,
    *,
    namespace: str | None = "default",
    lanes_by: str = "nodes",
    title: str = "",
    data_out: Path | None = None,
) -> dict[str, Any]:
    """Read the cluster now and draw it (the drawing in a thread: the caller's loop goes on)."""
    objects = await collect(client, namespace)
    now = datetime.now(UTC)
    return await asyncio.to_thread(
        draw, objects, output, now=now, lanes_by=lanes_by, title=title, data_out=data_out
    )


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from core.kube.client import KubeClient, options_from_args

    options = options_from_args(args)
    options.max_retries = RETRIES
    client = await KubeClient.connect(options)
    async with client:
        return await capture(
            client,
            Path(args.output),
            namespace=None if args.all_namespaces else args.namespace,
            lanes_by=args.lanes,
            title=args.title,
            data_out=Path(args.data_out) if args.data_out else None,
        )


def main(args: argparse.Namespace) -> int:
    from kubernetes_asyncio.config import ConfigException

    from core.kube.client import ApiError
    from vulcan.sim_commands import run_async

    if Path(args.output).suffix.lower() not in (".png", ".svg"):
        print(f"vulcan timeline: error: {args.output}: must end in .png or .svg", file=sys.stderr)
        return 2
    if args.kubeconfig and not Path(args.kubeconfig).is_file():
        print(f"vulcan timeline: error: no kubeconfig at {args.kubeconfig}", file=sys.stderr)
        return 1
    try:
        data = run_async(_run(args))
    except (ApiError, ConfigException, ValueError, OSError) as exc:
        print(f"vulcan timeline: error: {exc}", file=sys.stderr)
        return 1
    bars = data["bars"]
    pending = sum(not b["bound"] for b in bars)
    # The "(pending)" and "(no queue)" lanes are no node and no queue.
    lanes = [lane for lane in data["lanes"] if not lane["lane"].startswith("(")]
    rows = len(data.get("rows") or ())
    folded = (
        f", one row per gang ({rows} row{'s' if rows != 1 else ''})" if data.get("folded") else ""
    )
    print(
        f"timeline: {data['image']} ({len(bars) - pending} pods bound, {pending} never bound, "
        f"{len(lanes)} {args.lanes}{folded}); data: "
        f"{args.data_out or Path(args.output).with_suffix('.json')}"
    )
    return 0
