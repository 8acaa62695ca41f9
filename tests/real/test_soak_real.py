"""`python -m bench.soak --real` (issue 48, item 6): the soak's workload on a real control plane
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with vulcan installed, run as a
user runs it, ends with no violation and has done real work. Short here (the light shape, a
minute); the long soaks are run by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_soak import LAST_LINE
from tests.helpers import REPO
from tests.real.assets import AssetsMissing, find_assets

pytestmark = pytest.mark.real


def test_a_short_light_soak_on_a_real_control_plane_finds_no_violation(tmp_path: Path) -> None:
    try:
        find_assets()
    except AssetsMissing as exc:
        pytest.skip(str(exc))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.soak",
            "--real",
            "--shape",
            "light",
            "--duration",
            "60s",
            "--seed",
            "3",
            "--state-dir",
            str(tmp_path / "soak"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = result.stdout.strip().splitlines()
    assert lines, f"no output; stderr: {result.stderr[-3000:]}"
    assert "on the real control plane" in lines[0]
    match = LAST_LINE.match(lines[-1])
    assert match, f"last line not the summary: {lines[-1]!r}; stderr: {result.stderr[-3000:]}"
    violations = [line for line in lines if line.startswith("VIOLATION")]
    assert result.returncode == 0 and int(match.group(4)) == 0, "\n".join(violations)
    assert int(match.group(2)) > 0  # gangs ran to their end
