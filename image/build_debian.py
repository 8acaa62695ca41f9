"""`make image` where neither docker nor podman can build: the Dockerfile's image made from
Debian's packages alone, written as an OCI image archive (OCI layout in a tar).

    python3 -m image.build_debian --output dist/vulcan-image.tar \
        --build-arg VERSION=dev -t vulcan:dev .

Two layers, as the Dockerfile's two stages give: a minimal Debian root filesystem with Python
(mmdebstrap, cached under build/image/ by its inputs), then vulcan's wheels installed into
/usr/local and the runtime stage's RUN lines run in it (chroot). The runtime stage's LABEL,
ENV, USER, WORKDIR, EXPOSE, ENTRYPOINT and CMD are read from the Dockerfile, so both builds
give the same image metadata. The host's pip downloads the wheels for the root filesystem's
Python (so the host's index and proxy settings apply); the root filesystem gets no pip. Needs
root (chroot, file ownership), mmdebstrap and umoci. SOURCE_DATE_EPOCH (default: the last
commit's date) fixes every timestamp, so equal inputs and mirror contents give equal layers."""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from pathlib import Path

from image.dockerfile import BuildError, Stage, runtime_stage

MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"  # Python 3.11, the version the test suite runs on
# python3 for vulcan; libstdc++6, which manylinux wheels (numpy, matplotlib, protobuf, ...)
# take from the system; passwd for the runtime stage's groupadd/useradd; CA certificates and
# /etc/services as the Python base images have them.
PACKAGES = ("python3", "libstdc++6", "ca-certificates", "netbase", "passwd")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What the Python base images set before the Dockerfile's own ENV (PATH as Docker's default).
BASE_ENV = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8"}
WHEELS_IN_ROOTFS = "/tmp/vulcan-wheels"


def run(*command: str | Path, env: dict[str, str] | None = None) -> str:
    """The command's output; its failure is a BuildError with the end of what it said."""
    done = subprocess.run([str(c) for c in command], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip().splitlines()[-20:]
        raise BuildError(f"{shlex.join(map(str, command[:3]))} ... failed:\n" + "\n".join(output))
    return done.stdout


def base_layer(cache: Path, suite: str, mirror: str, epoch: int) -> Path:
    """The Debian root filesystem as a layer tar, built once per set of inputs."""
    options = [
        "--variant=essential",
        f"--include={','.join(PACKAGES)}",
        # merged /usr without the usrmerge package (and the perl it pulls in)
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        # no device nodes (the runtime mounts /dev); no host resolv.conf/hostname
        "--skip=output/dev",
        '--customize-hook=rm -f "$1/etc/resolv.conf" "$1/etc/hostname"',
    ]
    key = hashlib.sha256(json.dumps([suite, mirror, options]).encode()).hexdigest()[:16]
    layer = cache / f"base-{suite}-{key}.tar"
    if layer.exists():
        print(f"==> Debian {suite} root filesystem: {layer} (delete it to refresh the packages)")
        return layer
    print(f"==> Debian {suite} root filesystem with {', '.join(PACKAGES)} (mmdebstrap)")
    partial = layer.with_suffix(".partial.tar")  # mmdebstrap picks the format by the name
    partial.unlink(missing_ok=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
    done = subprocess.run(["mmdebstrap", *options, suite, partial, mirror], env=env)
    if done.returncode != 0:
        raise BuildError(f"mmdebstrap failed (exit {done.returncode}) for {suite} from {mirror}")
    with tarfile.open(partial, "a") as tar:  # the runtime's /dev mount point
        dev = tarfile.TarInfo("./dev")
        dev.type, dev.mode, dev.mtime = tarfile.DIRTYPE, 0o755, epoch
        tar.addfile(dev)
    partial.rename(layer)
    return layer


def wheel_source(context: Path, into: Path) -> Path:
    """What vulcan's wheel is built from (pyproject.toml, the readme, the packages), copied so
    the build leaves nothing in the checkout."""
    project = tomllib.loads((context / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    source = into / "source"
    source.mkdir()
    for name in ("pyproject.toml", project["project"]["readme"]):
        shutil.copy2(context / name, source / name)
    for path in sorted(context.iterdir()):
        top = [p.split(".")[0] for p in patterns]
        if (path / "__init__.py").exists() and any(fnmatch.fnmatch(path.name, p) for p in top):
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(path, source / path.name, ignore=ignore)
    return source


def rootfs_python(rootfs: Path) -> tuple[str, str, int]:
    """(X.Y, machine, glibc minor) of the root filesystem's python3, for the wheels' tags."""
    probe = "import sys, platform; print(sys.version_info[0], sys.version_info[1], "
    probe += "platform.machine(), platform.libc_ver()[1])"
    major, minor, machine, glibc = run("chroot", rootfs, "python3", "-c", probe).split()
    return f"{major}.{minor}", machine, int(glibc.split(".")[1])


def download_wheels(context: Path, rootfs: Path, work: Path, epoch: int) -> tuple[Path, str]:
    """vulcan's wheel and its dependencies' (and pip's, to install them), for the root
    filesystem's Python; returns (the wheel directory, vulcan's requirement NAME==VERSION)."""
    pip = [sys.executable, "-m", "pip"]
    if subprocess.run([*pip, "--version"], capture_output=True).returncode != 0:
        raise BuildError(f"{sys.executable} has no pip; run this with a Python that has one")
    wheels = work / "wheels"
    print("==> vulcan's wheel and its dependencies' wheels (pip)")
    source = wheel_source(context, work)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}  # the wheel's zip timestamps
    run(*pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", wheels, source, env=env)
    (vulcan,) = wheels.glob("vulcan-*.whl")
    python, machine, glibc = rootfs_python(rootfs)
    # manylinux tags the root filesystem's glibc runs, newest first (pip does not widen them).
    platforms = [f"manylinux_2_{n}_{machine}" for n in range(glibc, 4, -1)]
    platforms.append(f"manylinux2014_{machine}")
    if machine in ("x86_64", "i686"):
        platforms += [f"manylinux2010_{machine}", f"manylinux1_{machine}"]
    tags = ["--python-version", python, "--implementation", "cp", "--only-binary=:all:"]
    for platform in platforms:
        tags += ["--platform", platform]
    run(*pip, "download", "--quiet", "--dest", wheels, *tags, vulcan, "pip")
    return wheels, "==".join(vulcan.name.split("-")[:2])


def install(rootfs: Path, wheels: Path, vulcan: str, epoch: int) -> None:
    """vulcan into /usr/local, as the Dockerfile's COPY of its build stage's prefix gives.
    Debian's python3 reads /usr/local/lib/python3.X/dist-packages: pip's default scheme for
    it, which PEP 668's marker guards; nothing of Debian's is in /usr/local to break."""
    inside = rootfs / WHEELS_IN_ROOTFS.lstrip("/")
    shutil.copytree(wheels, inside)
    (pip_wheel,) = inside.glob("pip-*.whl")
    env = {
        **BASE_ENV,
        "HOME": "/root",
        "SOURCE_DATE_EPOCH": str(epoch),  # hash-based .pyc files: reproducible
        "PIP_BREAK_SYSTEM_PACKAGES": "1",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_ROOT_USER_ACTION": "ignore",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    wheel_dir = f"{WHEELS_IN_ROOTFS}/"
    pip = ["python3", f"{wheel_dir}{pip_wheel.name}/pip"]  # pip runs from its wheel
    print("==> pip install vulcan into /usr/local (chroot)")
    # By name, not by the wheel's path: a path install records it (direct_url.json).
    install_command = [*pip, "install", "--quiet", "--no-index", "--find-links", wheel_dir, vulcan]
    run("chroot", rootfs, *install_command, env=env)
    shutil.rmtree(inside)


def clamp_mtimes(rootfs: Path, epoch: int) -> None:
    """Nothing newer than SOURCE_DATE_EPOCH (what `tar --clamp-mtime` does)."""
    for directory, dirs, files in os.walk(rootfs):
        for path in [directory, *(os.path.join(directory, n) for n in dirs + files)]:
            if os.lstat(path).st_mtime > epoch:
                os.utime(path, (epoch, epoch), follow_symlinks=False)


def write_archive(layout: Path, output: Path, epoch: int) -> None:
    """The OCI layout as one tar, entries sorted and stamped alike."""
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(layout.rglob("*")):
            info = tar.gettarinfo(path, str(path.relative_to(layout)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = epoch
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_dir():
                tar.addfile(info)
            else:
                with path.open("rb") as data:
                    tar.addfile(info, data)
    partial.rename(output)


def name_for_runtimes(layout: Path, tag: str) -> None:
    """containerd (kind, k3s) and docker load an OCI archive under io.containerd.image.name."""
    index_path = layout / "index.json"
    index = json.loads(index_path.read_text())
    full = tag if "/" in tag.partition(":")[0] else f"docker.io/library/{tag}"
    for manifest in index["manifests"]:
        manifest.setdefault("annotations", {})["io.containerd.image.name"] = full
    index_path.write_text(json.dumps(index, separators=(",", ":")))


def umoci(*args: str | Path) -> None:
    run("umoci", *args)


def image_config(stage: Stage) -> list[str]:
    """umoci config's options for the runtime stage's metadata."""
    config = [f"--config.user={stage.user}", f"--config.workingdir={stage.workdir}"]
    config += [f"--config.env={k}={v}" for k, v in {**BASE_ENV, **stage.env}.items()]
    config += [f"--config.entrypoint={word}" for word in stage.entrypoint]
    config += [f"--config.cmd={word}" for word in stage.cmd]
    config += [f"--config.exposedports={port}" for port in stage.ports]
    return config + [f"--config.label={k}={v}" for k, v in stage.labels.items()]


def vulcan_layer(stage: Stage, context: Path, rootfs: Path, work: Path, epoch: int) -> None:
    """The runtime stage's file changes in the unpacked root filesystem, in its order."""
    for kind, what, env in stage.steps:
        if kind == "COPY":
            wheels, vulcan = download_wheels(context, rootfs, work, epoch)
            install(rootfs, wheels, vulcan, epoch)
        else:
            print(f"==> RUN {what}")
            run_env = {**BASE_ENV, **env, "SOURCE_DATE_EPOCH": str(epoch)}
            print(run("chroot", rootfs, "/bin/sh", "-c", what, env=run_env), end="")
    clamp_mtimes(rootfs, epoch)


def build(args: argparse.Namespace) -> None:
    started = time.monotonic()
    context = args.context.resolve()
    # The label org.opencontainers.image.base.name names what the image is made from.
    build_args = {"BASE_IMAGE": f"debian:{args.suite}", **dict(args.build_arg)}
    stage = runtime_stage(context / "Dockerfile", build_args)
    if os.geteuid() != 0:
        raise BuildError("the Debian build needs root (chroot, files owned by root and vulcan)")
    for tool in ("mmdebstrap", "umoci", "chroot"):
        if shutil.which(tool) is None:
            raise BuildError(f"{tool} not found (Debian package {tool}, or coreutils for chroot)")
    epoch = args.epoch
    created = datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    args.cache.mkdir(parents=True, exist_ok=True)
    base = base_layer(args.cache, args.suite, args.mirror, epoch)
    with tempfile.TemporaryDirectory(dir=args.cache, prefix="work-") as tmp:
        work = Path(tmp)
        layout, bundle = work / "oci", work / "bundle"
        image = ["--image", f"{layout}:{args.tag}", "--history.created", created]
        umoci("init", "--layout", layout)
        umoci("new", "--image", f"{layout}:{args.tag}")
        base_by = f"--history.created_by=mmdebstrap {args.suite}: {' '.join(PACKAGES)}"
        umoci("raw", "add-layer", *image, base_by, base)
        umoci("unpack", "--image", f"{layout}:{args.tag}", bundle)
        vulcan_layer(stage, context, bundle / "rootfs", work, epoch)
        print("==> the vulcan layer (umoci repack)")
        umoci("repack", *image, "--history.created_by=pip install vulcan; RUN", bundle)
        metadata_by = "--history.created_by=the Dockerfile's runtime stage metadata"
        umoci("config", *image, "--created", created, metadata_by, *image_config(stage))
        umoci("gc", "--layout", layout)
        name_for_runtimes(layout, args.tag)
        write_archive(layout, args.output, epoch)
        unpacked = sum(
            os.lstat(os.path.join(d, n)).st_size
            for d, _, files in os.walk(bundle / "rootfs")
            for n in files
        )
    size = args.output.stat().st_size
    print(
        f"{args.output}: {size / 1e6:.1f} MB, OCI image {args.tag} "
        f"({unpacked / 1e6:.1f} MB unpacked), built in {time.monotonic() - started:.0f} s"
    )


def _build_arg(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--build-arg {text!r}: use KEY=VALUE")
    return key, value


def _default_epoch(context: Path) -> int:
    if "SOURCE_DATE_EPOCH" in os.environ:
        return int(os.environ["SOURCE_DATE_EPOCH"])
    git = ["git", "-C", str(context), "log", "-1", "--format=%ct"]
    done = subprocess.run(git, capture_output=True, text=True)
    return int(done.stdout) if done.returncode == 0 and done.stdout.strip() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m image.build_debian", description=__doc__)
    parser.add_argument("context", type=Path, help="the checkout (holds the Dockerfile)")
    parser.add_argument("-t", "--tag", default="vulcan:dev", help="the image's name")
    parser.add_argument("--output", type=Path, default=Path("dist/vulcan-image.tar"))
    parser.add_argument("--build-arg", type=_build_arg, action="append", default=[])
    parser.add_argument("--suite", default=SUITE, help=f"Debian suite (default {SUITE})")
    parser.add_argument("--mirror", default=MIRROR)
    parser.add_argument("--cache", type=Path, default=Path("build/image"))
    parser.add_argument("--epoch", type=int, default=None, help="SOURCE_DATE_EPOCH")
    args = parser.parse_args(argv)
    if args.epoch is None:
        args.epoch = _default_epoch(args.context)
    try:
        build(args)
    except BuildError as exc:
        print(f"make image: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
