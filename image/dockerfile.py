"""The Dockerfile's runtime stage, read for the Debian build (image/build_debian.py): its image
metadata (LABEL, ENV, USER, WORKDIR, EXPOSE, ENTRYPOINT, CMD) and the steps that change files
(the COPY of the build stage's /usr/local prefix, RUN), so both builds make the same image."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


class BuildError(Exception):
    """A reason the image cannot be built, in one line."""


@dataclass
class Stage:
    """The runtime stage of the Dockerfile: its metadata, and the steps that change files."""

    args: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    workdir: str = ""
    ports: list[str] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    # ("COPY", destination) or ("RUN", command), in the Dockerfile's order; RUN sees the ENV
    # set before it.
    steps: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


def _instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction: comments dropped, continuations joined."""
    out: list[tuple[str, str]] = []
    current = ""
    for raw in [*text.splitlines(), ""]:
        line = raw.strip()
        if line.startswith("#") or (not line and not current):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current = (current + line).strip()
        if current:
            keyword, _, rest = current.partition(" ")
            out.append((keyword.upper(), rest.strip()))
        current = ""
    return out


def _substitute(value: str, known: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: known.get(m[1] or m[2], ""), value)


def _pairs(args: str, known: dict[str, str], where: str) -> dict[str, str]:
    out = {}
    for word in shlex.split(args):
        key, sep, value = word.partition("=")
        if not sep:
            raise BuildError(f"Dockerfile: {where} {word!r}: use the KEY=VALUE form")
        out[key] = _substitute(value, known)
    return out


def runtime_stage(dockerfile: Path, build_args: dict[str, str]) -> Stage:
    """The Dockerfile's last stage as the Debian build applies it; an instruction this build
    cannot apply is an error naming it, so the two builds cannot drift apart silently."""
    defaults: dict[str, str] = {}
    stages: list[list[tuple[str, str]]] = []
    for keyword, args in _instructions(dockerfile.read_text()):
        if keyword == "FROM":
            stages.append([])
        elif stages:
            stages[-1].append((keyword, args))
        elif keyword == "ARG":
            key, _, default = args.partition("=")
            defaults[key] = default.strip('"')
    if not stages:
        raise BuildError(f"{dockerfile}: no FROM")
    stage = Stage()
    for keyword, args in stages[-1]:
        known = {**stage.args, **stage.env}
        if keyword == "ARG":
            key, sep, default = args.partition("=")
            value = default.strip('"') if sep else defaults.get(key, "")
            stage.args[key] = build_args.get(key, value)
        elif keyword == "LABEL":
            stage.labels.update(_pairs(args, known, "LABEL"))
        elif keyword == "ENV":
            stage.env.update(_pairs(args, known, "ENV"))
        elif keyword == "USER":
            stage.user = _substitute(args, known)
        elif keyword == "WORKDIR":
            stage.workdir = _substitute(args, known)
        elif keyword == "EXPOSE":
            stage.ports += [p if "/" in p else f"{p}/tcp" for p in args.split()]
        elif keyword in ("ENTRYPOINT", "CMD"):
            try:
                value = json.loads(args)
            except json.JSONDecodeError as exc:
                message = f"Dockerfile: {keyword} {args}: use the exec (JSON) form"
                raise BuildError(message) from exc
            setattr(stage, keyword.lower(), value)
        elif keyword == "COPY" and "--from=" in args and shlex.split(args)[-1] == "/usr/local":
            stage.steps.append(("COPY", "/usr/local", {}))
        elif keyword == "RUN":
            stage.steps.append(("RUN", args, {**stage.args, **stage.env}))
        else:
            raise BuildError(f"Dockerfile: the Debian build cannot apply {keyword} {args}")
    return stage
