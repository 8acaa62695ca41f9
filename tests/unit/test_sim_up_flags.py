"""`vulcan sim up`'s flags for the two control planes: `--control-plane real` takes its binaries
from `--kube-assets` (else the variables) and refuses the flags only the embedded cluster has;
the settings it starts the real cluster with follow the flags; bad binaries end it with one
line before anything starts."""

from __future__ import annotations

import hashlib
import lzma
from pathlib import Path

import pytest

from vulcan.cli import build_parser, main
from vulcan.real_cluster.assets import BINARIES
from vulcan.real_cluster.up import settings_of
from vulcan.sim_flags import real_flag_problem


def parse(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["sim", "up", *argv])


@pytest.fixture
def no_assets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.delenv("VULCAN_KUBE_ASSETS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return monkeypatch


def test_the_embedded_control_plane_is_the_default_and_each_has_its_start_timeout() -> None:
    args = parse("--nodes", "2")
    assert args.control_plane == "embedded"
    assert real_flag_problem(args) is None and args.start_timeout == 60.0
    args = parse("--control-plane", "real", "--nodes", "2")
    assert real_flag_problem(args) is None and args.start_timeout == 180.0
    args = parse("--control-plane", "real", "--start-timeout", "30")
    assert real_flag_problem(args) is None and args.start_timeout == 30.0


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--scheduler-config", "conf.yaml"),
        ("--workload-controllers", "job"),
        ("--port", "8080"),
        ("--extender-port", "8888"),
        ("--webhook-port", "9443"),
    ],
)
def test_a_real_control_plane_refuses_what_only_the_embedded_one_has(flag: str, value: str) -> None:
    problem = real_flag_problem(parse("--control-plane", "real", flag, value))
    assert problem == f"{flag}: only with --control-plane embedded"
    assert real_flag_problem(parse(flag, value)) is None


def test_kube_assets_is_only_for_the_real_control_plane(capsys: pytest.CaptureFixture) -> None:
    assert main(["sim", "up", "--nodes", "2", "--kube-assets", "/nowhere"]) == 2
    assert capsys.readouterr().err == "error: --kube-assets: only with --control-plane real\n"


def test_the_real_clusters_settings_follow_the_flags() -> None:
    args = parse(
        "--control-plane", "real", "--install-mode", "cluster-scheduler",
        "--node-profile", "count=2,cpu=8", "--node-profile", "count=1,cpu=4",
        "--pod-duration", "forever", "--gang-backoff", "2s", "--scheduler-memo", "check",
        "--pod-eviction-timeout", "7", "--node-monitor-grace-period", "20s",
        "--log-format", "json",
    )  # fmt: skip
    real_flag_problem(args)
    settings = settings_of(args)
    settings.check()
    assert settings.mode == "cluster-scheduler"
    assert settings.node_profiles == ("count=2,cpu=8", "count=1,cpu=4")
    assert settings.nodes is None
    assert settings.pod_duration == "forever"
    assert settings.extender_flags == (
        "--gang-backoff=2s",
        "--member-reach-timeout=30s",
        "--scheduler-memo=check",
    )
    assert settings.apiserver_flags == (
        "--default-not-ready-toleration-seconds=7",
        "--default-unreachable-toleration-seconds=7",
    )
    assert settings.controller_manager_flags == ("--node-monitor-grace-period=20s",)
    assert settings.log_format == "json" and settings.timeout == 180.0


def test_node_flags_that_cannot_work_are_refused_before_anything_starts(
    no_assets: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    code = main(["sim", "up", "--control-plane", "real", "--node-profile", "cpu=8"])
    assert code == 1
    assert capsys.readouterr().err == (
        "error: a node profile without count= needs the number of nodes\n"
    )


def test_without_binaries_it_exits_1_with_one_line_naming_the_flag_and_both_variables(
    no_assets: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    assert main(["sim", "up", "--control-plane", "real", "--nodes", "4"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    for name in ("--kube-assets", "KUBEBUILDER_ASSETS", "VULCAN_KUBE_ASSETS"):
        assert name in lines[0]


def test_a_corrupt_binary_ends_it_naming_the_file_and_the_checksum(
    no_assets: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assets = tmp_path / "assets"
    assets.mkdir()
    script = b"#!/bin/sh\n"
    sums = []
    for name in BINARIES:
        (assets / f"{name}.xz").write_bytes(lzma.compress(script))
        sums.append(f"{hashlib.sha256(script).hexdigest()}  {name}")
    sums[1] = f"{'0' * 64}  kube-apiserver"  # what the real one would hash to
    (assets / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    argv = ["sim", "up", "--control-plane", "real", "--nodes", "4", "--kube-assets", str(assets)]
    assert main(argv) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert f"{assets / 'kube-apiserver.xz'} unpacks to SHA-256 " in lines[0]
    assert f"but SHA256SUMS says {'0' * 64}" in lines[0]
    assert not list((tmp_path / "cache").rglob("kube-apiserver"))  # nothing kept


def test_the_help_documents_the_real_control_plane_and_where_its_binaries_come_from(
    capsys: pytest.CaptureFixture,
) -> None:
    with pytest.raises(SystemExit):
        main(["sim", "up", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in (
        "--control-plane {embedded,real}",
        "--kube-assets DIR",
        "$KUBEBUILDER_ASSETS",
        "$VULCAN_KUBE_ASSETS",
        "SHA256SUMS",
        "(embedded only)",
    ):
        assert words in text, words
