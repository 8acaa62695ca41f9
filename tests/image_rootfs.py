"""An OCI image archive (`make image`'s dist/vulcan-image.tar) unpacked into a root filesystem,
and commands run inside it as a container runtime would: the image's user, environment and
working directory, the root filesystem read-only, a fresh /tmp (the Deployments' emptyDir),
/proc and a minimal /dev. Root only (chroot, mounts in a private mount namespace made by
util-linux's unshare, so nothing stays mounted when the command ends); the host's network."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

# Runs in the private mount namespace, replaced in the end (exec) by the command, so a signal
# to the process reaches it: $1 the root filesystem, $2 the user, $3 the working directory,
# $4 the extra read-only bind mounts (HOST=MOUNTPOINT ..., mount points made beforehand in
# the root filesystem, as a runtime makes them), then KEY=VALUE environment and the command.
# /dev is a tmpfs with the device nodes runc gives a container.
_SCRIPT = r"""
root=$1; user=$2; workdir=$3; binds=$4; shift 4
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount -t tmpfs -o mode=755 tmpfs "$root/dev"
for dev in null zero full random urandom tty; do
    : > "$root/dev/$dev"; mount --bind "/dev/$dev" "$root/dev/$dev"
done
ln -s /proc/self/fd "$root/dev/fd"
for bind in $binds; do
    mount --bind "${bind%%=*}" "${bind#*=}"; mount -o remount,bind,ro "${bind#*=}"
done
mount -o remount,bind,ro "$root"
exec chroot --userspec="$user" --groups= "$root" /usr/bin/env -i -C "$workdir" "$@"
"""


@dataclass(frozen=True)
class Image:
    """An unpacked image: its root filesystem and its configuration (the OCI config's
    `config` object: User, Env, Entrypoint, Cmd, WorkingDir, Labels, ExposedPorts)."""

    rootfs: Path
    config: dict[str, Any]
    layers: int

    @property
    def env(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.config.get("Env", []))

    def resolve(self, command: str) -> Path | None:
        """Where the image's PATH finds `command`, as a host path inside the root filesystem
        (symlinks followed within it), or None."""
        candidates = [command] if "/" in command else [f"{d}/{command}" for d in self.path_dirs()]
        for candidate in candidates:
            path = self.inside(candidate)
            if path is not None and path.is_file():
                return path
        return None

    def path_dirs(self) -> list[str]:
        return self.env.get("PATH", "").split(":")

    def inside(self, path: str) -> Path | None:
        """`path` of the image as a host path, its symlinks followed inside the root
        filesystem (an absolute link points into the image, not at the host), or None."""
        found = _walk(self.rootfs, path, make=None)
        return found if found.exists() else None


def _walk(rootfs: Path, path: str, make: str | None) -> Path:
    """The host path of the image's `path`, symlinks followed inside `rootfs`; with `make`
    ("directory" or "file"), what is missing on the way is made (directories, then the last
    part as `make` says)."""
    current, parts, hops = rootfs, [p for p in path.split("/") if p], 0
    while parts:
        part = parts.pop(0)
        candidate = current / part
        if part == "..":
            current = current.parent if current != rootfs else current
        elif candidate.is_symlink():
            hops += 1
            assert hops <= 40, f"{path}: too many symlinks in the image"
            link = os.readlink(candidate)
            current = rootfs if link.startswith("/") else current
            parts = [p for p in link.split("/") if p] + parts
        else:
            if make and not candidate.exists():
                if parts or make == "directory":
                    candidate.mkdir()
                else:
                    candidate.touch()
            current = candidate
    return current


def mount_point(image: Image, target: str, directory: bool) -> Path:
    """The host path of `target` in the image, made where it is missing (a directory, or an
    empty file): /var/run -> /run must lead a mount onto the image's /run, not the host's."""
    return _walk(image.rootfs, target, make="directory" if directory else "file")


def _blob(archive: tarfile.TarFile, digest: str) -> IO[bytes]:
    algorithm, _, hexdigest = digest.partition(":")
    member = archive.extractfile(f"blobs/{algorithm}/{hexdigest}")
    assert member is not None, f"the archive lacks the blob {digest}"
    return member


def _checked(archive: tarfile.TarFile, digest: str) -> bytes:
    data = _blob(archive, digest).read()
    assert f"sha256:{hashlib.sha256(data).hexdigest()}" == digest, f"blob {digest} is corrupt"
    return data


def _apply_layer(stream: IO[bytes], rootfs: Path) -> None:
    """One layer tar onto the root filesystem, its whiteouts (.wh.NAME, .wh..wh..opq) as
    deletions (the OCI image spec's changeset rules)."""
    trusted = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
    with tarfile.open(fileobj=stream, mode="r|") as layer:
        for member in layer:
            directory, _, name = member.name.rstrip("/").rpartition("/")
            if name == ".wh..wh..opq":
                for child in (rootfs / directory).iterdir():
                    _remove(child)
            elif name.startswith(".wh."):
                _remove(rootfs / directory / name.removeprefix(".wh."))
            else:
                target = rootfs / member.name
                if (target.exists() and not target.is_dir()) or target.is_symlink():
                    target.unlink()
                layer.extract(member, rootfs, numeric_owner=True, **trusted)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def unpack(archive_path: Path, rootfs: Path) -> Image:
    """The image of an OCI image archive (one manifest) applied layer by layer into `rootfs`,
    every blob checked against its digest."""
    rootfs.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive_path) as archive:
        index = json.loads(archive.extractfile("index.json").read())  # type: ignore[union-attr]
        (descriptor,) = index["manifests"]
        manifest = json.loads(_checked(archive, descriptor["digest"]))
        config = json.loads(_checked(archive, manifest["config"]["digest"]))
        for layer in manifest["layers"]:
            hasher = hashlib.sha256()
            blob = _blob(archive, layer["digest"])
            gzipped = layer["mediaType"].endswith("+gzip")
            stream = _Hashing(blob, hasher)
            _apply_layer(gzip.GzipFile(fileobj=stream) if gzipped else stream, rootfs)
            stream.drain()
            assert f"sha256:{hasher.hexdigest()}" == layer["digest"], f"layer {layer} is corrupt"
    return Image(rootfs=rootfs, config=config["config"], layers=len(manifest["layers"]))


class _Hashing:
    """A reader that hashes what passes through it."""

    def __init__(self, raw: IO[bytes], hasher: Any) -> None:
        self.raw, self.hasher = raw, hasher

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.hasher.update(data)
        return data

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


def command(
    image: Image,
    argv: Sequence[str],
    *,
    binds: dict[Path, str] | None = None,
    env: dict[str, str] | None = None,
) -> list[str]:
    """The host command that runs `argv` in the image as its user with the root filesystem
    read-only (its own process: signals reach it); `binds` maps host paths onto image paths
    (read-only), `env` adds to the image's environment."""
    mounts = [
        f"{host}={mount_point(image, target, host.is_dir())}"
        for host, target in (binds or {}).items()
    ]
    assert not any(" " in m for m in mounts), f"bind mount paths with spaces: {mounts}"
    user = image.config.get("User") or "0:0"
    if ":" not in user:
        user = f"{user}:{user}"
    environment = [f"{k}={v}" for k, v in {**image.env, **(env or {})}.items()]
    workdir = image.config.get("WorkingDir") or "/"
    namespace = ["unshare", "--mount", "--propagation", "private", "--"]
    script = ["/bin/sh", "-euc", _SCRIPT, "sh", str(image.rootfs), user, workdir]
    return [*namespace, *script, " ".join(mounts), *environment, *argv]


def run(
    image: Image, argv: Sequence[str], timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """`argv` run to its end in the image (see `command`)."""
    host = command(image, argv, **kwargs)
    return subprocess.run(host, capture_output=True, text=True, timeout=timeout)


def can_run_images() -> str | None:
    """Why images cannot be run here, or None when they can."""
    if os.geteuid() != 0:
        return "running the image's root filesystem needs root (chroot, mounts)"
    missing = [tool for tool in ("unshare", "mount", "chroot") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found (util-linux, coreutils)"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"unshare --mount is refused here: {probe.stderr.strip()}"
    return None
