"""One phase's cluster for `bench/real_throughput.py`: the real control plane (etcd and
kube-apiserver, started by vulcan.real_cluster as `vulcan sim up --control-plane real` starts
them), Node objects, the phase's extender (vulcan's as the install runs it, or
`bench.floor_extender`) and the real kube-scheduler with the phase's configuration.

Nodes are API objects (no kubelet): created Ready with their capacity in the status, and the
`node.kubernetes.io/not-ready` taint that kube-apiserver's TaintNodesByCondition admission adds to
every new node removed, as kube-controller-manager's node lifecycle controller would (it is not
run: its work would be CPU inside the measurement that no phase needs).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

from core.kube.client import ApiError, KubeClient
from vulcan.real_cluster.assets import KubeAssets
from vulcan.real_cluster.control_plane import ControlPlane
from vulcan.real_cluster.install import VulcanInstall
from vulcan.real_cluster.manifests import find, render
from vulcan.real_cluster.processes import Child, free_port, wait_until

MODES = ("alone", "vulcan", "floor")
INSTALL_MODE = "second-scheduler"  # every pod of the profile goes through the extender
NODE_CPU, NODE_MEMORY, NODE_PODS = "32", "128Gi", "110"
SCHEDULER_QPS = 5000
DEFAULT_PROFILE = "default-scheduler"  # the plain workload's pods name no scheduler
GANG_PROFILE = "volcano"  # the install's second scheduler, named by Volcano Jobs' pods


def _install_config(components: tuple[str, ...] = ()) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vulcan-bench-install-") as workdir:
        docs = render(INSTALL_MODE, components, Path(workdir) / "kustomization")
    return dict(
        yaml.safe_load(find(docs, "ConfigMap", "vulcan-scheduler-config")["data"]["config.yaml"])
    )


def install_extenders(components: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The extender entries of vulcan's second-scheduler install (filter + preempt, then bind;
    prioritize too when the conf's node order is not rendered into the profile), as its
    `vulcan-scheduler-config` ConfigMap has them; with `components` (manifests/components, e.g.
    bind-marker) as an overlay listing them renders it."""
    return list(_install_config(components)["extenders"])


def install_scoring(components: tuple[str, ...] = ()) -> dict[str, Any]:
    """The scoring fields (`plugins`, `pluginConfig`) of the install's `volcano` profile: the
    conf's node order rendered as kube-scheduler's own scoring (plugins.framework.kube_scoring)."""
    config = _install_config(components)
    (profile,) = [p for p in config["profiles"] if p["schedulerName"] == "volcano"]
    return {k: v for k, v in profile.items() if k in ("plugins", "pluginConfig")}


def with_prioritize(extenders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries as the install had them before the rendering: the first (filter) entry also
    prioritizes, weight 1."""
    first = {**extenders[0], "prioritizeVerb": "prioritize", "weight": 1}
    return [first, *extenders[1:]]


def scheduler_config(
    kubeconfig: Path,
    extenders: list[dict[str, Any]],
    extender_url: str | None,
    scoring: dict[str, Any] | None = None,
    profiles: tuple[str, ...] = (DEFAULT_PROFILE,),
) -> dict[str, Any]:
    """kube-scheduler's configuration for a phase: the default profile (the benchmark's pods
    name no scheduler), no leader election, client QPS raised so that the client's rate limit
    is not what is measured, and (with an extender) the install's entries with only the URL
    changed, so the no-op floor is called with the same verbs as vulcan, and the install's
    profile `scoring` (the same for vulcan and the floor). `profiles`: the schedulerNames
    of its profiles, alike (the gang workload adds the install's `volcano`)."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {
            "kubeconfig": str(kubeconfig),
            "qps": SCHEDULER_QPS,
            "burst": SCHEDULER_QPS * 2,
        },
        "profiles": [{"schedulerName": name} for name in profiles],
    }
    if extender_url is not None:
        entries = copy.deepcopy(extenders)
        for entry in entries:
            entry["urlPrefix"] = f"{extender_url}/v1"
        config["extenders"] = entries
        for profile in config["profiles"]:
            profile.update(copy.deepcopy(scoring or {}))
    return config


def node_body(index: int) -> bytes:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    resources = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS}
    name = f"node-{index:05d}"
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "benchmark node",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
            },
        }
    )


async def parallel(count: int, concurrency: int, call: Any) -> float:
    """`call(i)` for i in range(count), `concurrency` at a time; the seconds it took."""
    started = time.monotonic()
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            await call(index)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.monotonic() - started


async def create_nodes(client: KubeClient, count: int, concurrency: int = 16) -> None:
    async def create(index: int) -> None:
        with contextlib.suppress(ApiError):  # already there (a retried create)
            await client.request("POST", "/api/v1/nodes", body=node_body(index))
        await client.request(
            "PATCH",
            f"/api/v1/nodes/node-{index:05d}",
            body=b'{"spec":{"taints":null}}',
            content_type="application/merge-patch+json",
        )

    await parallel(count, concurrency, create)


class PhaseCluster:
    """Control plane + extender of one phase; kube-scheduler is started by `start_scheduler`
    once the pods exist. `pids()` names the processes whose CPU the phase reports."""

    def __init__(
        self,
        assets: KubeAssets,
        mode: str,
        extenders: list[dict[str, Any]],
        extender_flags: tuple[str, ...] = (),
        scoring: dict[str, Any] | None = None,
        components: tuple[str, ...] = (),
        controllers: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown phase {mode}")
        self.mode = mode
        self.extenders = extenders
        self.scoring = scoring
        self.extender_flags = extender_flags
        # The install's components (manifests/components): vulcan's extender runs with the
        # Deployment arguments they set (the bind-marker one's --bind-marker).
        self.components = components
        # The gang workload's vulcan: its controllers (Volcano Jobs' pods and PodGroups, the
        # default Queue) and admission webhooks too, and kube-scheduler's `volcano` profile.
        self.with_controllers = controllers
        self.controllers: Child | None = None
        self.root = Path(tempfile.mkdtemp(prefix=f"vulcan-bench-real-{mode}-"))
        self.plane = ControlPlane(assets, self.root, controller_manager=False)
        self.install: VulcanInstall | None = None
        self.extender: Child | None = None
        self.extender_url: str | None = None
        self.scheduler: Child | None = None
        self.scheduler_port = 0
        self.profile_to: Path | None = None  # py-spy's collapsed stacks of the extender
        self._profiler: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180.0) -> None:
        """Control plane, the default ServiceAccount (the ServiceAccount admission refuses pods
        without it; kube-controller-manager would make it) and the phase's extender."""
        self.plane.start(timeout)
        self.plane.request(
            "/api/v1/namespaces/default/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        )
        if self.mode == "vulcan":
            self.install = VulcanInstall(
                self.plane,
                INSTALL_MODE,
                node_profiles=[],
                extender_flags=self.extender_flags,
                components=self.components,
            )
            self.install.apply_install()
            self.install.start_extender(self.install.service_account_kubeconfig("vulcan-extender"))
            self.extender = self.install.children[-1]
            self.extender_url = self.install.extender_url
            self.install.wait_ready(f"{self.extender_url}/readyz", "vulcan's extender", timeout)
            if self.with_controllers:
                self.controllers = self.install.start_controllers(
                    self.install.service_account_kubeconfig("vulcan-controllers")
                )
                url = f"{self.install.controllers_url}/readyz"
                self.install.wait_ready(url, "vulcan's controllers", timeout)
                self.install.register_webhooks()
        elif self.mode == "floor":
            port = free_port()
            self.extender = Child(
                "floor-extender",
                [
                    sys.executable, "-m", "bench.floor_extender",
                    "--kubeconfig", str(self.plane.admin_kubeconfig), "--port", str(port),
                ],
                self.plane.logs,
            )  # fmt: skip
            self.plane.children.append(self.extender)
            self.extender.start()
            self.extender_url = f"http://127.0.0.1:{port}"
            wait_until("the floor extender to listen", lambda: _listening(port), timeout)

    def start_scheduler(self) -> None:
        profiles = (DEFAULT_PROFILE, GANG_PROFILE) if self.with_controllers else (DEFAULT_PROFILE,)
        config = scheduler_config(
            self.plane.admin_kubeconfig, self.extenders, self.extender_url, self.scoring, profiles
        )
        path = self.root / "kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        # Its metrics served (to anyone: loopback only) for the scheduling algorithm's duration,
        # which holds the extender's filter and prioritize calls as kube-scheduler waited them.
        self.scheduler_port = free_port()
        self.scheduler = Child(
            "kube-scheduler",
            [
                str(self.plane.assets.kube_scheduler),
                f"--config={path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.scheduler_port}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            ],
            self.plane.logs,
        )
        self.plane.children.append(self.scheduler)
        self.scheduler.start()

    def start_profiler(self) -> None:
        """Record the extender with py-spy from now on (when asked to: `profile_to`), over the
        span its CPU is counted: from the first pod created to the last bound."""
        if self.profile_to is not None and self.extender is not None and self._profiler is None:
            assert self.extender.process is not None
            self.profile_to.parent.mkdir(parents=True, exist_ok=True)
            self._profiler = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("py-spy")), "record", "--format", "raw",
                    "--rate", "200", "-o", str(self.profile_to),
                    "--pid", str(self.extender.process.pid),
                ],
                stdout=subprocess.DEVNULL,
            )  # fmt: skip

    def stop_profiler(self) -> None:
        """py-spy writes its file when the process it records is interrupted (SIGINT)."""
        if self._profiler is not None:
            self._profiler.send_signal(signal.SIGINT)
            self._profiler.wait(60)
            self._profiler = None

    def pids(self) -> dict[str, int]:
        """role -> pid of every running part of the phase."""
        parts = {
            "etcd": self.plane.etcd,
            "kube-apiserver": self.plane.apiserver,
            "kube-scheduler": self.scheduler,
            "extender": self.extender,
            "controllers": self.controllers,
        }
        return {
            role: child.process.pid
            for role, child in parts.items()
            if child is not None and child.process is not None and child.running
        }

    def failed(self) -> str | None:
        """Why the phase cannot go on (a part exited), with its log's tail; None when all run."""
        installed = self.install.children if self.install is not None else []
        for child in [*self.plane.children, *installed]:
            if child.process is not None and not child.running:
                return child.failure()
        return None

    def stop(self) -> None:
        self.stop_profiler()
        if self.install is not None:
            self.install.stop()
        self.plane.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def await_or_fail(
    event: asyncio.Event, cluster: PhaseCluster, what: Callable[[], str], timeout: float
) -> None:
    """Until `event`, saying `what()` every 10 s; RuntimeError when a part exits or time's up."""
    started = time.monotonic()
    while not event.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), 10)
        if event.is_set():
            return
        failure = cluster.failed()
        if failure or time.monotonic() > started + timeout:
            raise RuntimeError(f"{what()}; {failure or 'timeout'}")
        print(f"{what()} after {time.monotonic() - started:.0f}s")
