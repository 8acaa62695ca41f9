"""`vcctl pod list` (Volcano's pkg/cli/pod, v1.10+): the pods of Volcano Jobs.

As Volcano: without filters, every pod labelled `volcano.sh/job-name`; `-j` selects one job's
pods (and with `-q`, fails when they are not in that queue); `-q` alone takes vcjob pods by
their `volcano.sh/queue-name` label plus any other pod by its `scheduling.volcano.sh/queue-name`
annotation; rows are sorted by namespace and name; the status column is kubectl's (its
printPod logic); each column is as wide as its longest value + 8, or its header + 2.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from core.kube.client import PODS
from vcctl.kube import Session, VcctlError, call
from vcctl.output import age, meta, pad

JOB_NAME = "volcano.sh/job-name"
QUEUE_LABEL = "volcano.sh/queue-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
COLUMN_SPACING = 8
HEADER_SPACING = 2
NODE_UNREACHABLE = "NodeLost"


def _terminated_reason(state: dict[str, Any], prefix: str = "") -> str:
    if state.get("reason"):
        return prefix + state["reason"]
    if state.get("signal"):
        return f"{prefix}Signal:{state['signal']}"
    return f"{prefix}ExitCode:{int(state.get('exitCode') or 0)}"


def _later(a: str | None, b: str | None) -> str | None:
    return b if b and (not a or b > a) else a


def _init_state(pod: dict[str, Any], info: dict[str, Any]) -> tuple[str | None, int, str | None]:
    """(reason while initializing or None, sidecar restarts, last sidecar restart)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    inits = {c.get("name"): c for c in spec.get("initContainers") or ()}
    total = len(spec.get("initContainers") or ())
    reason: str | None = None
    sidecar_restarts, sidecar_last = 0, None
    for index, container in enumerate(status.get("initContainerStatuses") or ()):
        restarts = int(container.get("restartCount") or 0)
        info["restarts"] += restarts
        finished = ((container.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        info["last"] = _later(info["last"], finished)
        sidecar = (inits.get(container.get("name")) or {}).get("restartPolicy") == "Always"
        if sidecar:
            sidecar_restarts += restarts
            sidecar_last = _later(sidecar_last, finished)
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if sidecar and container.get("started"):
            if container.get("ready"):
                info["ready"] += 1
            continue
        if terminated is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{index}/{total}"
        break
    return reason, sidecar_restarts, sidecar_last


def pod_row(pod: dict[str, Any], now: float | None = None) -> dict[str, str]:
    """kubectl's printPod: Ready, Status, Restarts, Age."""
    spec, status, m = pod.get("spec") or {}, pod.get("status") or {}, meta(pod)
    now = time.time() if now is None else now
    total = len(spec.get("containers") or ()) + sum(
        1 for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"
    )
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    info: dict[str, Any] = {"restarts": 0, "last": None, "ready": 0}
    init_reason, sidecar_restarts, sidecar_last = _init_state(pod, info)
    conditions = status.get("conditions") or ()
    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions
    )
    if init_reason is not None:
        reason = init_reason
    if init_reason is None or initialized:
        info["restarts"], info["last"] = sidecar_restarts, sidecar_last
        running = False
        for container in reversed(status.get("containerStatuses") or ()):
            info["restarts"] += int(container.get("restartCount") or 0)
            last = ((container.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
            info["last"] = _later(info["last"], last)
            state = container.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None:
                reason = _terminated_reason(terminated)
            elif container.get("ready") and state.get("running") is not None:
                running = True
                info["ready"] += 1
        if reason == "Completed" and running:
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if ready else "NotReady"
    if m.get("deletionTimestamp") and status.get("reason") == NODE_UNREACHABLE:
        reason = "Unknown"
    elif m.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts = str(info["restarts"])
    if info["restarts"] and info["last"]:
        restarts = f"{info['restarts']} ({age(info['last'], now)} ago)"
    return {
        "Namespace": m.get("namespace", ""),
        "Name": m.get("name", ""),
        "Ready": f"{info['ready']}/{total}",
        "Status": reason,
        "Restart": restarts,
        "Age": age(m.get("creationTimestamp"), now),
    }


def format_pods(pods: list[dict[str, Any]], all_namespaces: bool, now: float | None = None) -> str:
    headers = (["Namespace"] if all_namespaces else []) + [
        "Name",
        "Ready",
        "Status",
        "Restart",
        "Age",
    ]
    rows = [pod_row(p, now) for p in pods]
    widths = [
        max([len(h) + HEADER_SPACING] + [len(r[h]) + COLUMN_SPACING for r in rows]) for h in headers
    ]
    lines = ["".join(pad(h, w) for h, w in zip(headers, widths, strict=True))]
    for row in rows:
        lines.append("".join(pad(row[h], w) for h, w in zip(headers, widths, strict=True)))
    return "\n".join(lines) + "\n"


def select_pods(
    pods: list[dict[str, Any]], *, job: str = "", queue: str = ""
) -> list[dict[str, Any]]:
    """The pods `pod list` shows, from every pod of the namespace(s)."""
    if job:
        chosen = [p for p in pods if (meta(p).get("labels") or {}).get(JOB_NAME) == job]
        if queue:
            for pod in chosen:
                label = (meta(pod).get("labels") or {}).get(QUEUE_LABEL)
                if label is not None and label != queue:
                    raise VcctlError(f"the input vcjob {job} does not match the queue {queue}")
    elif queue:
        chosen = [p for p in pods if (meta(p).get("labels") or {}).get(QUEUE_LABEL) == queue]
        seen = {(meta(p).get("namespace"), meta(p).get("name")) for p in chosen}
        for pod in pods:
            key = (meta(pod).get("namespace"), meta(pod).get("name"))
            notes = meta(pod).get("annotations") or {}
            if notes.get(QUEUE_ANNOTATION) == queue and key not in seen:
                chosen.append(pod)
    else:
        chosen = [p for p in pods if JOB_NAME in (meta(p).get("labels") or {})]
    return sorted(chosen, key=lambda p: (meta(p).get("namespace", ""), meta(p).get("name", "")))


async def list_pods(session: Session, args: argparse.Namespace) -> None:
    namespace = None if args.all_namespaces else session.namespace(args.namespace)
    # The label selector narrows the list on the server where Volcano's does; a queue
    # needs every pod (the annotation cannot be selected on).
    if args.job:
        selector: str | None = f"{JOB_NAME}={args.job}"
    elif args.queue:
        selector = None
    else:
        selector = JOB_NAME
    query = {"labelSelector": selector} if selector else {}
    listed = await call(session.client, session.client.list(PODS, namespace, **query))
    pods = select_pods(listed.get("items") or [], job=args.job or "", queue=args.queue or "")
    if not pods:
        session.print("No resources found")
        return
    session.out.write(format_pods(pods, args.all_namespaces))
