"""Where the real local cluster finds its binaries (vulcan/real_cluster/assets.py): `--kube-assets`,
else KUBEBUILDER_ASSETS, else VULCAN_KUBE_ASSETS; each binary unpacked or as NAME.xz (unpacked
once into the cache), checked against SHA256SUMS; anything missing or wrong is one line naming
the file and, for a bad binary, the checksum that failed."""

from __future__ import annotations

import hashlib
import lzma
import os
from pathlib import Path

import pytest

from vulcan.real_cluster.assets import BINARIES, AssetsError, find_assets


def body(name: str) -> bytes:
    return f"#!/bin/sh\necho {name}\n".encode()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def packed_dir(tmp_path: Path, *, corrupt: str | None = None, name: str = "assets") -> Path:
    """A VULCAN_KUBE_ASSETS-like directory: NAME.xz and SHA256SUMS (`corrupt`'s line wrong)."""
    source = tmp_path / name
    source.mkdir()
    sums = []
    for binary in BINARIES:
        (source / f"{binary}.xz").write_bytes(lzma.compress(body(binary)))
        sums.append(f"{digest(b'other' if binary == corrupt else body(binary))}  {binary}")
    (source / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    return source


def unpacked_dir(tmp_path: Path, names: tuple[str, ...] = BINARIES, *, sums: bool = False) -> Path:
    """An envtest-like directory of executables, with their SHA256SUMS when `sums`."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in names:
        (directory / name).write_bytes(body(name))
        (directory / name).chmod(0o755)
    if sums:
        lines = [f"{digest(body(n))}  {n}" for n in names]
        (directory / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return directory


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.delenv("VULCAN_KUBE_ASSETS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return monkeypatch


def test_without_a_directory_the_error_is_one_line_naming_the_flag_and_both_variables(
    env: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(AssetsError) as caught:
        find_assets()
    message = str(caught.value)
    assert "\n" not in message
    for name in ("--kube-assets", "KUBEBUILDER_ASSETS", "VULCAN_KUBE_ASSETS"):
        assert name in message


def test_xz_assets_are_unpacked_once_into_the_cache_executable(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = packed_dir(tmp_path)
    env.setenv("VULCAN_KUBE_ASSETS", str(source))
    assets = find_assets()
    sums_digest = digest((source / "SHA256SUMS").read_bytes())
    cache = tmp_path / "cache/vulcan/kube-assets" / sums_digest
    assert assets.kube_apiserver == cache / "kube-apiserver"
    assert os.access(assets.etcd, os.X_OK)
    assert assets.kube_scheduler.read_bytes() == body("kube-scheduler")
    # Unpacked once: a second look reuses the files (no temporary files left behind either).
    before = assets.etcd.stat().st_mtime_ns
    assert find_assets() == assets
    assert assets.etcd.stat().st_mtime_ns == before
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == sorted(BINARIES)
    assert not [p for p in cache.iterdir() if p.name.startswith(".") and "checked" not in p.name]


def test_a_cached_binary_changed_since_it_was_checked_is_unpacked_again(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env.setenv("VULCAN_KUBE_ASSETS", str(packed_dir(tmp_path)))
    assets = find_assets()
    assets.kube_apiserver.write_bytes(b"#!/bin/sh\necho tampered\n")
    assert find_assets().kube_apiserver.read_bytes() == body("kube-apiserver")


def test_an_xz_whose_sum_differs_is_refused_naming_the_file_and_both_sums(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = packed_dir(tmp_path, corrupt="kube-apiserver")
    env.setenv("VULCAN_KUBE_ASSETS", str(source))
    with pytest.raises(AssetsError) as caught:
        find_assets()
    message = str(caught.value)
    assert message.startswith("VULCAN_KUBE_ASSETS: ")
    unpacked = digest(body("kube-apiserver"))
    assert f"{source / 'kube-apiserver.xz'} unpacks to SHA-256 {unpacked}" in message
    assert f"SHA256SUMS says {digest(b'other')}" in message
    assert "\n" not in message
    assert list((tmp_path / "cache").rglob("*kube-apiserver*")) == []  # nothing kept


def test_a_truncated_xz_is_refused_naming_the_file_and_the_sum_it_should_have(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = packed_dir(tmp_path)
    packed = source / "etcd.xz"
    packed.write_bytes(packed.read_bytes()[:20])
    env.setenv("VULCAN_KUBE_ASSETS", str(source))
    with pytest.raises(AssetsError, match=r"etcd\.xz is corrupt .*SHA-256 [0-9a-f]{64}") as caught:
        find_assets()
    assert str(packed) in str(caught.value)
    assert digest(body("etcd")) in str(caught.value)


def test_an_unpacked_binary_is_checked_against_its_sums_line(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    directory = unpacked_dir(tmp_path, sums=True)
    assert find_assets(directory).kube_scheduler == directory / "kube-scheduler"
    wrong = b"#!/bin/sh\necho wrong\n"
    (directory / "kube-scheduler").write_bytes(wrong)
    with pytest.raises(AssetsError) as caught:
        find_assets(directory)
    assert str(caught.value) == (
        f"--kube-assets: {directory / 'kube-scheduler'} has SHA-256 {digest(wrong)}, "
        f"but SHA256SUMS says {digest(body('kube-scheduler'))}"
    )


def test_an_xz_without_a_sums_line_is_refused(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    source = packed_dir(tmp_path)
    (source / "SHA256SUMS").write_text(
        "".join(
            line + "\n"
            for line in (source / "SHA256SUMS").read_text().splitlines()
            if not line.endswith("etcd")
        )
    )
    with pytest.raises(AssetsError, match=r"etcd\.xz has no line in .*SHA256SUMS"):
        find_assets(source)


def test_a_binary_that_is_not_executable_is_named(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    directory = unpacked_dir(tmp_path)
    (directory / "etcd").chmod(0o644)
    with pytest.raises(AssetsError, match=r"bin/etcd is not executable"):
        find_assets(directory)


def test_the_flag_wins_over_both_variables_and_the_envtest_one_over_ours(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    flag_dir = unpacked_dir(tmp_path)
    env.setenv("KUBEBUILDER_ASSETS", str(tmp_path / "nowhere"))
    env.setenv("VULCAN_KUBE_ASSETS", str(packed_dir(tmp_path)))
    assert find_assets(flag_dir).etcd == flag_dir / "etcd"
    with pytest.raises(AssetsError, match=r"^KUBEBUILDER_ASSETS: .*nowhere is not a directory$"):
        find_assets()
    env.delenv("KUBEBUILDER_ASSETS")
    assert find_assets().etcd.parent.parent == tmp_path / "cache/vulcan/kube-assets"


def test_a_directory_missing_binaries_names_them(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    directory = unpacked_dir(tmp_path, ("etcd", "kube-apiserver"))  # what setup-envtest gives
    env.setenv("KUBEBUILDER_ASSETS", str(directory))
    with pytest.raises(
        AssetsError, match=r"lacks kube-controller-manager, kube-scheduler \(as NAME or NAME\.xz"
    ):
        find_assets()
    for name in ("kube-controller-manager", "kube-scheduler"):
        (directory / name).write_bytes(body(name))
        (directory / name).chmod(0o755)
    assert find_assets().kube_scheduler == directory / "kube-scheduler"
