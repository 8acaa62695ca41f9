"""`python -m bench.soak --real` (issue 48, item 6): the soak's workload on a real control plane
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with vulcan installed, run as a
user runs it, ends with no violation and has done real work. Short here (the light shape, a
minute); the long soaks are run by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_soak import run_soak
from vulcan.real_cluster.assets import AssetsError, find_assets

pytestmark = pytest.mark.real


def test_a_short_light_soak_on_a_real_control_plane_finds_no_violation(tmp_path: Path) -> None:
    try:
        find_assets()
    except AssetsError as exc:
        pytest.skip(str(exc))
    result, match = run_soak(tmp_path, 3, "--real", "--shape", "light")
    lines = result.stdout.strip().splitlines()
    assert "on the real control plane" in lines[0]
    violations = [line for line in lines if line.startswith("VIOLATION")]
    assert result.returncode == 0 and int(match.group(4)) == 0, "\n".join(violations)
    assert int(match.group(2)) > 0  # gangs ran to their end
