"""Child processes of the real local cluster: started with their log in a file, each in its own
session (a terminal's Ctrl-C reaches only the launcher, which stops them in order), stopped by
their own pid (SIGTERM, then SIGKILL), and restarted as a Deployment or a static pod's kubelet
would restart them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class StartError(RuntimeError):
    """A part did not come up; the message says which and ends with its log's tail."""


class Cancelled(Exception):
    """Start-up was interrupted (Ctrl-C): the caller stops what was started."""


_GIVEN: set[int] = set()  # ports free_port handed out in this process


def free_port() -> int:
    """A port nothing listens on right now (the OS's choice for port 0), never one handed out
    before: a port is chosen well before its process listens on it, and meanwhile the OS may
    give it again (kube-apiserver's port once came back as etcd's, and it could not start)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


class Child:
    """One long-running program. `restart_on_exit` makes the watcher start it again when it
    exits on its own (as a pod's restartPolicy: Always would), with the same arguments."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_dir: Path,
        *,
        restart_on_exit: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_dir / f"{name}.log"
        self.restart_on_exit = restart_on_exit
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.exits: list[int] = []  # exit codes of the runs that ended on their own
        self._stopping = False

    def start(self) -> None:
        self._stopping = False
        with self.log_path.open("ab") as log:
            try:
                self.process = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **(self.env or {})},
                    # Its own session: a signal meant for the launcher does not reach it; it
                    # is stopped by its own pid.
                    start_new_session=True,
                )
            except OSError as exc:  # not executable, not a program for this machine
                raise StartError(f"{self.name}: cannot run {self.argv[0]}: {exc}") from None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping = True
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()

    def kill(self) -> None:
        """SIGKILL, as a crashed or OOM-killed process ends."""
        self._stopping = True
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def check(self) -> None:
        """Restart it if it exited on its own and should be restarted."""
        process = self.process
        if self._stopping or process is None or process.poll() is None:
            return
        self.exits.append(process.returncode)
        if not self.restart_on_exit:
            self.process = None
            return
        with self.log_path.open("ab") as log:
            log.write(f"\n--- exited with {process.returncode}; restarting ---\n".encode())
        self.restarts += 1
        self.start()

    def failure(self) -> str:
        return f"{self.name} ({' '.join(self.argv[:3])} ...): log tail:\n{log_tail(self.log_path)}"


class Watcher:
    """A thread that restarts children which exit on their own, every `interval` seconds."""

    def __init__(self, children: Callable[[], list[Child]], interval: float = 0.5) -> None:
        self._children = children
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="real-cluster-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            for child in self._children():
                try:
                    child.check()
                except (OSError, StartError) as exc:  # a restart that cannot start: say so
                    with contextlib.suppress(OSError), child.log_path.open("a") as log:
                        log.write(f"\n--- restart failed: {exc} ---\n")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)


def vulcan_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "vulcan", *args]


def wait_until(
    what: str,
    probe: Callable[[], T],
    timeout: float,
    *,
    cancel: threading.Event | None = None,
    interval: float = 0.2,
) -> T:
    """Poll `probe` until truthy; StartError naming `what` after `timeout` seconds, Cancelled
    as soon as `cancel` is set."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        if cancel is not None and cancel.is_set():
            raise Cancelled(what)
        last = probe()
        if last:
            return last
        if cancel is not None:
            cancel.wait(interval)
        else:
            time.sleep(interval)
    raise StartError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
