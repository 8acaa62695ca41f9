"""The image `make image` builds from Debian's packages, run: dist/vulcan-image.tar unpacked
(its blobs checked against their digests) and vulcan run inside its root filesystem as the
image's user with that filesystem read-only, as the Deployments run it (tests/image_rootfs.py).

Uses the archive a `make image` left in dist/; VULCAN_IMAGE_BUILD=1 builds it first (minutes).
Skips, saying why, without an archive, or where images cannot be run (not root, no unshare)."""

from __future__ import annotations

import json
import os
import stat
import tarfile
import tempfile
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import REPO
from tests.image_rootfs import Image, can_run_images, run, unpack
from tests.unit.test_image import MAKE, container_builder, final, key_values, run_make

ARCHIVE = REPO / "dist" / "vulcan-image.tar"
MANIFESTS = REPO / "manifests"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def archive() -> Path:
    if os.environ.get("VULCAN_IMAGE_BUILD") == "1":
        builder = container_builder()
        if builder is not None:
            pytest.skip(f"make image builds with {builder} here (test_image.py runs that image)")
        if MAKE is None:
            pytest.skip("make is not installed")
        result = run_make("image", timeout=3600)
        assert result.returncode == 0, result.stdout + result.stderr
    if not ARCHIVE.exists():
        pytest.skip(
            f"no {ARCHIVE.relative_to(REPO)}: run `make image` first, or set "
            "VULCAN_IMAGE_BUILD=1 to build it here (minutes)"
        )
    return ARCHIVE


@pytest.fixture(scope="module")
def image(archive: Path) -> Iterator[Image]:
    reason = can_run_images()
    if reason:
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="vulcan-image-") as tmp:
        yield unpack(archive, Path(tmp) / "rootfs")


def in_image(image: Image, *argv: str) -> str:
    done = run(image, argv)
    rebuilt = f"(an old {ARCHIVE.relative_to(REPO)}? rebuild it with `make image`)"
    assert done.returncode == 0, f"{argv} exited {done.returncode} {rebuilt}:\n{done.stderr}"
    return done.stdout


# --- what the manifests run --------------------------------------------------------------


def vulcan_containers(doc: Any) -> list[dict[str, Any]]:
    """The containers of a workload (or a patch of one) that run vulcan: its image, or no
    image (a patch of one of vulcan's), and a subcommand first in their arguments."""
    if not isinstance(doc, dict):
        return []
    pod = (doc.get("spec") or {}).get("template", {}).get("spec") or {}
    return [
        container
        for container in pod.get("containers") or []
        if str(container.get("image", "vulcan:")).startswith("vulcan:")
        and container.get("args")
        and not str(container["args"][0]).startswith("-")
    ]


def base_deployments() -> dict[str, dict[str, Any]]:
    """The Deployments of manifests/base, as rendered into manifests/vulcan.yaml (a test keeps
    the two equal), by name."""
    docs = yaml.safe_load_all((MANIFESTS / "vulcan.yaml").read_text())
    return {d["metadata"]["name"]: d for d in docs if d and d["kind"] == "Deployment"}


def flags_passed() -> dict[str, set[str]]:
    """Per subcommand, every flag the manifests pass to it: the base, the components and the
    overlays, with the arguments their patches add."""
    flags: dict[str, set[str]] = defaultdict(set)
    subcommand_of: dict[str, str] = {}
    added: list[tuple[str, str]] = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for container in vulcan_containers(doc):
                subcommand, *args = container["args"]
                subcommand_of[doc["metadata"]["name"]] = subcommand
                flags[subcommand].update(a.partition("=")[0] for a in args if a.startswith("--"))
            if isinstance(doc, dict) and doc.get("kind") == "Kustomization":
                for patch in doc.get("patches") or []:
                    ops = yaml.safe_load(patch.get("patch", "")) or []
                    for op in ops if isinstance(ops, list) else []:
                        if str(op.get("path", "")).endswith("/args/-"):
                            added.append((patch["target"]["name"], str(op["value"])))
    for name, value in added:
        flags[subcommand_of[name]].add(value.partition("=")[0])
    return dict(flags)


def test_the_manifests_pass_flags_to_the_extender_and_the_controllers() -> None:
    flags = flags_passed()
    assert {"--port", "--config", "--scheduler-bind-timeout"} <= flags["extender"]
    assert "--bind-marker" in flags["extender"], "an overlay's patch"
    assert "--tls-cert-file" in flags["extender"], "the webhook-serving component"
    assert "--port" in flags["controllers"]


# --- the image ---------------------------------------------------------------------------


def image_config(archive: Path) -> dict[str, Any]:
    with tarfile.open(archive) as tar:

        def read(name: str) -> Any:
            member = tar.extractfile(name)
            assert member is not None, f"{archive} has no {name}"
            return json.loads(member.read())

        (descriptor,) = read("index.json")["manifests"]
        manifest = read(f"blobs/sha256/{descriptor['digest'].partition(':')[2]}")
        return read(f"blobs/sha256/{manifest['config']['digest'].partition(':')[2]}")


def test_the_image_has_the_dockerfiles_user_entrypoint_env_ports_and_labels(
    archive: Path,
) -> None:
    config = image_config(archive)["config"]
    assert config["User"] == final().last("USER")
    assert config["Entrypoint"] == json.loads(final().last("ENTRYPOINT"))
    assert config["Cmd"] == json.loads(final().last("CMD"))
    assert config["WorkingDir"] == final().last("WORKDIR")
    env = dict(item.split("=", 1) for item in config["Env"])
    for args in final().all("ENV"):
        for key, value in key_values(args).items():
            assert env.get(key) == value, key
    assert "/usr/local/bin" in env["PATH"].split(":")
    exposed = {f"{p}/tcp" for args in final().all("EXPOSE") for p in args.split()}
    assert set(config["ExposedPorts"]) == exposed
    labels: dict[str, str] = {}
    for args in final().all("LABEL"):
        labels.update(key_values(args))
    assert set(config["Labels"]) == set(labels)
    for key in ("title", "description", "licenses"):
        name = f"org.opencontainers.image.{key}"
        assert config["Labels"][name] == labels[name], name


def test_vulcan_runs_as_the_images_user_on_a_read_only_root(image: Image) -> None:
    assert in_image(image, "vulcan", "--version") == f"vulcan {VERSION}\n"
    assert "extender" in run(image, [*image.config["Entrypoint"], *image.config["Cmd"]]).stdout
    probe = (
        "import errno, os, sim.apiserver.protobuf as p, core.api.crds as c\n"
        "def write(path):\n"
        "    try:\n"
        "        open(path, 'w').close()\n"
        "        return 'written'\n"
        "    except OSError as exc:\n"
        "        return errno.errorcode[exc.errno]\n"
        "print(os.getuid(), os.getgid(), p._SCHEMA.is_file(), len(c.all_crds()),\n"
        "      write(os.path.expanduser('~/probe')), write('/tmp/probe'))"
    )
    uid, gid, schema, crds, home, tmp = in_image(image, "python3", "-c", probe).split()
    assert f"{uid}:{gid}" == image.config["User"] != "0:0"
    assert schema == "True" and int(crds) > 0, "the wheel's data files are installed"
    assert home == "EROFS", "the root filesystem is read-only, the home directory too"
    assert tmp == "written", "/tmp is the Deployments' emptyDir"


def test_every_shared_library_in_the_image_finds_what_it_links(image: Image) -> None:
    """Wheels take some libraries from the system (libstdc++ for numpy, matplotlib,
    protobuf): --help imports none of them, the extender and the controllers do."""
    scan = (
        "find /usr/local/lib /usr/lib -name '*.so*' -type f | while read -r f; do "
        'ldd "$f" 2>/dev/null | sed -n "s|^[[:space:]]*\\(.*\\) => not found|$f: \\1|p"; done'
    )
    assert in_image(image, "/bin/sh", "-c", scan) == ""
    modules = "extender.main, vulcan.controllers, numpy, matplotlib.pyplot"
    probe = f"import matplotlib; matplotlib.use('Agg'); import {modules}; print('imported')"
    assert in_image(image, "python3", "-c", probe) == "imported\n"


@pytest.mark.parametrize("subcommand", ["extender", "controllers", "webhook-certs"])
def test_help_in_the_image_names_every_flag_the_manifests_pass(
    image: Image, subcommand: str
) -> None:
    usage = in_image(image, "vulcan", subcommand, "--help")
    assert usage.startswith(f"usage: vulcan {subcommand}"), usage[:200]
    flags = flags_passed()[subcommand]
    missing = sorted(flag for flag in flags if flag not in usage)
    assert not missing, f"vulcan {subcommand} --help in the image does not know {missing}"


def test_the_deployments_exact_command_and_arguments_parse_in_the_image(image: Image) -> None:
    """Each base Deployment's command (the image's ENTRYPOINT when it names none) exists in the
    image, executable by its user; its exact arguments parse with the image's vulcan."""
    deployments = base_deployments()
    assert set(deployments) == {"vulcan-extender", "vulcan-controllers"}
    arg_lists = []
    for name, deployment in deployments.items():
        (container,) = vulcan_containers(deployment)
        command = container.get("command") or image.config["Entrypoint"]
        found = image.resolve(command[0])
        assert found is not None, f"{name}: {command[0]} is not on the image's PATH"
        mode = found.stat().st_mode
        assert stat.S_ISREG(mode) and mode & stat.S_IXOTH, f"{name}: {found} is not executable"
        interpreter = found.read_bytes()[:200].partition(b"\n")[0]
        if interpreter.startswith(b"#!"):
            program = interpreter[2:].decode().split()[0]
            assert image.inside(program) is not None, f"{name}: no {program} in the image"
        assert command == ["vulcan"], f"{name}: the parse below runs vulcan's parser"
        arg_lists.append(container["args"])
    parse = (
        "import json, sys\n"
        "from vulcan.cli import build_parser\n"
        "for args in json.loads(sys.argv[1]):\n"
        "    print(build_parser().parse_args(args).command)"
    )
    parsed = in_image(image, "python3", "-c", parse, json.dumps(arg_lists)).split()
    assert parsed == [args[0] for args in arg_lists]
