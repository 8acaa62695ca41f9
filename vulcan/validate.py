"""`vulcan validate FILE...`: check Volcano YAML offline, as the cluster's admission would."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from core.api.admission import admit
from core.api.registry import lookup
from core.manifests import ManifestError, load_documents


def _label(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = (meta or {}).get("name") or (meta or {}).get("generateName") or "<unnamed>"
    return f"{doc.get('kind') or '<no kind>'}/{name}"


def _read(path: str, stdin: TextIO) -> str:
    if path == "-":
        return stdin.read()
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def validate_paths(
    paths: list[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr, stdin: TextIO = sys.stdin
) -> int:
    """Print `FILE: KIND/NAME: FIELD: reason` per problem; 0 when all is valid, else 1."""
    problems = 0
    checked = 0
    for path in paths:
        shown = "<stdin>" if path == "-" else path
        try:
            text = _read(path, stdin)
        except OSError as exc:
            print(f"{shown}: cannot read: {exc.strerror or exc}", file=out)
            problems += 1
            continue
        try:
            documents = list(load_documents(text))
        except ManifestError as exc:
            print(f"{shown}: {exc}", file=out)
            problems += 1
            continue
        for index, doc in documents:
            if not isinstance(doc, dict):
                print(f"{shown}: document {index}: not a Kubernetes object", file=out)
                problems += 1
                continue
            if lookup(doc.get("apiVersion"), doc.get("kind")) is None:
                print(
                    f"{shown}: {_label(doc)}: skipped ({doc.get('apiVersion')} "
                    f"{doc.get('kind')} is not a kind vulcan validates)",
                    file=err,
                )
                continue
            checked += 1
            result = admit(doc)
            for error in result.errors:
                print(f"{shown}: {_label(doc)}: {error.field}: {error.reason}", file=out)
                problems += 1
    summary = f"{checked} object(s) checked, {problems} problem(s)"
    print(summary, file=err)
    return 1 if problems else 0
