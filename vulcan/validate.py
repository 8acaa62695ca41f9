"""`vulcan validate FILE...`: check Volcano YAML offline, as the cluster's admission would."""

from __future__ import annotations

import os
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
    """The text of `path` (or stdin); ValueError with a one-line reason when it is not text."""
    if path == "-":
        raw = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
    elif os.path.isdir(path):
        raise ValueError("is a directory (name the YAML files in it)")
    else:
        with open(path, "rb") as handle:
            raw = handle.read()
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None


def _missing_type_field(doc: dict[str, Any]) -> str | None:
    """kubectl refuses an object without apiVersion or kind before anything else."""
    for field in ("apiVersion", "kind"):
        value = doc.get(field)
        if not isinstance(value, str) or not value:
            return field
    return None


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
        except ValueError as exc:
            print(f"{shown}: cannot read: {exc}", file=out)
            problems += 1
            continue
        try:
            documents = list(load_documents(text))
        except ManifestError as exc:
            print(f"{shown}: {exc}", file=out)
            problems += 1
            continue
        if not documents:
            print(f"{shown}: no objects (the file is empty)", file=out)
            problems += 1
            continue
        for index, doc in documents:
            if not isinstance(doc, dict):
                print(f"{shown}: document {index}: not a Kubernetes object", file=out)
                problems += 1
                continue
            missing = _missing_type_field(doc)
            if missing is not None:
                print(f"{shown}: {_label(doc)}: {missing}: Required value", file=out)
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
