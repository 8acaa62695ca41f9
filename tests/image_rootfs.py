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

# Device nodes bound into the command's /dev (a tmpfs), as runc gives a container.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

# Runs in the private mount namespace: $1 the root filesystem, $2 the user, $3 the working
# directory, then KEY=VALUE environment and the command. Extra read-only bind mounts
# (HOST=TARGET) come from VULCAN_BINDS; their mount points are made before the root
# filesystem turns read-only, as a runtime makes them.
_SCRIPT = r"""
root=$1; user=$2; workdir=$3; shift 3
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount -t tmpfs -o mode=755 tmpfs "$root/dev"
for dev in $DEVICES; do
    : > "$root/dev/$dev"; mount --bind "/dev/$dev" "$root/dev/$dev"
done
ln -s /proc/self/fd "$root/dev/fd"
for bind in $VULCAN_BINDS; do
    host=${bind%%=*}; target=$root${bind#*=}
    if [ -d "$host" ]; then mkdir -p "$target"; else mkdir -p "${target%/*}"; : > "$target"; fi
    mount --bind "$host" "$target"; mount -o remount,bind,ro "$target"
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
        current, parts, hops = self.rootfs, path.split("/"), 0
        while parts:
            part = parts.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                current = current.parent if current != self.rootfs else current
                continue
            candidate = current / part
            if candidate.is_symlink():
                hops += 1
                if hops > 40:
                    return None
                target = os.readlink(candidate)
                current = self.rootfs if target.startswith("/") else current
                parts = target.split("/") + parts
                continue
            current = candidate
        return current if current.exists() else None


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
) -> tuple[list[str], dict[str, str]]:
    """(the host command, its environment) that runs `argv` in the image as its user with the
    root filesystem read-only; `binds` maps host paths onto image paths (read-only)."""
    environment = {**image.env, **(env or {})}
    user = image.config.get("User") or "0:0"
    if ":" not in user:
        user = f"{user}:{user}"
    namespace = ["unshare", "--mount", "--propagation", "private", "--fork", "--"]
    script = ["/bin/sh", "-euc", _SCRIPT, "sh", str(image.rootfs), user]
    inside = [image.config.get("WorkingDir") or "/", *(f"{k}={v}" for k, v in environment.items())]
    host = [*namespace, *script, *inside, *argv]
    host_env = {
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "DEVICES": " ".join(DEVICES),
        "VULCAN_BINDS": " ".join(f"{h}={t}" for h, t in (binds or {}).items()),
    }
    return host, host_env


def run(
    image: Image, argv: Sequence[str], timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """`argv` run to its end in the image (see `command`)."""
    host, host_env = command(image, argv, **kwargs)
    return subprocess.run(host, env=host_env, capture_output=True, text=True, timeout=timeout)


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
