"""CPU seconds of `vulcan sim up` and each of its children (API server, extender, scheduler
stand-in, controllers), read from /proc: what each part of the embedded cluster costs during a
benchmark phase, so a ratio can be explained, not just printed. Linux only; elsewhere empty."""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# Words of a child's command line -> its role (`python -m vulcan sim apiserver ...`).
_ROLES = (
    (("sim", "apiserver"), "apiserver"),
    (("sim", "scheduler"), "scheduler"),
    (("extender",), "extender"),
    (("controllers",), "controllers"),
)


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds used) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: the fields after it start past the last ')'.
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_of(pid: int) -> float:
    """CPU seconds so far of one process (0 when it is gone)."""
    stat = _stat(pid)
    return stat[1] if stat else 0.0


def _role(pid: int) -> str | None:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    for needle, role in _ROLES:
        if all(w in words for w in needle):
            return role
    return None


def cpu_by_role(root: int) -> dict[str, float]:
    """CPU seconds so far of `vulcan sim up` (pid `root`: the hollow kubelets and node
    lifecycle run in it, named "kubelets") and of its children, by role."""
    totals: dict[str, float] = {}
    root_stat = _stat(root)
    if root_stat is None:
        return totals
    totals["kubelets"] = root_stat[1]
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return totals
    for pid in pids:
        stat = _stat(pid)
        if stat is None or stat[0] != root:
            continue
        role = _role(pid) or "other"
        totals[role] = totals.get(role, 0.0) + stat[1]
    return totals


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {role: after[role] - before.get(role, 0.0) for role in after}
