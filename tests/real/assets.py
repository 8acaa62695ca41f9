"""Where the real tier finds its Kubernetes binaries.

Two conventions, the first that is set wins:
- `KUBEBUILDER_ASSETS` (controller-runtime envtest's): a directory holding the unpacked binaries
  `etcd`, `kube-apiserver` (and, for this tier, `kube-controller-manager`, `kube-scheduler`);
- `VULCAN_KUBE_ASSETS` (ours): a directory holding them xz-compressed (`etcd.xz`, ...) with a
  `SHA256SUMS` of the unpacked binaries, as CI's kube-assets folder does. They are unpacked once
  into `$XDG_CACHE_HOME/vulcan/kube-assets/<sha256 of SHA256SUMS>/` (default `~/.cache`) and
  checked against their sums; two processes unpacking at once each write a temporary file and
  rename it into place, so neither ever runs a half-written binary.
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
ENVTEST_VAR = "KUBEBUILDER_ASSETS"
OUR_VAR = "VULCAN_KUBE_ASSETS"


class AssetsMissing(Exception):
    """Why the real tier cannot run here (pytest prints it as the skip reason)."""


@dataclass(frozen=True)
class KubeAssets:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vulcan" / "kube-assets"


def _sha256(path: Path) -> str:
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


def _from_dir(directory: Path, variable: str) -> KubeAssets:
    missing = [name for name in BINARIES if not os.access(directory / name, os.X_OK)]
    if missing:
        raise AssetsMissing(
            f"{variable}={directory} lacks executable {', '.join(missing)} "
            f"(the real tier needs {', '.join(BINARIES)})"
        )
    return KubeAssets(*(directory / name for name in BINARIES))


def _unpack(source: Path, target: Path, expected: str) -> None:
    """`source` (.xz) unpacked to `target`, executable, only if its SHA-256 is `expected`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, lzma.open(source) as packed:
            while chunk := packed.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != expected:
            raise AssetsMissing(
                f"{source} unpacks to SHA-256 {digest.hexdigest()}, not {expected} (SHA256SUMS)"
            )
        os.chmod(temporary, 0o755)
        os.replace(temporary, target)  # atomic: a racing process sees all of it or nothing
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _from_xz_dir(directory: Path) -> KubeAssets:
    sums_file = directory / "SHA256SUMS"
    if not sums_file.is_file():
        raise AssetsMissing(f"{OUR_VAR}={directory} has no SHA256SUMS")
    sums = _read_sums(sums_file)
    missing = [n for n in BINARIES if n not in sums or not (directory / f"{n}.xz").is_file()]
    if missing:
        raise AssetsMissing(
            f"{OUR_VAR}={directory} lacks {', '.join(f'{n}.xz' for n in missing)} "
            "or their lines in SHA256SUMS"
        )
    cache = _cache_root() / _sha256(sums_file)
    for name in BINARIES:
        target = cache / name
        # Size and mode tell a finished unpack from nothing; the sum was checked when it was
        # renamed into place, so it is not read again on every run.
        if not os.access(target, os.X_OK):
            _unpack(directory / f"{name}.xz", target, sums[name])
    return KubeAssets(*(cache / name for name in BINARIES))


def find_assets() -> KubeAssets:
    """The binaries, or AssetsMissing saying which variable to set."""
    envtest = os.environ.get(ENVTEST_VAR)
    if envtest:
        return _from_dir(Path(envtest), ENVTEST_VAR)
    ours = os.environ.get(OUR_VAR)
    if ours:
        return _from_xz_dir(Path(ours))
    raise AssetsMissing(
        f"real Kubernetes tier: set {ENVTEST_VAR} to a directory of etcd, kube-apiserver, "
        f"kube-controller-manager and kube-scheduler binaries, or {OUR_VAR} to a directory of "
        "their .xz files with SHA256SUMS (as CI's kube-assets folder)"
    )


def clear_cache() -> None:
    """Forget every unpacked set (for a user whose cache went bad)."""
    shutil.rmtree(_cache_root(), ignore_errors=True)
