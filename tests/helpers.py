"""Shared test helpers: where the repository and the shared fixtures live."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core.kube.client import NODES
from extender.protocol import PodInfo, parse_pod

REPO = Path(__file__).resolve().parents[1]
# CI clones main with shared/ beside it; VULCAN_SHARED points elsewhere when needed.
SHARED = Path(os.environ.get("VULCAN_SHARED", REPO.parent / "shared"))
VOLCANO_FIXTURES = SHARED / "fixtures" / "volcano"


def volcano_fixture_files() -> list[Path]:
    files = sorted(VOLCANO_FIXTURES.glob("*.yaml"))
    if not files:
        # Fail loudly: a silently empty parametrization would make the fixture tests vacuous.
        raise RuntimeError(f"no Volcano fixtures found under {VOLCANO_FIXTURES}")
    return files


def vulcan_process(*args: str, stderr: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """`vulcan ARGS...` as a child process of the test, from this checkout."""
    return subprocess.Popen(
        [sys.executable, "-m", "vulcan", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def announced_url(process: subprocess.Popen[str], prefix: str) -> str:
    """The URL a server prints as its first line (`<prefix>http://...`)."""
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith(prefix), line
    return line.split()[-1]


def sim_apiserver_process(kubeconfig: Path) -> tuple[subprocess.Popen[str], str]:
    """`vulcan sim apiserver` on a free port, writing `kubeconfig`: the process and the URL it
    announced (killed again when it announces none)."""
    process = vulcan_process(
        "sim",
        "apiserver",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        stderr=subprocess.DEVNULL,
    )
    try:
        return process, announced_url(process, "embedded API server listening on http://127.0.0.1:")
    except BaseException:
        process.kill()
        process.wait()
        raise


def pod_info(pod: dict[str, Any]) -> PodInfo:
    """A pod object as the extender reads it from a kube-scheduler request."""
    return parse_pod({"Pod": pod})


async def until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """Await a condition on in-process state: poll it every 10 ms, fail after `timeout`."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def add_ready_node(client: Any, name: str, allocatable: dict[str, str]) -> None:
    """A Ready node as a kubelet registers it, with the not-ready taint the API server adds
    at creation removed, as the node lifecycle controller does once the node is Ready."""
    await client.create(
        NODES,
        {
            "metadata": {"name": name},
            "status": {
                "allocatable": allocatable,
                "capacity": allocatable,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    await client.patch(NODES, name, {"spec": {"taints": None}})


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """GET `url`: (status, body text), error statuses included (probes answer 503)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextlib.contextmanager
def local_zone_utc() -> Iterator[None]:
    """The process's local time zone pinned to UTC (dates printed in local time, as Go's
    metav1.Time prints them, then compare exactly), restored afterwards."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()
