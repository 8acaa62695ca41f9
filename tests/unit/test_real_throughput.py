"""bench/real_throughput.py: what it does where the real tier's binaries are absent, and the
exact shape of its last line (the contract other tools parse)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from bench.real_throughput import last_line
from tests.helpers import REPO


def test_without_the_binaries_it_says_so_and_exits_without_measuring() -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBEBUILDER_ASSETS", "VULCAN_KUBE_ASSETS")
    }
    result = subprocess.run(
        [sys.executable, "-m", "bench.real_throughput", "--nodes", "10", "--pods", "10"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith("bench.real_throughput needs the real tier's Kubernetes binaries")
    assert "KUBEBUILDER_ASSETS" in lines[0] and "VULCAN_KUBE_ASSETS" in lines[0]
    assert "pods_per_s=" not in result.stdout


def test_last_line_has_exactly_the_keys_in_order() -> None:
    line = last_line(334.25, 141.04, 219.6, 2.345, 0.6)
    assert line == (
        "pods_per_s=334.2 with_extender_pods_per_s=141.0 floor_pods_per_s=219.6 "
        "extender_to_floor=0.642 extender_cpu_ms_per_pod=2.345 floor_cpu_ms_per_pod=0.600"
    )
    shape = re.compile(
        r"pods_per_s=[\d.]+ with_extender_pods_per_s=[\d.]+ floor_pods_per_s=[\d.]+ "
        r"extender_to_floor=[\d.]+ extender_cpu_ms_per_pod=[\d.]+ floor_cpu_ms_per_pod=[\d.]+"
    )
    assert shape.fullmatch(last_line(1000.0, 600.0, 650.0, 1.0, 0.5))
