"""`vulcan sim up --control-plane real` as a user runs it (issue 49, item 3): one command brings
up a real control plane with vulcan installed and 4 hollow nodes; with plain `kubectl
--kubeconfig` Volcano's TensorFlow example runs to Completed and a Job naming a missing queue is
refused by vulcan's webhook; Ctrl-C (SIGINT), at the end or in the middle of start-up, leaves no
process and no temporary directory behind.

Every process the command starts inherits a marker in its environment, so that any survivor,
however it was started, is found in /proc."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import KUBECTL
from tests.helpers import REPO
from tests.real.conftest import assets_or_skip

pytestmark = pytest.mark.real

MARKER = "VULCAN_SIM_UP_REAL_TEST"
READY = "cluster ready"
TENSORFLOW = REPO / "examples" / "tensorflow-benchmark.yaml"  # Volcano's TF example, unchanged
MISSING_QUEUE_JOB = (Path(__file__).parent / "manifests" / "missing-queue-job.yaml").read_text()


def marked_processes(mark: str) -> list[str]:
    """`pid: command` of every process whose environment carries `mark`."""
    needle = f"{MARKER}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append(f"{entry.name}: {command[:200]}")
        except OSError:  # gone meanwhile, or a kernel thread
            continue
    return found


class Launch:
    """`vulcan sim up --control-plane real ARGS` with its stdout read line by line."""

    def __init__(self, *args: str) -> None:
        self.mark = uuid.uuid4().hex
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vulcan", "sim", "up", "--control-plane", "real", *args],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, MARKER: self.mark},
            # Its own process group, as a shell's foreground job: Ctrl-C is sent to the group.
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_line(self, prefix: str, timeout: float = 300.0) -> str:
        """The first line starting with `prefix`, once printed (every line read is kept)."""
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                message = f"no {prefix!r} line within {timeout:.0f}s: {self.lines}"
                raise AssertionError(message) from None
            if line is None:
                raise AssertionError(f"exited before a {prefix!r} line: {self.lines}")
            self.lines.append(line)
            if line.startswith(prefix):
                return line

    def interrupt(self, timeout: float = 120.0) -> int:
        """SIGINT to its process group, as a terminal's Ctrl-C sends it (to a kubectl it is
        running too); the exit status once it has stopped."""
        os.killpg(self.process.pid, signal.SIGINT)
        code = self.process.wait(timeout)
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        return code

    def made(self) -> list[Path]:
        """The temporary directories it said it made: its state and etcd's data."""
        state = next(line for line in self.lines if line.startswith("state: "))
        etcd = next(line for line in self.lines if line.startswith("etcd: "))
        return [Path(state.split()[1]), Path(etcd.rsplit("(data in ", 1)[1].rstrip(")"))]


@pytest.fixture
def launch() -> Iterator[list[Launch]]:
    """Launches made by the test, killed (with whatever they left) if the test failed early."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (make test installs Debian's kubernetes-client)")
    assets_or_skip()
    launches: list[Launch] = []
    yield launches
    for launched in launches:
        if launched.process.poll() is None:
            launched.process.send_signal(signal.SIGINT)
            launched.process.wait(120)
        for line in marked_processes(launched.mark):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)


def user_kubectl(
    kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL or "kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_nothing_left(launched: Launch, code: int) -> None:
    assert code == 0, launched.lines
    assert launched.lines[-1] == "stopped", launched.lines
    assert marked_processes(launched.mark) == []
    for directory in launched.made():
        assert not directory.exists(), f"{directory} left behind"


def test_one_command_runs_volcanos_tensorflow_example_and_the_webhook_refuses_a_lost_queue(
    launch: list[Launch], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "real.kubeconfig"
    launched = Launch("--nodes", "4", "--kubeconfig-out", str(kubeconfig))
    launch.append(launched)
    launched.wait_line(READY)
    assert f"kubeconfig: {kubeconfig}" in launched.lines
    # Everything it started is found by its marker (so that the check below can fail).
    running = marked_processes(launched.mark)
    for part in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert any(f"/{part} " in line for line in running), (part, running)
    for part in ("vulcan extender", "vulcan controllers", "vulcan sim kubelets"):
        assert any(part in line for line in running), (part, running)

    nodes = user_kubectl(kubeconfig, "get", "nodes", "-o", "name")
    assert nodes.returncode == 0, nodes.stderr
    assert len(nodes.stdout.split()) == 4, nodes.stdout
    applied = user_kubectl(kubeconfig, "apply", "-f", str(TENSORFLOW))
    assert applied.returncode == 0, applied.stderr
    # Placed while it runs: once Completed, CompleteJob (the workers' policy) kills the ps pod.
    started = user_kubectl(
        kubeconfig, "wait", "vcjob/tensorflow-benchmark",
        "--for=jsonpath={.status.state.phase}=Running", "--timeout=240s",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    pods = user_kubectl(
        kubeconfig, "get", "pods", "-l", "volcano.sh/job-name=tensorflow-benchmark",
        "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{'\\n'}{end}",
    )  # fmt: skip
    placed = dict(line.split() for line in pods.stdout.splitlines())
    assert sorted(placed) == [
        "tensorflow-benchmark-ps-0",
        "tensorflow-benchmark-worker-0",
        "tensorflow-benchmark-worker-1",
    ]
    assert all(node.startswith("hollow-node-") for node in placed.values()), placed
    completed = user_kubectl(
        kubeconfig, "wait", "vcjob/tensorflow-benchmark",
        "--for=jsonpath={.status.state.phase}=Completed", "--timeout=240s",
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr

    refused = user_kubectl(kubeconfig, "apply", "-f", "-", stdin=MISSING_QUEUE_JOB)
    assert refused.returncode != 0
    assert 'admission webhook "validatejob.volcano.sh" denied the request' in refused.stderr
    assert 'unable to find job queue: queues.scheduling.volcano.sh "no-such-queue" not found' in (
        refused.stderr
    )
    assert user_kubectl(kubeconfig, "get", "vcjob", "lost-job").returncode != 0  # not stored

    assert_nothing_left(launched, launched.interrupt())
    assert READY in "\n".join(launched.lines)


@pytest.mark.parametrize("after", ["etcd: ", "vulcan installed: "])
def test_ctrl_c_in_the_middle_of_start_up_leaves_no_process_and_no_directory(
    launch: list[Launch], after: str
) -> None:
    launched = Launch("--nodes", "4")
    launch.append(launched)
    launched.wait_line(after)
    assert marked_processes(launched.mark)  # the launcher and what it started so far
    code = launched.interrupt()
    assert not any(line.startswith(READY) for line in launched.lines), launched.lines
    assert_nothing_left(launched, code)
