"""Where the real control plane's binaries come from, and proof that they are the right ones.

The directory is `--kube-assets DIR`, else `KUBEBUILDER_ASSETS` (controller-runtime envtest's
convention), else `VULCAN_KUBE_ASSETS`. Each of etcd, kube-apiserver, kube-controller-manager
and kube-scheduler is taken from it unpacked (`NAME`) or xz-compressed (`NAME.xz`). A
`SHA256SUMS` beside them (of the unpacked binaries, `sha256sum`'s format) is checked when present
and required for `.xz` files: those are unpacked once into
`$XDG_CACHE_HOME/vulcan/kube-assets/<sha256 of SHA256SUMS>/` (default `~/.cache`), through a
temporary file renamed into place only when its sum is right, so two processes unpacking at once
never run a half-written binary. A cached binary changed since it was checked is unpacked again.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
FLAG = "--kube-assets"
ENVTEST_VAR = "KUBEBUILDER_ASSETS"
OUR_VAR = "VULCAN_KUBE_ASSETS"
SUMS = "SHA256SUMS"
NOT_FOUND = (
    f"no Kubernetes binaries: pass {FLAG} DIR or set {ENVTEST_VAR} or {OUR_VAR} to a directory "
    f"holding {', '.join(BINARIES)} (unpacked, or as NAME.xz with a {SUMS})"
)


class AssetsError(Exception):
    """The binaries are missing or not the ones their checksums name (one line, which file)."""


@dataclass(frozen=True)
class KubeAssets:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vulcan" / "kube-assets"


def clear_cache() -> None:
    """Forget every unpacked set (for a user whose cache went bad)."""
    shutil.rmtree(cache_root(), ignore_errors=True)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _read_sums(path: Path) -> dict[str, str]:
    sums: dict[str, str] = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            sums[parts[1].lstrip("*")] = parts[0].lower()
    return sums


def _stamp(path: Path) -> str:
    """What tells a checked file from a changed one without reading it again."""
    stat = path.stat()
    return f"{stat.st_size} {stat.st_mtime_ns} {stat.st_ino}"


def _unpack(source: Path, target: Path, expected: str, where: str) -> None:
    """`source` (.xz) unpacked to `target`, executable, only if its SHA-256 is `expected`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, lzma.open(source) as packed:
            try:
                while chunk := packed.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            except (lzma.LZMAError, EOFError) as exc:
                raise AssetsError(
                    f"{where}: {source} is corrupt ({exc}); {SUMS} expects {target.name} "
                    f"with SHA-256 {expected}"
                ) from None
        if digest.hexdigest() != expected:
            raise AssetsError(
                f"{where}: {source} unpacks to SHA-256 {digest.hexdigest()}, "
                f"but {SUMS} says {expected}"
            )
        os.chmod(temporary, 0o755)
        stamp = _stamp(Path(temporary))
        os.replace(temporary, target)  # atomic: a racing process sees all of it or nothing
        stamp_file = target.with_name(f".{target.name}.checked")
        stamp_file.write_text(stamp)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _cached(directory: Path, name: str, sums: dict[str, str], where: str) -> Path:
    target = cache_root() / sha256(directory / SUMS) / name
    stamp_file = target.with_name(f".{name}.checked")
    try:
        checked = stamp_file.read_text() == _stamp(target)
    except OSError:
        checked = False
    if not checked:
        _unpack(directory / f"{name}.xz", target, sums[name], where)
    return target


def _binary(directory: Path, name: str, sums: dict[str, str], where: str) -> Path:
    path = directory / name
    if name in sums:
        actual = sha256(path)
        if actual != sums[name]:
            raise AssetsError(f"{where}: {path} has SHA-256 {actual}, but {SUMS} says {sums[name]}")
    if not os.access(path, os.X_OK):
        raise AssetsError(f"{where}: {path} is not executable")
    return path


def assets_in(directory: Path, where: str) -> KubeAssets:
    """The binaries of `directory` (named `where` in errors: the flag or variable it came from),
    each checked against SHA256SUMS when it lists it."""
    if not directory.is_dir():
        raise AssetsError(f"{where}: {directory} is not a directory")
    sums_file = directory / SUMS
    sums = _read_sums(sums_file) if sums_file.is_file() else {}
    found: list[Path] = []
    missing: list[str] = []
    for name in BINARIES:
        if (directory / name).is_file():
            found.append(_binary(directory, name, sums, where))
        elif (directory / f"{name}.xz").is_file():
            if name not in sums:
                raise AssetsError(
                    f"{where}: {directory / (name + '.xz')} has no line in {sums_file}, "
                    "so what it unpacks to cannot be checked"
                )
            found.append(_cached(directory, name, sums, where))
        else:
            missing.append(name)
    if missing:
        raise AssetsError(
            f"{where}: {directory} lacks {', '.join(missing)} (as NAME or NAME.xz; "
            f"wanted: {', '.join(BINARIES)})"
        )
    return KubeAssets(*found)


def find_assets(kube_assets: str | Path | None = None) -> KubeAssets:
    """The binaries from `kube_assets` (the flag), else the variables; AssetsError says why not."""
    if kube_assets:
        return assets_in(Path(kube_assets), FLAG)
    for variable in (ENVTEST_VAR, OUR_VAR):
        value = os.environ.get(variable)
        if value:
            return assets_in(Path(value), variable)
    raise AssetsError(NOT_FOUND)
