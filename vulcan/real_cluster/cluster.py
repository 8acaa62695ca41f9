"""A whole real cluster on this machine: the control plane (etcd, kube-apiserver,
kube-controller-manager), vulcan installed on it (extender, controllers, kube-scheduler,
webhooks) and hollow nodes. `vulcan sim up --control-plane real`, the real test tier and
`bench.soak --real` all start it through `LocalCluster`.

Start-up runs in the caller's thread; another thread (a signal handler's loop) may set
`cancel`, which ends it at its next wait with `Cancelled`. `stop()` then ends every process by
pid and removes the directories the cluster made, however far start-up got.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sim.kubelet.profiles import expand_profiles, parse_node_profile
from vulcan.real_cluster.assets import KubeAssets
from vulcan.real_cluster.control_plane import ControlPlane
from vulcan.real_cluster.install import VulcanInstall
from vulcan.real_cluster.manifests import MODES
from vulcan.real_cluster.processes import Cancelled


@dataclass(frozen=True)
class Settings:
    mode: str = "second-scheduler"  # the install overlay: second-scheduler, cluster-scheduler
    node_profiles: tuple[str, ...] = ()  # `vulcan sim kubelets --node-profile`
    nodes: int | None = None  # `vulcan sim kubelets --nodes`
    pod_duration: str = "10s"
    extender_flags: tuple[str, ...] = ()  # after the Deployment's arguments
    extender_conf: Path | None = None  # instead of the install's Volcano scheduler conf
    components: tuple[str, ...] = ()  # manifests/components listed with the overlay
    apiserver_flags: tuple[str, ...] = ()
    controller_manager_flags: tuple[str, ...] = ()
    log_format: str = "text"
    timeout: float = 180.0  # seconds each part may take to start

    def check(self) -> None:
        """ValueError for settings that cannot start, before anything is started."""
        if self.mode not in MODES:
            raise ValueError(f"install mode {self.mode!r}: not one of {', '.join(MODES)}")
        expand_profiles([parse_node_profile(p) for p in self.node_profiles], self.nodes)
        if self.extender_conf is not None and not self.extender_conf.is_file():
            raise ValueError(f"extender conf {self.extender_conf}: no such file")


class LocalCluster:
    def __init__(
        self,
        assets: KubeAssets,
        settings: Settings,
        *,
        root: Path | None = None,  # None: a temporary directory, removed by stop()
        cancel: threading.Event | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        settings.check()
        self.settings = settings
        self.cancel = cancel or threading.Event()
        self.progress = progress or (lambda line: None)
        self.temporary = root is None
        self.root = Path(tempfile.mkdtemp(prefix="vulcan-real-")) if root is None else root
        self.root.mkdir(parents=True, exist_ok=True)
        self.plane = ControlPlane(
            assets,
            self.root,
            apiserver_flags=settings.apiserver_flags,
            controller_manager_flags=settings.controller_manager_flags,
            cancel=self.cancel,
        )
        self.install: VulcanInstall | None = None

    @property
    def kubeconfig(self) -> Path:
        """The admin's (system:masters) kubeconfig."""
        return self.plane.admin_kubeconfig

    def start(self) -> None:
        try:
            self._start()
        except Exception:
            # Interrupted mid-call (a kubectl that the terminal's Ctrl-C also reached): the
            # failure is the interruption's.
            if self.cancel.is_set():
                raise Cancelled("start-up") from None
            raise

    def _start(self) -> None:
        s, plane, say = self.settings, self.plane, self.progress
        say(f"state: {self.root} (logs in {plane.logs})")
        plane.start_etcd(s.timeout)
        say(f"etcd: {plane.etcd_url} (data in {plane.etcd_dir})")
        plane.start_apiserver(s.timeout)
        say(f"kube-apiserver: {plane.server}")
        plane.start_controller_manager(s.timeout)
        say("kube-controller-manager: every controller")
        self.install = install = VulcanInstall(
            plane,
            s.mode,
            node_profiles=list(s.node_profiles),
            nodes=s.nodes,
            extender_flags=s.extender_flags,
            pod_duration=s.pod_duration,
            components=s.components,
            log_format=s.log_format,
        )
        install.apply_install()
        overlay = "+".join((s.mode, *s.components))
        say(f"vulcan installed: manifests/overlays/{overlay} (Deployments run as processes)")
        install.start_extender(
            install.service_account_kubeconfig("vulcan-extender"), s.extender_conf
        )
        install.start_controllers(install.service_account_kubeconfig("vulcan-controllers"))
        install.wait_ready(f"{install.extender_url}/readyz", "the extender", s.timeout)
        say(f"vulcan extender: {install.extender_url}/v1 (metrics: {install.extender_url}/metrics)")
        install.wait_ready(f"{install.controllers_url}/readyz", "the controllers", s.timeout)
        say(f"vulcan controllers: {install.controllers_url}/metrics")
        install.register_webhooks()
        say(
            f"vulcan admission webhooks: {install.webhook_url} "
            f"(configurations in {install.root / 'webhooks.yaml'})"
        )
        install.start_schedulers()
        say(f"kube-scheduler: {', '.join(install.scheduler_configs())} (configs in {install.root})")
        install.start_kubelets(s.timeout)
        names = install.node_names
        say(f"hollow nodes: {len(names)} ({names[0]} .. {names[-1]})")
        install.watcher.start()

    def failed(self) -> str | None:
        """Why the cluster is down (a control-plane part exited), or None."""
        return self.plane.failed()

    def stop(self, *, keep_root: bool = False) -> None:
        """Every process ended by pid, vulcan's first; etcd's data removed, and the root too
        when it is temporary and not to be kept (its logs explain a failed start)."""
        if self.install is not None:
            self.install.stop()
        self.plane.stop()
        if self.temporary and not keep_root:
            shutil.rmtree(self.root, ignore_errors=True)
