"""vulcan installed on a real control plane as its manifests say, the product's parts run as
local processes (no container runtime is needed):

- the overlay of the mode (with `components` from manifests/components, if any), rendered by
  `kubectl kustomize` and applied with `kubectl apply --server-side`: CRDs, namespace,
  ServiceAccounts, RBAC, ConfigMaps, Services, PodDisruptionBudgets. Its Deployments are not
  applied but run here: `vulcan extender` and `vulcan controllers` with their Deployments'
  arguments (ports and file paths made local), the `vulcan-scheduler` Deployment's
  kube-scheduler from the real binary;
- the extender and the controllers authenticate with tokens of the install's ServiceAccounts
  (TokenRequest, `kubectl create token`), so the install's RBAC is what they run under;
- kube-scheduler runs with the install's configuration (the `vulcan-scheduler-config`
  ConfigMap in second-scheduler mode; the `vulcan-kube-scheduler-extenders` stanza added to the
  cluster scheduler's configuration in cluster-scheduler mode), only the extender's URL changed
  to the local extender and the client pointed at this API server;
- the admission webhooks are registered with a CA and serving certificate made here (URL +
  caBundle, as `vulcan sim up` registers them);
- nodes are `vulcan sim kubelets` hollow nodes.
Every process is restarted when it exits on its own, as its Deployment (or a static pod's
kubelet) would restart it.
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from core.certs import ServingCerts, write_serving_certs
from extender.webhook_configs import webhook_configurations
from sim.kubelet.profiles import expand_profiles, parse_node_profile
from vulcan.real_cluster.control_plane import ControlPlane, write_kubeconfig
from vulcan.real_cluster.manifests import (
    MODES,
    NAMESPACE,
    container_args,
    find,
    kubectl,
    local_args,
    render,
    scheduler_configs,
)
from vulcan.real_cluster.processes import Child, StartError, Watcher, free_port, vulcan_argv

# Bound tokens for the extender, controllers and second scheduler: long enough for a local
# cluster left running for weeks (the API server sets no maximum here).
TOKEN_DURATION = "720h"


def schedulable(node: dict[str, Any]) -> bool:
    """Ready, and the node.kubernetes.io/not-ready taint (added at registration) removed by
    kube-controller-manager's node lifecycle controller."""
    taints = node["spec"].get("taints") or ()
    conditions = node.get("status", {}).get("conditions") or ()
    return not any(t["key"].startswith("node.kubernetes.io/") for t in taints) and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


class VulcanInstall:
    def __init__(
        self,
        control_plane: ControlPlane,
        mode: str,
        *,
        node_profiles: list[str],  # `vulcan sim kubelets --node-profile`
        nodes: int | None = None,  # `vulcan sim kubelets --nodes`
        extender_flags: tuple[str, ...] = (),  # after the Deployment's: these win
        pod_duration: str = "10s",
        components: tuple[str, ...] = (),  # manifests/components listed with the overlay
        log_format: str = "text",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown install mode {mode!r} (known: {', '.join(MODES)})")
        self.cp = control_plane
        self.mode = mode
        self.root = control_plane.root / "vulcan"
        self.root.mkdir(parents=True, exist_ok=True)
        self.node_profiles = node_profiles
        self.nodes = nodes
        self.extender_flags = extender_flags
        self.pod_duration = pod_duration
        self.log_format = log_format
        self.docs = render(mode, components, self.root / "kustomization")
        self.extender_port = free_port()
        self.webhook_port = free_port()
        self.controllers_port = free_port()
        self.extender_url = f"http://127.0.0.1:{self.extender_port}"
        self.webhook_url = f"https://127.0.0.1:{self.webhook_port}"
        self.controllers_url = f"http://127.0.0.1:{self.controllers_port}"
        self.webhook_certs: ServingCerts | None = None
        self.children: list[Child] = []
        self.watcher = Watcher(lambda: list(self.children))
        self.node_names: list[str] = []

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return kubectl(self.cp.admin_kubeconfig, *args, stdin=stdin)

    # ------------------------------------------------------------------ start

    def start(self, timeout: float = 90.0) -> None:
        self.apply_install()
        self.start_extender(self.service_account_kubeconfig("vulcan-extender"))
        self.start_controllers(self.service_account_kubeconfig("vulcan-controllers"))
        self.wait_ready(f"{self.extender_url}/readyz", "the extender", timeout)
        self.wait_ready(f"{self.controllers_url}/readyz", "the controllers", timeout)
        self.register_webhooks()
        self.start_schedulers()
        self.start_kubelets(timeout)
        self.watcher.start()

    def apply_install(self) -> None:
        """Everything the overlay installs but the Deployments (their programs run here)."""
        docs = [d for d in self.docs if d["kind"] != "Deployment"]
        crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
        rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
        self.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(crds))
        self.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            *(f"crd/{d['metadata']['name']}" for d in crds),
        )  # fmt: skip
        self.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(rest))

    def service_account_kubeconfig(self, account: str) -> Path:
        """A kubeconfig with a token of `account` from the TokenRequest API."""
        token = self.kubectl(
            "create", "token", account, "-n", NAMESPACE, f"--duration={TOKEN_DURATION}"
        ).strip()
        return write_kubeconfig(
            self.root / f"{account}.kubeconfig", self.cp.server, token, f"{NAMESPACE}:{account}"
        )

    def start_extender(self, kubeconfig: Path, conf: Path | None = None) -> Child:
        """`vulcan extender` with the Deployment's arguments; `conf` replaces the install's
        Volcano scheduler conf."""
        self.webhook_certs = write_serving_certs(self.root / "webhook-certs")
        if conf is None:
            conf = self.root / "volcano-scheduler.conf"
            conf.write_text(
                find(self.docs, "ConfigMap", "vulcan-scheduler-conf")["data"][
                    "volcano-scheduler.conf"
                ]
            )
        args = local_args(
            container_args(self.docs, "vulcan-extender"),
            {
                "--port": str(self.extender_port),
                "--config": str(conf),
                "--log-format": self.log_format,
            },
        )
        args += [
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--webhook-port={self.webhook_port}",
            f"--tls-cert-file={self.webhook_certs.cert_file}",
            f"--tls-private-key-file={self.webhook_certs.key_file}",
            *self.extender_flags,
        ]
        return self._run("vulcan-extender", vulcan_argv(*args))

    def start_controllers(self, kubeconfig: Path) -> Child:
        args = local_args(
            container_args(self.docs, "vulcan-controllers"),
            {"--port": str(self.controllers_port), "--log-format": self.log_format},
        )
        args += [f"--kubeconfig={kubeconfig}", "--bind-address=127.0.0.1"]
        return self._run("vulcan-controllers", vulcan_argv(*args))

    def register_webhooks(self) -> None:
        """The Mutating- and ValidatingWebhookConfiguration, calling the local extender and
        trusting the CA made for it."""
        assert self.webhook_certs is not None, "start_extender makes the certificate"
        configs = webhook_configurations(
            url=self.webhook_url,
            ca_bundle=base64.b64encode(self.webhook_certs.ca_pem).decode(),
        )
        text = yaml.safe_dump_all(configs, sort_keys=False)
        (self.root / "webhooks.yaml").write_text(text)
        self.kubectl("apply", "--server-side", "-f", "-", stdin=text)

    def scheduler_configs(self) -> dict[str, dict[str, Any]]:
        """name -> KubeSchedulerConfiguration of each kube-scheduler this mode runs."""
        return scheduler_configs(self.docs, self.mode, self.extender_url)

    def start_schedulers(self) -> None:
        for name, config in self.scheduler_configs().items():
            # vulcan's second scheduler runs as its ServiceAccount (the overlay's RBAC); the
            # cluster's own one as the admin (a control plane's scheduler has its own
            # credentials; which ones is not what this install is about).
            kubeconfig = (
                self.service_account_kubeconfig("vulcan-scheduler")
                if name == "vulcan-scheduler"
                else self.cp.admin_kubeconfig
            )
            config.setdefault("clientConnection", {})["kubeconfig"] = str(kubeconfig)
            path = self.root / f"{name}.yaml"
            path.write_text(yaml.safe_dump(config, sort_keys=False))
            self._run(
                name,
                [str(self.cp.assets.kube_scheduler), f"--config={path}", "--secure-port=0"],
            )

    @property
    def expected_nodes(self) -> int:
        profiles = [parse_node_profile(p) for p in self.node_profiles]
        return sum(p.count or 0 for p in expand_profiles(profiles, self.nodes))

    def start_kubelets(self, timeout: float) -> None:
        args = ["sim", "kubelets", f"--kubeconfig={self.cp.admin_kubeconfig}"]
        for profile in self.node_profiles:
            args += ["--node-profile", profile]
        if self.nodes is not None:
            args += ["--nodes", str(self.nodes)]
        args += ["--pod-duration", self.pod_duration, f"--log-format={self.log_format}"]
        expected = self.expected_nodes  # ValueError for a profile that does not parse
        child = self._run("hollow-kubelets", vulcan_argv(*args))

        def ready() -> bool:
            self._alive(child)
            nodes = self.cp.get("/api/v1/nodes")["items"]
            usable = [n for n in nodes if schedulable(n)]
            self.node_names = sorted(n["metadata"]["name"] for n in usable)
            return len(usable) >= expected

        self.cp.wait(f"{expected} hollow nodes Ready and untainted", ready, timeout)

    def _run(self, name: str, argv: list[str]) -> Child:
        child = Child(name, argv, self.cp.logs, restart_on_exit=True)
        self.children.append(child)
        child.start()
        return child

    @staticmethod
    def _alive(child: Child) -> None:
        if not child.running:
            raise StartError(f"{child.name} exited: {child.failure()}")

    def wait_ready(self, url: str, what: str, timeout: float) -> None:
        def ready() -> bool:
            for child in self.children:
                self._alive(child)
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    return bool(response.status == 200)
            except (urllib.error.URLError, OSError):
                return False

        self.cp.wait(f"{what} to be ready ({url})", ready, timeout)

    # ------------------------------------------------------------------ stop

    def stop(self) -> None:
        self.watcher.stop()
        for child in reversed(self.children):
            child.stop()
