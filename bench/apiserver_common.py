"""What the API-server benchmark's parts share, and bench.extender_latency and
bench.cache_memory reuse: the paths and content types, BenchError, the /proc readers (RSS, CPU),
ServerProcess (a server subprocess that announces its URL) and the argv of the processes
(`vulcan sim apiserver`, this benchmark run with internal flags)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STOP_TIMEOUT = 10.0  # SIGTERM, then SIGKILL after this long
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(RuntimeError):
    pass


# ------------------------------------------------------------------------------ processes


def read_rss_kib(pid: int, key: str = "VmRSS") -> int:
    """VmRSS (current) or VmHWM (peak) of `pid` in KiB, 0 when the process is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def read_cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` (from /proc/PID/stat)."""
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()  # the name may contain spaces
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    return 0.0


class ServerProcess:
    """A server subprocess that prints `... listening on http://HOST:PORT` once it serves."""

    def __init__(self, label: str, argv: Sequence[str]) -> None:
        self.label = label
        self.argv = list(argv)
        self.url = ""
        self.proc: asyncio.subprocess.Process | None = None
        # Logs go to a file: an undrained pipe would block the server once it fills up.
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        self._drain: asyncio.Task[None] | None = None
        self.peak_rss_kib = 0
        self._sampler: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self, timeout: float = 60.0) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=self.stderr
        )
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    line = (await self.proc.stdout.readline()).decode()
                    if not line:
                        raise BenchError(f"{self.label} exited before serving:\n{self.logs()}")
                    if "listening on http://" in line:
                        self.url = line.split()[-1]
                        break
        except TimeoutError:
            raise BenchError(f"{self.label} did not start within {timeout} s") from None
        self._drain = asyncio.create_task(self._drain_stdout())
        self._sampler = asyncio.create_task(self._sample_rss())

    async def _drain_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while await self.proc.stdout.read(65536):
            pass

    async def _sample_rss(self) -> None:
        # VmHWM is read at the end as well; sampling VmRSS shows when the peak happened.
        while True:
            self.peak_rss_kib = max(self.peak_rss_kib, read_rss_kib(self.pid))
            await asyncio.sleep(0.2)

    def rss_mib(self) -> float:
        return read_rss_kib(self.pid) / 1024

    def hwm_mib(self) -> float:
        return read_rss_kib(self.pid, "VmHWM") / 1024

    def cpu_seconds(self) -> float:
        return read_cpu_seconds(self.pid)

    def logs(self, limit: int = 4000) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-limit:]

    async def stop(self) -> None:
        for task in (self._sampler, self._drain):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        proc = self.proc
        if proc is not None and proc.returncode is not None:
            print(f"{self.label} had exited with {proc.returncode}; its log:\n{self.logs()}")
        elif proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
            except TimeoutError:
                print(f"{self.label} ignored SIGTERM for {STOP_TIMEOUT} s: killing it")
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        self.stderr.close()


def vulcan_argv() -> list[str]:
    script = Path(sys.executable).with_name("vulcan")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "vulcan"]
    # --port 0: any free port; the URL is parsed from the process's first line.
    return [*command, "sim", "apiserver", "--port", "0"]


def self_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.apiserver_scale", *args]
