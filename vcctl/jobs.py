"""`vcctl job run|list|suspend|resume|delete` (Volcano's pkg/cli/job; `view` is in job_view).

Followed from Volcano's code where its spec summary differs:
- `job run` without `-f` builds one task with **no name** (`constructLaunchJobFlagsJob` sets
  none; the spec's "task named after the job" is the pod template's metadata.name): the
  mutating webhook names it `default0`, so pods are `<job>-default0-<i>`.
- quantities are sent canonical, as client-go serialises a parsed Quantity (`1000m` -> `1`).
Deliberate differences:
- `job run -f` creates the Job in the file's namespace when `-n` is not given (Volcano posts it
  to `-n`'s namespace, which the API server refuses when the file names another), and refuses a
  file whose namespace contradicts an explicit `-n`, as kubectl does. A `.json` file is
  accepted too (YAML is a superset; Volcano refuses names without `.yaml`/`.yml`).
- suspend/resume print nothing on success, as Volcano's do.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

import yaml

from core.kube.client import VCJOBS
from core.resources_parse import parse_quantity
from core.resources_quantity import QuantityError
from vcctl import bus
from vcctl.kube import Session, VcctlError, call, delete_object, get_object
from vcctl.output import go_date, meta, pad

JOB_LABEL = "job.volcano.sh"  # the pod-template label `job run` sets (Volcano's `jobName`)
JOB_TYPE_LABEL = "volcano.sh/job-type"
ABORT_JOB = "AbortJob"
RESUME_JOB = "ResumeJob"

LIST_COLUMNS = (
    "Name",
    "Creation",
    "Phase",
    "JobType",
    "Replicas",
    "Min",
    "Pending",
    "Running",
    "Succeeded",
    "Failed",
    "Unknown",
    "RetryCount",
)
# The widths of Volcano's list formats after the (computed) name column.
LIST_WIDTHS = (15, 12, 12, 12, 6, 10, 10, 12, 10, 12, 10)


# ----------------------------------------------------------------------------- job run


def parse_resource_list(spec: str) -> dict[str, str]:
    """`cpu=1000m,memory=100Mi` -> {"cpu": "1", "memory": "100Mi"} (PopulateResourceListV1)."""
    if not spec:
        return {}
    result: dict[str, str] = {}
    for statement in spec.split(","):
        parts = statement.split("=")
        if len(parts) != 2:
            raise VcctlError(f"invalid argument syntax {statement}, expected <resource>=<value>")
        try:
            result[parts[0]] = str(parse_quantity(parts[1]))
        except QuantityError as exc:
            raise VcctlError(str(exc)) from exc
    return result


def build_job(
    name: str,
    namespace: str,
    *,
    image: str,
    min_available: int,
    replicas: int,
    requests: dict[str, str],
    limits: dict[str, str],
    scheduler: str,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """The Job `vcctl job run` (and `vsub`) submits, field for field as Volcano builds it;
    zero counts are left out as Go's omitempty leaves them out."""
    resources: dict[str, Any] = {}
    if limits:
        resources["limits"] = dict(limits)
    if requests:
        resources["requests"] = dict(requests)
    container: dict[str, Any] = {"name": name, "image": image}
    if command:
        container["command"] = list(command)
    container["resources"] = resources
    container["imagePullPolicy"] = "IfNotPresent"
    task: dict[str, Any] = {}
    if replicas:
        task["replicas"] = replicas
    task["template"] = {
        "metadata": {"name": name, "labels": {JOB_LABEL: name}},
        "spec": {"containers": [container], "restartPolicy": "Never"},
    }
    spec: dict[str, Any] = {}
    if min_available:
        spec["minAvailable"] = min_available
    spec["schedulerName"] = scheduler
    spec["tasks"] = [task]
    return {
        "apiVersion": VCJOBS.api_version,
        "kind": VCJOBS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def read_job_file(filename: str) -> dict[str, Any]:
    path = Path(filename)
    if path.suffix not in (".yaml", ".yml", ".json"):
        raise VcctlError("only support yaml file")
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    except OSError as exc:
        raise VcctlError(f"failed to read file, err: {exc.strerror}: {filename}") from exc
    except yaml.YAMLError as exc:
        raise VcctlError(f"failed to unmarshal file, err: {_yaml_error(exc)}") from exc
    if not docs or not isinstance(docs[0], dict):
        raise VcctlError(f"failed to unmarshal file, err: {filename} holds no Job")
    job = docs[0]
    if job.get("kind", "Job") != "Job":
        raise VcctlError(f"{filename}: expected a Job, found kind {job.get('kind')}")
    job.setdefault("apiVersion", VCJOBS.api_version)
    job.setdefault("kind", VCJOBS.kind)
    return job


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return f"line {mark.line + 1}: {problem}" if mark is not None else problem


def job_from_args(session: Session, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The Job to submit and its namespace, from `-f` or the flags."""
    requests = parse_resource_list(args.requests)
    limits = parse_resource_list(args.limits)
    if getattr(args, "filename", None):
        job = read_job_file(args.filename)
        file_ns = meta(job).get("namespace")
        if args.namespace and file_ns and file_ns != args.namespace:
            raise VcctlError(
                f"the namespace from the provided object {file_ns!r} does not match "
                f"the namespace {args.namespace!r}"
            )
        namespace = args.namespace or file_ns or session.namespace(None)
        job.setdefault("metadata", {})["namespace"] = namespace
        return job, namespace
    namespace = session.namespace(args.namespace)
    command = shlex.split(args.command) if getattr(args, "command", None) else None
    job = build_job(
        args.name,
        namespace,
        image=args.image,
        min_available=args.min,
        replicas=args.replicas,
        requests=requests,
        limits=limits,
        scheduler=args.scheduler,
        command=command,
    )
    return job, namespace


def check_run(args: argparse.Namespace) -> None:
    if not args.name and not getattr(args, "filename", None):
        raise VcctlError("job name cannot be left blank")


async def run(session: Session, args: argparse.Namespace) -> None:
    job, namespace = job_from_args(session, args)
    created = await call(session.client, session.client.create(VCJOBS, job, namespace))
    session.print(f"run job {meta(created).get('name')} successfully")


# ----------------------------------------------------------------------------- job list


def job_row(job: dict[str, Any]) -> list[object]:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    replicas = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or ())
    job_type = (meta(job).get("labels") or {}).get(JOB_TYPE_LABEL) or "Batch"
    return [
        meta(job).get("name", ""),
        go_date(meta(job).get("creationTimestamp")),
        (status.get("state") or {}).get("phase", ""),
        job_type,
        replicas,
        int(status.get("minAvailable") or 0),
        int(status.get("pending") or 0),
        int(status.get("running") or 0),
        int(status.get("succeeded") or 0),
        int(status.get("failed") or 0),
        int(status.get("unknown") or 0),
        int(status.get("retryCount") or 0),
    ]


def format_jobs(jobs: list[dict[str, Any]], all_namespaces: bool) -> str:
    """PrintJobs: the name (and namespace) columns are as wide as their longest value + 3."""
    name_width = max([len("Name")] + [len(meta(j).get("name", "")) for j in jobs]) + 3
    ns_width = max([len("Namespace")] + [len(meta(j).get("namespace", "")) for j in jobs]) + 3
    widths = (name_width, *LIST_WIDTHS)

    def line(cells: list[object], namespace: str | None) -> str:
        text = "".join(pad(cell, width) for cell, width in zip(cells, widths, strict=True))
        return (pad(namespace, ns_width) + text) if namespace is not None else text

    lines = [line(list(LIST_COLUMNS), "Namespace" if all_namespaces else None)]
    for job in jobs:
        namespace = meta(job).get("namespace", "") if all_namespaces else None
        lines.append(line(job_row(job), namespace))
    return "\n".join(lines) + "\n"


def select_jobs(
    jobs: list[dict[str, Any]], *, queue: str = "", scheduler: str = "", selector: str = ""
) -> list[dict[str, Any]]:
    """The list filters: exact queue, exact scheduler, name substring (`--selector`)."""
    kept = []
    for job in jobs:
        spec = job.get("spec") or {}
        if queue and spec.get("queue") != queue:
            continue
        if scheduler and spec.get("schedulerName") != scheduler:
            continue
        if selector and selector not in meta(job).get("name", ""):
            continue
        kept.append(job)
    return kept


async def list_jobs(session: Session, args: argparse.Namespace) -> None:
    namespace = None if args.all_namespaces else session.namespace(args.namespace)
    listed = await call(session.client, session.client.list(VCJOBS, namespace))
    jobs = select_jobs(
        listed.get("items") or [],
        queue=getattr(args, "queue", "") or "",
        scheduler=args.scheduler or "",
        selector=args.selector or "",
    )
    if not jobs:
        session.print("No resources found")
        return
    session.out.write(format_jobs(jobs, args.all_namespaces))


# --------------------------------------------------------------- suspend, resume, delete


def name_check(verb: str) -> Any:
    def check(args: argparse.Namespace) -> None:
        if not args.name:
            raise VcctlError(f"job name is mandatory to {verb} a particular job")

    return check


async def _command(session: Session, args: argparse.Namespace, action: str) -> None:
    namespace = session.namespace(args.namespace)
    job = await get_object(session.client, VCJOBS, "job", args.name, namespace)
    await bus.issue(session.client, job, VCJOBS, action, namespace)


async def suspend(session: Session, args: argparse.Namespace) -> None:
    await _command(session, args, ABORT_JOB)


async def resume(session: Session, args: argparse.Namespace) -> None:
    await _command(session, args, RESUME_JOB)


async def delete(session: Session, args: argparse.Namespace) -> None:
    namespace = session.namespace(args.namespace)
    await delete_object(session.client, VCJOBS, "job", args.name, namespace)
    # vcancel (the legacy binary) says "cancel"; `vcctl job delete` says "delete".
    session.print(f"{getattr(args, 'verb', 'delete')} job {args.name} successfully")
