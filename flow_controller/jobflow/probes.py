"""A flow step's `dependsOn.probe` network checks, run from the controller (Volcano accepts the
field and ignores it): every `httpGetList` item must get a 2xx/3xx answer (as a kubelet's
httpGet probe) and every `tcpSocketList` item must accept a connection, from each running pod
of the named task of the step's target Jobs, at the pod's IP."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import aiohttp

from core.api import keys
from core.api.flow import Flow, HttpGet, TcpSocket
from core.kube.client import PODS, KubeClient
from flow_controller.jobflow.state import ProbeResult

log = logging.getLogger("vulcan.controllers.jobflow")


class FlowProber:
    def __init__(self, client: KubeClient, timeout: float = 1.0) -> None:
        self.client = client
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def probe(self, namespace: str, step: Flow, target_jobs: Sequence[str]) -> ProbeResult:
        probe = step.depends_on.probe if step.depends_on else None
        if probe is None:
            return ProbeResult(True)
        for item in probe.http_get_list or ():
            result = await self._each_pod(namespace, target_jobs, item)
            if not result.passed:
                return result
        for item in probe.tcp_socket_list or ():
            result = await self._each_pod(namespace, target_jobs, item)
            if not result.passed:
                return result
        return ProbeResult(True)

    async def _each_pod(
        self, namespace: str, target_jobs: Sequence[str], item: HttpGet | TcpSocket
    ) -> ProbeResult:
        task = item.task_name or ""
        addresses: list[tuple[str, str]] = []
        for job in target_jobs:
            selector = f"{keys.JOB_NAME}={job}"
            if task:
                selector += f",{keys.TASK_SPEC}={task}"
            pods = (await self.client.list(PODS, namespace, labelSelector=selector))["items"]
            for pod in pods:
                status = pod.get("status") or {}
                if status.get("phase") == "Running" and status.get("podIP"):
                    addresses.append((pod["metadata"]["name"], status["podIP"]))
        if not addresses:
            return ProbeResult(False, f"no running pod of task {task or '(any)'} to probe")
        for pod, address in addresses:
            reason = await (
                self._http(address, item) if isinstance(item, HttpGet) else self._tcp(address, item)
            )
            if reason:
                return ProbeResult(False, f"probe of pod {pod}: {reason}")
        return ProbeResult(True)

    async def _http(self, address: str, item: HttpGet) -> str:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        path = item.path or "/"
        if not path.startswith("/"):
            path = "/" + path
        host = f"[{address}]" if ":" in address else address
        url = f"http://{host}:{item.port or 80}{path}"
        headers = {}
        if item.http_header is not None and item.http_header.name:
            headers[item.http_header.name] = item.http_header.value or ""
        try:
            async with self._session.get(url, headers=headers, allow_redirects=False) as answer:
                if 200 <= answer.status < 400:
                    return ""
                return f"GET {url}: HTTP {answer.status}"
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return f"GET {url}: {exc or type(exc).__name__}"

    async def _tcp(self, address: str, item: TcpSocket) -> str:
        try:
            async with asyncio.timeout(self.timeout.total):
                _, writer = await asyncio.open_connection(address, item.port)
        except (TimeoutError, OSError) as exc:
            return f"tcp {address}:{item.port}: {exc or type(exc).__name__}"
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return ""
