"""Shared test helpers: where the repository, its examples and the test fixtures live."""

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

import yaml

from core.kube.client import NODES
from extender.protocol import PodInfo, parse_pod

REPO = Path(__file__).resolve().parents[1]
# The runnable examples users see (README, "Examples"); the tests read them too.
EXAMPLES = REPO / "examples"
# Test-only data: more Volcano objects (tests/fixtures/volcano/README.md) and kube-scheduler's
# extender requests as a real kube-scheduler sends them (tests/fixtures/kube-scheduler).
FIXTURES = REPO / "tests" / "fixtures"
VOLCANO_FIXTURES = FIXTURES / "volcano"
KUBE_SCHEDULER_CAPTURES = FIXTURES / "kube-scheduler"
_VOLCANO_GROUPS = ("batch.volcano.sh/", "scheduling.volcano.sh/", "flow.volcano.sh/")


def _only_volcano_kinds(path: Path) -> bool:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return bool(docs) and all(str(d.get("apiVersion")).startswith(_VOLCANO_GROUPS) for d in docs)


def volcano_fixture_files() -> list[Path]:
    """Every file of Volcano objects: the examples made only of Volcano kinds (not the
    Deployment), then the test fixtures."""
    files = [p for p in sorted(EXAMPLES.glob("*.yaml")) if _only_volcano_kinds(p)]
    files += sorted(VOLCANO_FIXTURES.glob("*.yaml"))
    if not files:
        # Fail loudly: a silently empty parametrization would make the fixture tests vacuous.
        raise RuntimeError(f"no Volcano fixtures found under {EXAMPLES} or {VOLCANO_FIXTURES}")
    return files


def volcano_fixture(name: str) -> Path:
    """The example or test fixture called `name` (e.g. `mpi-job.yaml`)."""
    for path in (EXAMPLES / name, VOLCANO_FIXTURES / name):
        if path.exists():
            return path
    raise FileNotFoundError(f"no example or fixture {name!r}")


def vulcan_process(*args: str, stderr: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """`vulcan ARGS...` as a child process of the test, from this checkout."""
    return subprocess.Popen(
        [sys.executable, "-m", "vulcan", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def stop_process(process: subprocess.Popen[str], timeout: float = 20.0) -> None:
    """SIGTERM a child still running and wait for it; SIGKILL it if it outlasts `timeout`."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


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


def member_filter(gangs: Any, pod: PodInfo, candidates: list[str]) -> Any:
    """The gang verbs' filter for `pod` as the extender protocol sends it: (passing, failed,
    unresolvable), or None for a pod that is not a gang member."""
    from extender.gang_verbs import GangVerbs

    status = GangVerbs(gangs).filter(pod, candidates)
    return None if status is None else status.split(candidates)
