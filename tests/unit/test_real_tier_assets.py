"""How the real tier finds its binaries (tests/real/assets.py): KUBEBUILDER_ASSETS (unpacked,
envtest's convention) wins over VULCAN_KUBE_ASSETS (.xz + SHA256SUMS, unpacked once into the
cache and checked); anything missing or wrong is a reason to skip, naming what."""

from __future__ import annotations

import hashlib
import lzma
import os
from pathlib import Path

import pytest

from tests.real.assets import BINARIES, AssetsMissing, find_assets


def packed_dir(tmp_path: Path, *, corrupt: str | None = None) -> Path:
    source = tmp_path / "assets"
    source.mkdir()
    sums = []
    for name in BINARIES:
        body = f"#!/bin/sh\necho {name}\n".encode()
        (source / f"{name}.xz").write_bytes(lzma.compress(body))
        digest = hashlib.sha256(b"other" if name == corrupt else body).hexdigest()
        sums.append(f"{digest}  {name}")
    (source / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    return source


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.delenv("VULCAN_KUBE_ASSETS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return monkeypatch


def test_without_either_variable_the_reason_names_both(env: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssetsMissing, match=r"KUBEBUILDER_ASSETS.*VULCAN_KUBE_ASSETS"):
        find_assets()


def test_xz_assets_are_unpacked_once_into_the_cache_executable(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = packed_dir(tmp_path)
    env.setenv("VULCAN_KUBE_ASSETS", str(source))
    assets = find_assets()
    sums_digest = hashlib.sha256((source / "SHA256SUMS").read_bytes()).hexdigest()
    assert assets.kube_apiserver == tmp_path / "cache/vulcan/kube-assets" / sums_digest / (
        "kube-apiserver"
    )
    assert os.access(assets.etcd, os.X_OK)
    assert assets.kube_scheduler.read_text() == "#!/bin/sh\necho kube-scheduler\n"
    # Unpacked once: a second look reuses the files (no temporary files left behind either).
    before = assets.etcd.stat().st_mtime_ns
    assert find_assets() == assets
    assert assets.etcd.stat().st_mtime_ns == before
    assert sorted(p.name for p in assets.etcd.parent.iterdir()) == sorted(BINARIES)


def test_a_binary_whose_sum_differs_is_refused_and_not_kept(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env.setenv("VULCAN_KUBE_ASSETS", str(packed_dir(tmp_path, corrupt="kube-apiserver")))
    with pytest.raises(AssetsMissing, match=r"kube-apiserver\.xz unpacks to SHA-256"):
        find_assets()
    cached = list((tmp_path / "cache").rglob("*kube-apiserver*"))
    assert cached == []


def test_envtest_directory_wins_and_must_hold_every_binary(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("etcd", "kube-apiserver"):  # what setup-envtest downloads
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    env.setenv("KUBEBUILDER_ASSETS", str(bin_dir))
    env.setenv("VULCAN_KUBE_ASSETS", str(packed_dir(tmp_path)))
    with pytest.raises(AssetsMissing, match="lacks executable kube-controller-manager, kube-sch"):
        find_assets()
    for name in ("kube-controller-manager", "kube-scheduler"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    assert find_assets().kube_scheduler == bin_dir / "kube-scheduler"
