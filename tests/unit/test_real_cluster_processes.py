"""The real cluster's child processes and waits (vulcan/real_cluster/processes.py): a binary that
cannot run is named, a wait ends at once when start-up is cancelled (Ctrl-C), a child is
stopped by its pid, and no port is handed out twice."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from vulcan.real_cluster import processes
from vulcan.real_cluster.processes import Cancelled, Child, StartError, free_port, wait_until


class _Socket:
    """socket.socket's stand-in: each bind to port 0 gets the next of `ports`."""

    ports: ClassVar[list[int]] = []

    def __enter__(self) -> _Socket:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def bind(self, address: tuple[str, int]) -> None:
        self.port = self.ports.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_the_os_gives_again_is_not_handed_out_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The OS may return a port it gave a moment ago: nothing listens on it until the process
    # it was chosen for starts.
    monkeypatch.setattr(processes.socket, "socket", _Socket)
    monkeypatch.setattr(processes, "_GIVEN", set())
    _Socket.ports = [41000, 41000, 41000, 41001]
    assert [free_port(), free_port()] == [41000, 41001]


def test_a_binary_that_is_no_program_is_named_when_it_cannot_start(tmp_path: Path) -> None:
    binary = tmp_path / "kube-apiserver"
    binary.write_bytes(b"\x00\x01 not an executable format")
    binary.chmod(0o755)
    child = Child("kube-apiserver", [str(binary), "--secure-port=0"], tmp_path)
    with pytest.raises(StartError, match=rf"^kube-apiserver: cannot run {binary}: .*Exec format"):
        child.start()


def test_a_cancelled_wait_ends_before_probing_again() -> None:
    cancel = threading.Event()
    probes: list[int] = []

    def probe() -> bool:
        probes.append(1)
        cancel.set()  # Ctrl-C arrives while the first probe runs
        return False

    with pytest.raises(Cancelled, match="kube-apiserver to serve"):
        wait_until("kube-apiserver to serve", probe, timeout=3600, cancel=cancel)
    assert probes == [1]


def test_a_wait_returns_what_the_probe_found_or_names_what_it_waited_for() -> None:
    answers = iter([None, "", "ready"])
    assert wait_until("it", lambda: next(answers), timeout=60, interval=0) == "ready"
    with pytest.raises(StartError, match=r"^timed out after 0s waiting for the nodes \(last"):
        wait_until("the nodes", lambda: False, timeout=0)


def test_a_child_runs_in_its_own_session_and_is_stopped_by_its_pid(tmp_path: Path) -> None:
    child = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"], tmp_path)
    child.start()
    assert child.process is not None and child.running
    assert os.getsid(child.process.pid) == child.process.pid  # a terminal's Ctrl-C misses it
    child.stop()
    assert not child.running and child.process.returncode == -15  # SIGTERM was enough
