"""`vcctl job view`: Volcano's describe-like dump of a Job (pkg/cli/job/view.go) and its events.

Line for line as Volcano prints it (two blanks per indent level, `\\t` after each label),
including its fixed annotation lines for the three template annotations it knows. Differences,
deliberate: events are the ones whose involvedObject is this Job (Volcano takes every event of
the namespace whose *name* starts with `<job>.`, which also catches another object named like
the job); events written through events.k8s.io/v1 have no firstTimestamp/source, so their
eventTime/series/reportingController stand in, as `kubectl describe` does; the events table's
fourth column is headed `From` (Volcano's `Form` is a typo); controlled resources are sorted
(Go ranges over a map in random order).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from core.kube.client import VCJOBS, Resource
from core.resources_parse import parse_quantity
from core.resources_quantity import QuantityError
from vcctl.kube import Session, VcctlError, call, get_object
from vcctl.output import age, go_time, meta

EVENTS = Resource("", "v1", "events", True, "Event")
TEMPLATE_ANNOTATIONS = (
    ("Cri . Cci . Io / Container - Type:          ", "cri.cci.io/container-type"),
    ("Kubernetes . Io / Availablezone:            ", "kubernetes.io/availablezone"),
    ("Network . Alpha . Kubernetes . Io / Network:", "network.alpha.kubernetes.io/network"),
)
STATUS_COUNTS = (
    ("Succeeded:    ", "succeeded"),
    ("Pending:      ", "pending"),
    ("Running:      ", "running"),
    ("Failed:       ", "failed"),
    ("Terminating:  ", "terminating"),
    ("Unknown:      ", "unknown"),
    ("RetryCount:   ", "retryCount"),
    ("Min Available:", "minAvailable"),
    ("Version:      ", "version"),
)


class Writer:
    """WriteLine(writer, level, ...): each level indents by two blanks."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, level: int, text: str) -> None:
        self.lines.append("  " * level + text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def go_list(values: list[Any] | None) -> str:
    """`%v` of a Go []string: `[a b]`, `[]` when empty."""
    return "[" + " ".join(str(v) for v in values or ()) + "]"


def quantity(resources: dict[str, Any], key: str) -> str:
    """ResourceList.Cpu()/Memory() printed: canonical, `0` when absent."""
    value = (resources or {}).get(key)
    if value is None:
        return "0"
    try:
        return str(parse_quantity(value))
    except QuantityError:
        return str(value)


def format_job(job: dict[str, Any]) -> str:
    w = Writer()
    m, spec, status = meta(job), job.get("spec") or {}, job.get("status") or {}
    w(0, f"Name:       \t{m.get('name', '')}")
    w(0, f"Namespace:  \t{m.get('namespace', '')}")
    labels, notes = m.get("labels") or {}, m.get("annotations") or {}
    w(0, f"Labels:     \t{_go_json(labels)}" if labels else "Labels:     \t<none>")
    w(0, f"Annotations:\t{_go_json(notes)}" if notes else "Annotations:\t<none>")
    w(0, f"API Version:\t{job.get('apiVersion', '')}")
    w(0, f"Kind:       \t{job.get('kind', '')}")
    w(0, "Metadata:")
    w(1, f"Creation Timestamp:\t{go_time(m.get('creationTimestamp'))}")
    w(1, f"Generate Name:     \t{m.get('generateName', '')}")
    w(1, f"Generation:        \t{int(m.get('generation') or 0)}")
    w(1, f"Resource Version:  \t{m.get('resourceVersion', '')}")
    w(1, f"UID:               \t{m.get('uid', '')}")
    w(0, "Spec:")
    w(1, f"Min Available:     \t{int(spec.get('minAvailable') or 0)}")
    w(1, "Plugins:")
    plugins = spec.get("plugins") or {}
    w(2, f"Env:\t{go_list(plugins.get('env'))}")
    w(2, f"Ssh:\t{go_list(plugins.get('ssh'))}")
    w(1, f"Scheduler Name:    \t{spec.get('schedulerName', '')}")
    w(1, "Tasks:")
    for task in spec.get("tasks") or ():
        _task(w, task)
    w(0, "Status:")
    for label, key in STATUS_COUNTS:
        if int(status.get(key) or 0) > 0:
            w(1, f"{label}\t{int(status[key])}")
    w(1, "State:")
    w(2, f"Phase:\t{(status.get('state') or {}).get('phase', '')}")
    controlled = status.get("controlledResources") or {}
    if controlled:
        w(1, "Controlled Resources:")
        for key in sorted(controlled):
            w(2, f"{key}: \t{controlled[key]}")
    conditions = status.get("conditions") or []
    if conditions:
        w(1, "Conditions:\n    Status\tTransitionTime")
        for condition in conditions:
            transition = go_time(condition.get("lastTransitionTime"))
            w(2, f"{condition.get('status', '')} \t{transition} ")
    return w.text()


def _task(w: Writer, task: dict[str, Any]) -> None:
    template = task.get("template") or {}
    pod_meta, pod_spec = template.get("metadata") or {}, template.get("spec") or {}
    w(2, f"Name:\t{task.get('name', '')}")
    w(2, f"Replicas:\t{int(task.get('replicas') or 0)}")
    w(2, "Template:")
    w(3, "Metadata:")
    w(4, "Annotations:")
    notes = pod_meta.get("annotations") or {}
    for label, key in TEMPLATE_ANNOTATIONS:
        w(5, f"{label}\t{notes.get(key, '')}")
    w(4, f"Creation Timestamp:\t{go_time(pod_meta.get('creationTimestamp'))}")
    w(3, "Spec:")
    w(4, "Containers:")
    for container in pod_spec.get("containers") or ():
        w(5, "Command:")
        for word in container.get("command") or ():
            w(6, str(word))
        w(5, f"Image:\t{container.get('image', '')}")
        w(5, f"Name: \t{container.get('name', '')}")
        w(5, "Ports:")
        for port in container.get("ports") or ():
            w(6, f"Container Port:\t{int(port.get('containerPort') or 0)}")
            w(6, f"Name:          \t{port.get('name', '')}")
        resources = container.get("resources") or {}
        w(5, "Resources:")
        w(6, "Limits:")
        w(7, f"Cpu:   \t{quantity(resources.get('limits'), 'cpu')}")
        w(7, f"Memory:\t{quantity(resources.get('limits'), 'memory')}")
        w(6, "Requests:")
        w(7, f"Cpu:   \t{quantity(resources.get('requests'), 'cpu')}")
        w(7, f"Memory:\t{quantity(resources.get('requests'), 'memory')}")
        w(6, f"Working Dir:\t{container.get('workingDir', '')}")
    w(4, "Image Pull Secrets:")
    for secret in pod_spec.get("imagePullSecrets") or ():
        w(5, f"Name:     \t{secret.get('name', '')}")
    w(4, f"Restart Policy:   \t{pod_spec.get('restartPolicy', '')}")


def _go_json(mapping: dict[str, Any]) -> str:
    """json.Marshal of a Go map: keys sorted, no blanks, HTML characters escaped."""
    text = json.dumps(mapping, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# ------------------------------------------------------------------------------------ events


def job_events(events: list[dict[str, Any]], job: dict[str, Any]) -> list[dict[str, Any]]:
    name = meta(job).get("name")
    kept = []
    for event in events:
        regarding = event.get("involvedObject") or {}
        if regarding.get("kind") == VCJOBS.kind and regarding.get("name") == name:
            kept.append(event)
    return kept


def _event_row(event: dict[str, Any], now: float | None) -> tuple[str, str, str, str, str]:
    series = event.get("series") or {}
    first = event.get("firstTimestamp") or event.get("eventTime")
    last = event.get("lastTimestamp") or series.get("lastObservedTime") or first
    count = int(event.get("count") or series.get("count") or 0)
    if count > 1:
        interval = f"{age(last, now)} (x{count} over {age(first, now)})"
    else:
        interval = age(first, now)
    source = event.get("source") or {}
    parts = [source.get("component") or event.get("reportingComponent") or ""]
    host = source.get("host") or event.get("reportingInstance")
    if host:
        parts.append(host)
    return (
        str(event.get("type", "")),
        str(event.get("reason", "")),
        interval,
        ", ".join(parts),
        str(event.get("message") or "").strip(),
    )


def format_events(events: list[dict[str, Any]], now: float | None = None) -> str:
    if not events:
        return "Events: \t<none>\n"
    row = "{:<15}\t{:<40}\t{:<30}\t{:<40}\t{}"
    lines = ["Events:", row.format("Type", "Reason", "Age", "From", "Message")]
    lines.append(row.format(*(["-------"] * 5)))
    lines.extend(row.format(*_event_row(e, now)) for e in events)
    return "\n".join(lines) + "\n"


def check_view(args: argparse.Namespace) -> None:
    if not args.name:
        raise VcctlError(
            "job name (specified by --name or -N) is mandatory to view a particular job"
        )


async def view(session: Session, args: argparse.Namespace) -> None:
    namespace = session.namespace(args.namespace)
    job = await get_object(session.client, VCJOBS, "job", args.name, namespace)
    session.out.write(format_job(job))
    try:
        listed = await call(session.client, session.client.list(EVENTS, namespace))
    except VcctlError as exc:
        # As Volcano: the Job is shown even when its events cannot be read (e.g. no RBAC
        # for events); the reason goes to stderr and the dump ends without them.
        print(f"vcctl: cannot list events: {exc}", file=sys.stderr)
        return
    session.out.write(format_events(job_events(listed.get("items") or [], job)))
