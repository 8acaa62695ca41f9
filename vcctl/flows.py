"""`vcctl jobflow|jobtemplate create|delete|list|get|describe` (Volcano's pkg/cli/jobflow and
pkg/cli/jobtemplate, v1.10+). The two kinds share every verb; a JobFlow also shows its phase
and age and can be listed across namespaces.

As Volcano: `-f/--file` files may hold several documents, each created (deleted) on its own and
reported as `Created JobFlow: <ns>/<name>`; a document without a namespace goes to the default
one; list/get columns are as wide as their longest value plus 4; describe prints YAML (keys
sorted, as sigs.k8s.io/yaml) or indented JSON, without managedFields.

Deliberate differences:
- a document that fails to be created or deleted is reported on stderr and the command exits
  non-zero after trying the others (Volcano prints the failure on stdout and exits 0);
- documents are split by a YAML parser (Volcano splits the text on every `---`, also one inside
  a string), and a document of another kind is skipped: one file can hold a flow and its
  templates (Volcano would create a JobTemplate document as an empty JobFlow);
- `describe -o` with a format other than yaml/json is an error (Volcano prints
  `Unsupported format` and exits 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.kube.client import JOBFLOWS, JOBTEMPLATES, ApiError, Resource
from vcctl.kube import Session, VcctlError, api_failure, call, delete_object, get_object
from vcctl.output import age, meta, pad

COLUMN_SPACING = 4


@dataclass(frozen=True, slots=True)
class FlowKind:
    resource: Resource
    noun: str  # as Volcano's messages name it: "jobflow", "job template"
    with_phase: bool  # JobFlow: Phase and Age columns

    @property
    def kind(self) -> str:
        return self.resource.kind


JOBFLOW = FlowKind(JOBFLOWS, "jobflow", True)
JOBTEMPLATE = FlowKind(JOBTEMPLATES, "job template", False)


def _phase(obj: dict[str, Any]) -> str:
    return str(((obj.get("status") or {}).get("state") or {}).get("phase") or "")


def format_table(kind: FlowKind, items: list[dict[str, Any]], now: float | None = None) -> str:
    """Name, Namespace (and Phase, Age), each as wide as its longest cell + 4."""
    rows = []
    for obj in items:
        row = [meta(obj).get("name", ""), meta(obj).get("namespace", "")]
        if kind.with_phase:
            row += [_phase(obj), age(meta(obj).get("creationTimestamp"), now)]
        rows.append(row)
    header = ["Name", "Namespace"] + (["Phase", "Age"] if kind.with_phase else [])
    widths = [
        max(len(str(cell)) for cell in column) + COLUMN_SPACING
        for column in zip(header, *rows, strict=True)
    ]
    lines = [
        "".join(pad(c, w) for c, w in zip(row, widths, strict=True)) for row in [header, *rows]
    ]
    return "\n".join(lines) + "\n"


def read_documents(path: str, kind: FlowKind) -> list[dict[str, Any]]:
    """The file's documents of this kind (or of no stated kind)."""
    try:
        docs = list(yaml.safe_load_all(Path(path).read_text()))
    except OSError as exc:
        raise VcctlError(f"open {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise VcctlError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from exc
    kept = []
    for doc in docs:
        if not doc:
            continue
        if not isinstance(doc, dict):
            raise VcctlError(f"{path}: a document is not an object")
        if doc.get("kind", kind.kind) != kind.kind:
            continue
        doc.setdefault("apiVersion", kind.resource.api_version)
        doc.setdefault("kind", kind.kind)
        kept.append(doc)
    return kept


def check_file(args: argparse.Namespace) -> None:
    if not args.file:
        raise VcctlError("open : no such file or directory (give the file with -f)")


async def create(session: Session, args: argparse.Namespace, kind: FlowKind) -> None:
    failed = 0
    for doc in read_documents(args.file, kind):
        namespace = meta(doc).get("namespace") or session.namespace(None)
        doc.setdefault("metadata", {})["namespace"] = namespace
        try:
            await session.client.create(kind.resource, doc, namespace)
        except ApiError as exc:
            failed += 1
            print(f"Failed to create {kind.kind}: {api_failure(exc)}", file=sys.stderr)
            continue
        session.print(f"Created {kind.kind}: {namespace}/{meta(doc).get('name', '')}")
    if failed:
        raise VcctlError(f"{failed} {kind.kind}(s) not created")


def check_delete(kind: FlowKind) -> Any:
    def check(args: argparse.Namespace) -> None:
        if not args.file and not args.name:
            raise VcctlError(f"{kind.noun} name must be specified")

    return check


async def delete(session: Session, args: argparse.Namespace, kind: FlowKind) -> None:
    if args.file:
        failed = 0
        for doc in read_documents(args.file, kind):
            namespace = meta(doc).get("namespace") or session.namespace(None)
            name = meta(doc).get("name", "")
            try:
                await delete_object(session.client, kind.resource, kind.noun, name, namespace)
            except VcctlError as exc:
                failed += 1
                print(f"Failed to delete {kind.kind}: {exc}", file=sys.stderr)
                continue
            session.print(f"Deleted {kind.kind}: {namespace}/{name}")
        if failed:
            raise VcctlError(f"{failed} {kind.kind}(s) not deleted")
        return
    namespace = session.namespace(args.namespace)
    await delete_object(session.client, kind.resource, kind.noun, args.name, namespace)
    session.print(f"Deleted {kind.kind}: {namespace}/{args.name}")


async def list_objects(session: Session, args: argparse.Namespace, kind: FlowKind) -> None:
    every = getattr(args, "all_namespaces", False)
    namespace = None if every else session.namespace(args.namespace)
    listed = await call(session.client, session.client.list(kind.resource, namespace))
    items = listed.get("items") or []
    if not items:
        session.print("No resources found")
        return
    session.out.write(format_table(kind, items))


def check_get(kind: FlowKind) -> Any:
    def check(args: argparse.Namespace) -> None:
        if not args.name:
            raise VcctlError(f"name is mandatory to get the particular {kind.noun} details")

    return check


async def get(session: Session, args: argparse.Namespace, kind: FlowKind) -> None:
    namespace = session.namespace(args.namespace)
    obj = await get_object(session.client, kind.resource, kind.noun, args.name, namespace)
    session.out.write(format_table(kind, [obj]))


def render(obj: dict[str, Any], kind: FlowKind, fmt: str) -> str:
    """One object for `describe`: no managedFields, apiVersion and kind always set."""
    body = {"apiVersion": kind.resource.api_version, "kind": kind.kind}
    body.update({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
    body["metadata"] = {k: v for k, v in meta(obj).items() if k != "managedFields"}
    if fmt == "json":
        return json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    return yaml.safe_dump(body, sort_keys=True, default_flow_style=False, width=1 << 30)


def check_describe(args: argparse.Namespace) -> None:
    if args.format not in ("yaml", "json"):
        raise VcctlError(f"unsupported format {args.format!r}: use yaml or json")


async def describe(session: Session, args: argparse.Namespace, kind: FlowKind) -> None:
    namespace = session.namespace(args.namespace)
    if args.name:
        obj = await get_object(session.client, kind.resource, kind.noun, args.name, namespace)
        session.out.write(render(obj, kind, args.format))
        return
    listed = await call(session.client, session.client.list(kind.resource, namespace))
    # Volcano separates the objects of a namespace with two blank lines.
    session.out.write("\n\n".join(render(o, kind, args.format) for o in listed.get("items") or []))
