"""The container image's recipe, checked without a container builder: the Dockerfile's stages,
user, entrypoint, ports and environment; what .dockerignore keeps out of the build context; and
`make image`'s choice of builder (docker, podman, else Debian's packages; its failure without
one), with fake builders on a PATH of the test's own. An actual build with docker or podman
runs only where one works and VULCAN_IMAGE_BUILD=1 asks for it (builds take minutes); the
Debian build's image is run by tests/unit/test_image_run.py."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from extender.flags import add_extender_flags
from extender.webhook_flags import DEFAULT_WEBHOOK_PORT
from tests.helpers import REPO
from vulcan.controllers import add_controllers_flags

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
MAKE = shutil.which("make")
BUILDERS = ("docker", "podman")
# What `make image` builds with from Debian's packages when neither builder can.
DEBIAN_TOOLS = ("mmdebstrap", "umoci")
NO_BUILDER_LINE = "make image: no container builder here"


# --- Dockerfile ----------------------------------------------------------------------------


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"the stage FROM {self.base} has no {keyword}"
        return found[-1]


def logical_lines(text: str) -> list[str]:
    """The Dockerfile's instructions, one a line: comment lines dropped (also inside a
    continuation, as Docker does), backslash continuations joined."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        if current.strip():
            lines.append(current.strip())
        current = ""
    if current.strip():
        lines.append(current.strip())
    return lines


@cache
def dockerfile() -> tuple[dict[str, str], tuple[Stage, ...]]:
    """(the ARGs declared before the first FROM, with their defaults; the stages)."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical_lines(DOCKERFILE.read_text()):
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            base = re.sub(r"\$\{?(\w+)\}?", lambda m: global_args.get(m.group(1), ""), words[0])
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=base, name=name))
        elif not stages:
            assert keyword == "ARG", f"only ARG may come before the first FROM, not {keyword}"
            key, _, default = args.partition("=")
            global_args[key] = default.strip('"')
        else:
            stages[-1].instructions.append((keyword, args))
    return global_args, tuple(stages)


def stages() -> tuple[Stage, ...]:
    return dockerfile()[1]


def final() -> Stage:
    return stages()[-1]


def key_values(args: str) -> dict[str, str]:
    """ENV/LABEL arguments in their KEY=VALUE form."""
    out = {}
    for word in shlex.split(args):
        key, sep, value = word.partition("=")
        assert sep, f"use the KEY=VALUE form: {word!r}"
        out[key] = value
    return out


def copy_sources(args: str) -> tuple[dict[str, str], list[str]]:
    """(the --flags, the sources) of a COPY or ADD."""
    words = shlex.split(args)
    flags = dict(w[2:].partition("=")[::2] for w in words if w.startswith("--"))
    paths = [w for w in words if not w.startswith("--")]
    return flags, paths[:-1]


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_dockerfile_is_multi_stage_on_one_slim_python_base() -> None:
    assert len(stages()) >= 2, "a build stage and a runtime stage"
    build, *_, runtime = stages()
    assert build.name, "the build stage is named, for the runtime stage's COPY --from"
    assert runtime.name is None or runtime.name != build.name
    assert build.base == runtime.base, "the runtime stage runs what the build stage built"
    image, _, tag = runtime.base.partition(":")
    assert image.endswith("python") and "slim" in tag, runtime.base
    python = tuple(int(n) for n in re.match(r"(\d+)\.(\d+)", tag).groups())
    floor = pyproject()["project"]["requires-python"].removeprefix(">=")
    assert python >= tuple(int(n) for n in floor.split(".")), (runtime.base, floor)


def test_build_stage_makes_wheels_and_the_runtime_stage_copies_only_its_result() -> None:
    builders = stages()[:-1]
    runs = " ".join(run for stage in builders for run in stage.all("RUN"))
    assert "pip wheel" in runs and "pip install" in runs
    names = {stage.name for stage in builders}
    copies = final().all("COPY") + final().all("ADD")
    assert copies, "the runtime stage copies the installed tree from the build stage"
    for args in copies:
        flags, _ = copy_sources(args)
        assert flags.get("from") in names, f"the runtime stage copies from the build only: {args}"


def test_runtime_stage_leaves_no_compiler_or_package_manager_work_behind() -> None:
    runs = " ".join(final().all("RUN"))
    for word in ("apt-get", "apk ", "gcc", "build-essential", "pip wheel", "pip install"):
        assert word not in runs, f"the runtime stage runs {word!r}"


def test_no_stage_copies_the_test_tree_and_the_context_excludes_it() -> None:
    for stage in stages():
        for args in stage.all("COPY") + stage.all("ADD"):
            flags, sources = copy_sources(args)
            if "from" in flags:
                continue
            for source in sources:
                assert not source.strip("./").startswith(("tests", "bench")), args
    assert excluded("tests/unit/test_image.py")
    assert excluded("tests/helpers.py")


def test_runtime_user_is_numeric_non_root_with_a_home_it_owns() -> None:
    user = final().last("USER")
    assert re.fullmatch(r"\d+(:\d+)?", user), f"USER is numeric (runAsNonRoot needs it): {user}"
    uid = user.partition(":")[0]
    assert int(uid) != 0
    creates = " ".join(final().all("RUN"))
    assert re.search(rf"useradd\b.*--uid {uid}\b.*--create-home", creates), creates
    home = re.search(r"--home-dir (\S+)", creates).group(1)
    env = {}
    for args in final().all("ENV"):
        env.update(key_values(args))
    assert env.get("HOME") == home
    assert final().last("WORKDIR") == home


def test_entrypoint_is_vulcan_and_the_default_command_is_help() -> None:
    assert json.loads(final().last("ENTRYPOINT")) == ["vulcan"], "exec form, the console script"
    assert json.loads(final().last("CMD")) == ["--help"]
    assert "vulcan" in pyproject()["project"]["scripts"]


def test_runtime_writes_no_bytecode_and_buffers_no_output() -> None:
    env: dict[str, str] = {}
    for args in final().all("ENV"):
        env.update(key_values(args))
    assert env.get("PYTHONDONTWRITEBYTECODE") == "1"
    assert env.get("PYTHONUNBUFFERED") == "1"


def test_exposes_the_ports_the_components_listen_on() -> None:
    extender = argparse.ArgumentParser()
    add_extender_flags(extender)
    controllers = argparse.ArgumentParser()
    add_controllers_flags(controllers)
    expected = {
        extender.get_default("port"),
        DEFAULT_WEBHOOK_PORT,
        controllers.get_default("port"),
    }
    exposed = {
        int(port.partition("/")[0]) for args in final().all("EXPOSE") for port in args.split()
    }
    assert exposed == expected


def test_labels_follow_the_oci_annotations() -> None:
    labels: dict[str, str] = {}
    for args in final().all("LABEL"):
        labels.update(key_values(args))
    for key in ("title", "description", "version", "licenses"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert labels["org.opencontainers.image.licenses"] == pyproject()["project"]["license"]


# --- .dockerignore -------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker reads it: `**` any number of directories, `*` and `?`
    within one path element, anchored at the context's root."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out += pattern[i : end + 1]
            i = end + 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


@cache
def ignore_rules() -> tuple[tuple[bool, re.Pattern[str]], ...]:
    rules = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.removeprefix("!").strip()).lstrip("/")
        rules.append((negated, _pattern_regex(pattern)))
    return tuple(rules)


def excluded(path: str) -> bool:
    """Whether .dockerignore keeps `path` (relative to the checkout) out of the context: the
    last rule matching it or one of its parent directories decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for negated, regex in ignore_rules():
        if any(regex.fullmatch(candidate) for candidate in candidates):
            verdict = not negated
    return verdict


def test_dockerignore_keeps_what_the_wheel_is_built_from() -> None:
    project = pyproject()
    needed = ["pyproject.toml", project["project"]["readme"]]
    setuptools = project["tool"]["setuptools"]
    for include in setuptools["packages"]["find"]["include"]:
        package = include.rstrip("*").rstrip(".")
        needed.append(f"{package}/__init__.py")
    package_data = [
        str(path.relative_to(REPO))
        for package, patterns in setuptools["package-data"].items()
        for pattern in patterns
        for path in (REPO / package.replace(".", "/")).glob(pattern)
    ]
    assert "sim/apiserver/proto_schema.json" in package_data
    for path in needed + package_data:
        assert (REPO / path).exists(), path
        assert not excluded(path), f".dockerignore leaves out {path}, which the wheel needs"


@pytest.mark.parametrize(
    "path",
    [
        ".git/HEAD",
        ".venv/bin/python",
        "tests/unit/test_image.py",
        "bench/extender_latency.py",
        "core/__pycache__/x.cpython-312.pyc",
        "__pycache__/x.pyc",
        ".pytest_cache/README.md",
        ".ruff_cache/CACHEDIR.TAG",
        "vulcan.egg-info/PKG-INFO",
        "build/lib/vulcan/cli.py",
        "dist/vulcan-0.1.0-py3-none-any.whl",
        "dist/vulcan-image.tar",
        "image/build_debian.py",
    ],
)
def test_dockerignore_keeps_out(path: str) -> None:
    assert excluded(path)


# --- make image ----------------------------------------------------------------------------


def run_make(
    *args: str, path: str | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """`make ARGS...` in the checkout, without the variables of a make that runs this test
    (MAKEFLAGS, VERSION, ...); with PATH set to `path` when given."""
    assert MAKE is not None
    drop = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "VERSION"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [MAKE, "--no-print-directory", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def fake_builder(bin_dir: Path, name: str, log: Path, info_exit: int = 0) -> None:
    """An executable `name` that records its arguments; `name info` exits with `info_exit`
    (docker's engine answering or not). Shell builtins only: PATH has nothing else."""
    script = bin_dir / name
    script.write_text(
        f'#!/bin/sh\necho "{name} $*" >> "{log}"\n[ "$1" != info ] || exit {info_exit}\n'
    )
    script.chmod(0o755)


needs_make = pytest.mark.skipif(MAKE is None, reason="make is not installed")


DEBIAN_BUILD = "python3 -m image.build_debian --output dist/vulcan-image.tar"


@needs_make
def test_make_image_dry_run_shows_each_builder_and_the_fallback() -> None:
    result = run_make("-n", "image", "VERSION=1.2.3")
    assert result.returncode == 0, result.stderr
    script = result.stdout
    order = [script.index(word) for word in ("docker info", "podman build", DEBIAN_BUILD)]
    assert order == sorted(order), "docker first, then podman, then Debian's packages"
    assert "apt-get install" in script, "the Debian build's tools come from Debian"
    assert NO_BUILDER_LINE in script
    assert "-t vulcan:1.2.3 ." in script


@needs_make
def test_make_image_without_a_builder_says_so_in_one_line_and_fails(tmp_path: Path) -> None:
    """No image was made: `make image` must not look like it succeeded (a script running
    `make image && docker push` stops here)."""
    result = run_make("image", path=str(tmp_path))
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith(NO_BUILDER_LINE), result.stderr
    # The rest is make's own note that the recipe failed.
    assert all(line.startswith("make") and "Error 1" in line for line in lines[1:]), lines
    for builder in (*BUILDERS, *DEBIAN_TOOLS):
        assert builder in lines[0]
    assert "missing: mmdebstrap umoci)" in lines[0]
    assert "docker build -t vulcan:dev ." in lines[0], "says how to build elsewhere"


@needs_make
@pytest.mark.parametrize(
    ("present", "expected"),
    [
        (
            {"docker": 0, "podman": 0, "mmdebstrap": 0, "umoci": 0, "python3": 0},
            "docker build --build-arg VERSION=dev -t vulcan:dev .",
        ),
        # A docker client whose engine does not answer (as on the developers' machines).
        ({"docker": 1, "podman": 0}, "podman build --build-arg VERSION=dev -t vulcan:dev ."),
        (
            {"docker": 1, "mmdebstrap": 0, "umoci": 0, "python3": 0},
            f"{DEBIAN_BUILD} --build-arg VERSION=dev -t vulcan:dev .",
        ),
        # buildah alone builds from Debian's packages too: `buildah bud` would pull the
        # Dockerfile's base image from a registry.
        (
            {"buildah": 0, "mmdebstrap": 0, "umoci": 0, "python3": 0},
            f"{DEBIAN_BUILD} --build-arg VERSION=dev -t vulcan:dev .",
        ),
    ],
)
def test_make_image_builds_with_the_first_builder_that_can(
    tmp_path: Path, present: dict[str, int], expected: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    for name, info_exit in present.items():
        fake_builder(bin_dir, name, log, info_exit)
    result = run_make("image", path=str(bin_dir))
    assert result.returncode == 0, result.stderr
    assert NO_BUILDER_LINE not in result.stdout
    calls = log.read_text().splitlines()
    assert calls[-1] == expected
    assert [c for c in calls if "build" in c or "bud" in c] == [expected], "one build only"
    assert result.stdout.splitlines()[-1] == expected, "the build command is shown"


@needs_make
def test_make_image_installs_the_debian_build_tools_it_misses(tmp_path: Path) -> None:
    """With neither docker nor podman, mmdebstrap and umoci come from Debian (apt-get), then
    the Debian build runs; when apt-get cannot provide them, the one line names what misses."""
    bin_dir, later = tmp_path / "bin", tmp_path / "later"
    bin_dir.mkdir()
    later.mkdir()
    log = tmp_path / "calls"
    fake_builder(bin_dir, "python3", log)
    for tool in DEBIAN_TOOLS:
        fake_builder(later, tool, log)
    apt_get = bin_dir / "apt-get"
    apt_get.write_text(
        f'#!/bin/sh\necho "apt-get $*" >> "{log}"\n'
        f'[ "$1" != install ] || for t in "$@"; do [ ! -e "{later}/$t" ] || '
        f'/bin/cp "{later}/$t" "{bin_dir}/$t"; done\n'
    )
    apt_get.chmod(0o755)
    result = run_make("image", path=str(bin_dir))
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    assert "apt-get update -qq" in calls
    install = next(c for c in calls if c.startswith("apt-get") and " install " in c)
    assert install.split()[-2:] == list(DEBIAN_TOOLS)
    assert calls[-1] == f"{DEBIAN_BUILD} --build-arg VERSION=dev -t vulcan:dev ."
    assert result.stdout.startswith("installing Debian's mmdebstrap umoci")

    (bin_dir / "umoci").unlink()
    (later / "umoci").unlink()  # apt-get cannot install it now
    failed = run_make("image", path=str(bin_dir))
    assert failed.returncode != 0
    assert failed.stderr.startswith(NO_BUILDER_LINE), failed.stderr
    assert "missing: umoci)" in failed.stderr.splitlines()[0]


@needs_make
def test_make_image_tags_with_version(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    fake_builder(tmp_path, "podman", log)
    result = run_make("image", "VERSION=0.1.0", path=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == [
        "podman build --build-arg VERSION=0.1.0 -t vulcan:0.1.0 ."
    ]


# --- an actual build -----------------------------------------------------------------------


def container_builder() -> str | None:
    """The builder `make image` runs the Dockerfile with here (docker whose engine answers,
    podman), or None: then it builds from Debian's packages (tests/unit/test_image_run.py
    runs that image)."""
    if shutil.which("docker"):
        answers = subprocess.run(["docker", "info"], capture_output=True, timeout=60)
        if answers.returncode == 0:
            return "docker"
    return "podman" if shutil.which("podman") else None


@pytest.mark.skipif(
    os.environ.get("VULCAN_IMAGE_BUILD") != "1",
    reason="builds the image (minutes, needs the base image's registry): set VULCAN_IMAGE_BUILD=1",
)
@needs_make
def test_image_builds_and_runs_read_only_as_non_root() -> None:
    builder = container_builder()
    if builder is None:
        pytest.skip("no docker engine or podman: make image builds from Debian's packages here")
    tag = "vulcan-test"
    result = run_make("image", f"VERSION={tag}", timeout=3600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split()[0] == builder, result.stdout
    image = f"vulcan:{tag}"

    def run(*args: str, entrypoint: str | None = None) -> str:
        extra = ["--entrypoint", entrypoint] if entrypoint else []
        command = [builder, "run", "--rm", "--read-only", *extra, image, *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert "extender" in run()  # the default CMD: --help
    assert run("--version").startswith("vulcan ")
    probe = (
        "import os, sim.apiserver.protobuf as p, core.api.crds as c; "
        "print(os.getuid(), p._SCHEMA.is_file(), len(c.all_crds()))"
    )
    uid, schema, crds = run("-c", probe, entrypoint="python").split()
    assert uid != "0" and schema == "True" and int(crds) > 0
