"""`vcctl queue create|delete|operate|list|get` (Volcano's pkg/cli/queue).

As Volcano: open/close create `OpenQueue`/`CloseQueue` Commands in namespace `default`; update
merge-patches `{"spec":{"weight":N}}` and needs N > 0; list/get count the queue's PodGroups per
phase from all PodGroups (no field selector: older API servers cannot select on custom fields);
create, delete and operate print nothing on success.

Deliberate difference: `queue create -S Closed`. Volcano sends `status.state` in the create
body, which the API server drops (status is a subresource), so the queue opens anyway; here
a queue asked to be created Closed also gets a CloseQueue Command, which the queue controller
carries out. Only `Open` and `Closed` are accepted (Volcano passes any string through).
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from core.kube.client import PODGROUPS, QUEUES, ApiError
from vcctl import bus
from vcctl.kube import Session, VcctlError, api_failure, call, delete_object, get_object
from vcctl.output import meta, pad

COLUMNS = ("Name", "Weight", "State", "Parent", "Inqueue", "Pending", "Running", "Unknown")
COUNTED_PHASES = ("Inqueue", "Pending", "Running", "Unknown", "Completed")
ACTIONS = {"open": "OpenQueue", "close": "CloseQueue"}
STATES = {"open": "Open", "closed": "Closed"}


def build_queue(name: str, weight: int, state: str) -> dict[str, Any]:
    return {
        "apiVersion": QUEUES.api_version,
        "kind": QUEUES.kind,
        "metadata": {"name": name},
        "spec": {"weight": weight},
        "status": {"state": state},
    }


def normalize_state(text: str) -> str:
    state = STATES.get(text.lower())
    if state is None:
        raise VcctlError(f"invalid queue state {text!r}: valid states are Open and Closed")
    return state


def check_create(args: argparse.Namespace) -> None:
    normalize_state(args.state)


async def create(session: Session, args: argparse.Namespace) -> None:
    state = normalize_state(args.state)
    queue = await call(
        session.client, session.client.create(QUEUES, build_queue(args.name, args.weight, state))
    )
    if state == "Closed":
        await bus.issue(session.client, queue, QUEUES, "CloseQueue", bus.QUEUE_COMMAND_NAMESPACE)


def check_named(args: argparse.Namespace) -> None:
    if not args.name:
        raise VcctlError("queue name must be specified")


async def delete(session: Session, args: argparse.Namespace) -> None:
    await delete_object(session.client, QUEUES, "queue", args.name)


def check_operate(args: argparse.Namespace) -> None:
    check_named(args)
    if args.action == "update":
        if not args.weight or args.weight <= 0:
            raise VcctlError(
                f"when update queue {args.name}, weight must be specified, "
                "the value must be greater than 0"
            )
    elif not args.action:
        raise VcctlError("action can not be null")
    elif args.action not in ACTIONS:
        raise VcctlError(f"action {args.action} invalid, valid actions are open, close and update")


async def operate(session: Session, args: argparse.Namespace) -> None:
    client = session.client
    if args.action == "update":
        try:
            await client.patch(QUEUES, args.name, {"spec": {"weight": args.weight}})
        except ApiError as exc:
            if exc.not_found:
                raise VcctlError(f"queue {args.name} not found") from exc
            raise api_failure(exc, client.host) from exc
        return
    queue = await get_object(client, QUEUES, "queue", args.name)
    await bus.issue(client, queue, QUEUES, ACTIONS[args.action], bus.QUEUE_COMMAND_NAMESPACE)


# ------------------------------------------------------------------------------ list, get


def count_podgroups(podgroups: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    """PodGroupStatistics per queue: phases Inqueue, Pending, Running, Unknown, Completed."""
    counts: dict[str, Counter[str]] = {}
    for group in podgroups:
        queue = (group.get("spec") or {}).get("queue", "")
        phase = (group.get("status") or {}).get("phase", "")
        if phase in COUNTED_PHASES:
            counts.setdefault(queue, Counter())[phase] += 1
    return counts


def format_queues(queues: list[dict[str, Any]], counts: dict[str, Counter[str]]) -> str:
    """`%-25s` for the name, `%-8s` for every other column, as Volcano's PrintQueues."""
    header = pad("Name", 25) + "".join(pad(c, 8) for c in (*COLUMNS[1:], "Completed"))
    lines = [header]
    for queue in queues:
        name = meta(queue).get("name", "")
        stats = counts.get(name, Counter())
        cells = [
            int((queue.get("spec") or {}).get("weight") or 0),
            (queue.get("status") or {}).get("state", ""),
            (queue.get("spec") or {}).get("parent", ""),
            *(stats[phase] for phase in COUNTED_PHASES),
        ]
        lines.append(pad(name, 25) + "".join(pad(cell, 8) for cell in cells))
    return "\n".join(lines) + "\n"


async def _podgroup_counts(session: Session) -> dict[str, Counter[str]]:
    listed = await call(session.client, session.client.list(PODGROUPS))
    return count_podgroups(listed.get("items") or [])


async def list_queues(session: Session, args: argparse.Namespace) -> None:
    listed = await call(session.client, session.client.list(QUEUES))
    queues = listed.get("items") or []
    if not queues:
        session.print("No resources found")
        return
    session.out.write(format_queues(queues, await _podgroup_counts(session)))


def check_get(args: argparse.Namespace) -> None:
    if not args.name:
        raise VcctlError("name is mandatory to get the particular queue details")


async def get(session: Session, args: argparse.Namespace) -> None:
    queue = await get_object(session.client, QUEUES, "queue", args.name)
    session.out.write(format_queues([queue], await _podgroup_counts(session)))
