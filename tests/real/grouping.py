"""Helpers of the real tier for pods waiting for the pg controller to group them."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

from tests.real.conftest import RealCluster


@contextlib.contextmanager
def controllers_paused(cluster: RealCluster) -> Iterator[None]:
    """`vulcan controllers` stopped (SIGSTOP) for the block: the pg controller groups nothing
    meanwhile, as when it is slow or restarting. Keep the block well under its Lease's 15 s."""
    child = next(c for c in cluster.install.children if c.name == "vulcan-controllers")
    assert child.process is not None
    os.kill(child.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(child.process.pid, signal.SIGCONT)


WAITING = "waiting for its PodGroup"


def refused_waiting(cluster: RealCluster, name: str) -> bool:
    """kube-scheduler tried the pod and vulcan refused it for want of its group."""
    for condition in (cluster.pod(name) or {}).get("status", {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return WAITING in condition.get("message", "")
    return False
