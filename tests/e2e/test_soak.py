"""The short soak (issue 31): `python -m bench.soak` for a minute with a fixed seed, run as a user
runs it, must end with no violation — no gang partly bound past the window, no queue above its
capability, no node overcommitted, no stall, every job final, nothing lost — and must have done
real work (gangs completed, pods evicted by the node failure and by preemption/reclaim).

The long soak (30 minutes, any seed) is run by hand: `python -m bench.soak --duration 30m`.

Seed 7 found issue 31 item 4 on main before h31a's and h31b's fixes were merged (soak-q3,
capability 32 cpu, held 42 and 36 cpu: elastic jobs' members beyond minMember), in 2 of 2 runs;
with them it finds nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

LAST_LINE = re.compile(
    r"^soak_seconds=(\d+) gangs_completed=(\d+) evictions=(\d+) violations=(\d+) "
    r"worst_partial_s=(\d+\.\d)$"
)
SEED = 7
DURATION = "60s"


def run_soak(
    tmp_path: Path, seed: int, *extra: str
) -> tuple[subprocess.CompletedProcess[str], re.Match[str]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.soak",
            "--duration",
            DURATION,
            "--seed",
            str(seed),
            "--stall-after",
            "40s",
            "--state-dir",
            str(tmp_path / "soak"),
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=420,
    )
    lines = result.stdout.strip().splitlines()
    assert lines, f"no output; stderr: {result.stderr[-3000:]}"
    match = LAST_LINE.match(lines[-1])
    assert match, f"last line not the summary: {lines[-1]!r}; stderr: {result.stderr[-3000:]}"
    assert f"seed={seed}" in result.stdout
    return result, match


def test_short_soak_finds_no_violation(tmp_path: Path) -> None:
    result, match = run_soak(tmp_path, SEED)
    violations = [line for line in result.stdout.splitlines() if line.startswith("VIOLATION")]
    assert result.returncode == 0 and int(match.group(4)) == 0, "\n".join(violations)
    # The soak did what it is for: gangs ran to the end, pods were evicted (node failure,
    # preemption, reclaim), and the checker measured partial placements.
    assert int(match.group(1)) >= 60
    assert int(match.group(2)) > 0
    assert int(match.group(3)) > 0
