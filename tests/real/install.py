"""vulcan installed on a real control plane, as its manifests say, with the product's parts run
as local processes instead of pods (there is no container runtime here):

- the install overlay of the mode (`manifests/overlays/<mode>`, with the module's
  `INSTALL_COMPONENTS` from manifests/components if any), rendered by `kubectl kustomize`
  and applied with `kubectl apply --server-side`: CRDs, namespace, ServiceAccounts, RBAC,
  ConfigMaps, Services, PodDisruptionBudgets; its Deployments are not applied but run here
  (`vulcan extender`, `vulcan controllers` with their Deployments' arguments, the ports and
  file paths made local; the `vulcan-scheduler` Deployment's kube-scheduler from the real binary);
- the extender and the controllers authenticate with tokens of the install's ServiceAccounts
  (TokenRequest, `kubectl create token`), so the install's RBAC is what they run under;
- kube-scheduler runs with the install's configuration (the `vulcan-scheduler-config` ConfigMap
  in second-scheduler mode, the `vulcan-kube-scheduler-extenders` stanza added to the cluster
  scheduler's configuration in cluster-scheduler mode), only the extender's URL changed to the
  local extender and the client pointed at this API server;
- the admission webhooks are registered as `vulcan sim up` registers them (URL + CA bundle);
- nodes are `vulcan sim kubelets` hollow nodes.
Every process is restarted when it exits on its own, as its Deployment (or a static pod's
kubelet) would restart it.
"""

from __future__ import annotations

import base64
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from core.certs import write_serving_certs
from extender.webhook_configs import webhook_configurations
from sim.kubelet.profiles import expand_profiles, parse_node_profile
from tests.helpers import REPO
from tests.real.control_plane import ControlPlane, write_kubeconfig
from tests.real.processes import Child, Watcher, free_port, vulcan_argv, wait_until

MODES = ("second-scheduler", "cluster-scheduler")
NAMESPACE = "vulcan-system"
KUBECTL = "kubectl"
TOKEN_DURATION = "4h"


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}"
        )
    return result.stdout


def render(
    overlay: str, components: tuple[str, ...] = (), workdir: Path | None = None
) -> list[dict[str, Any]]:
    """The install as `kubectl kustomize` renders it; with `components` (names under
    manifests/components), as a user's kustomization listing the overlay and them renders it
    (written in `workdir`: kustomize wants relative paths)."""
    directory = REPO / "manifests" / "overlays" / overlay
    if components:
        assert workdir is not None, "a kustomization with components needs a directory"
        workdir.mkdir(parents=True, exist_ok=True)
        manifests = REPO / "manifests"
        kustomization = {
            "resources": [os.path.relpath(directory, workdir)],
            "components": [
                os.path.relpath(manifests / "components" / c, workdir) for c in components
            ],
        }
        (workdir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        directory = workdir
    out = subprocess.run(
        [KUBECTL, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for doc in docs:
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise AssertionError(f"the install renders no {kind} {name}")


def container_args(docs: list[dict[str, Any]], deployment: str) -> list[str]:
    spec = find(docs, "Deployment", deployment)["spec"]["template"]["spec"]
    return list(spec["containers"][0].get("args") or [])


def local_args(args: list[str], replace: dict[str, str | None]) -> list[str]:
    """A Deployment's `--flag=value` arguments with some flags replaced (None: dropped)."""
    kept = [a for a in args if a.split("=", 1)[0] not in replace]
    return kept + [f"{flag}={value}" for flag, value in replace.items() if value is not None]


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
        node_profiles: list[str],  # `vulcan sim kubelets --node-profile`, each with count=
        extender_flags: tuple[str, ...] = (),
        pod_duration: str = "10s",
        components: tuple[str, ...] = (),  # manifests/components listed with the overlay
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown install mode {mode}")
        self.cp = control_plane
        self.mode = mode
        self.root = control_plane.root / "vulcan"
        self.root.mkdir(parents=True, exist_ok=True)
        self.node_profiles = node_profiles
        self.extender_flags = extender_flags
        self.pod_duration = pod_duration
        self.docs = render(mode, components, self.root / "kustomization")
        self.extender_port = free_port()
        self.webhook_port = free_port()
        self.controllers_port = free_port()
        self.extender_url = f"http://127.0.0.1:{self.extender_port}"
        self.children: list[Child] = []
        self.watcher = Watcher(lambda: list(self.children))
        self.node_names: list[str] = []

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return kubectl(self.cp.admin_kubeconfig, *args, stdin=stdin)

    # ------------------------------------------------------------------ start

    def start(self, timeout: float = 90.0) -> None:
        self.apply_install()
        extender_kubeconfig = self.service_account_kubeconfig("vulcan-extender")
        controllers_kubeconfig = self.service_account_kubeconfig("vulcan-controllers")
        self.start_extender(extender_kubeconfig)
        self.start_controllers(controllers_kubeconfig)
        self.wait_ready(f"{self.extender_url}/readyz", "the extender", timeout)
        self.wait_ready(
            f"http://127.0.0.1:{self.controllers_port}/readyz", "the controllers", timeout
        )
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

    def start_extender(self, kubeconfig: Path) -> None:
        self.webhook_certs = write_serving_certs(self.root / "webhook-certs")
        conf = self.root / "volcano-scheduler.conf"
        conf.write_text(
            find(self.docs, "ConfigMap", "vulcan-scheduler-conf")["data"]["volcano-scheduler.conf"]
        )
        args = local_args(
            container_args(self.docs, "vulcan-extender"),
            {
                "--port": str(self.extender_port),
                "--config": str(conf),
                "--log-format": "text",
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
        self._run("vulcan-extender", vulcan_argv(*args))

    def start_controllers(self, kubeconfig: Path) -> None:
        args = local_args(
            container_args(self.docs, "vulcan-controllers"),
            {"--port": str(self.controllers_port), "--log-format": "text"},
        )
        args += [f"--kubeconfig={kubeconfig}", "--bind-address=127.0.0.1"]
        self._run("vulcan-controllers", vulcan_argv(*args))

    def register_webhooks(self) -> None:
        configs = webhook_configurations(
            url=f"https://127.0.0.1:{self.webhook_port}",
            ca_bundle=base64.b64encode(self.webhook_certs.ca_pem).decode(),
        )
        self.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(configs))

    def scheduler_configs(self) -> dict[str, dict[str, Any]]:
        """name -> KubeSchedulerConfiguration of each kube-scheduler this mode runs."""
        prefix = f"{self.extender_url}/v1"
        if self.mode == "second-scheduler":
            config = yaml.safe_load(
                find(self.docs, "ConfigMap", "vulcan-scheduler-config")["data"]["config.yaml"]
            )
            for extender in config.get("extenders") or ():
                extender["urlPrefix"] = prefix
            # The cluster's own scheduler beside it, for every pod that does not ask for vulcan.
            default = {
                "apiVersion": config["apiVersion"],
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": "default-scheduler"}],
            }
            return {"kube-scheduler": default, "vulcan-scheduler": config}
        extenders = find(self.docs, "ConfigMap", "vulcan-kube-scheduler-extenders")
        stanza = yaml.safe_load(extenders["data"]["extenders.yaml"])
        for extender in stanza["extenders"]:
            extender["urlPrefix"] = prefix
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": "default-scheduler"}, *stanza["profiles"]],
            "extenders": stanza["extenders"],
        }
        return {"kube-scheduler": config}

    def start_schedulers(self) -> None:
        for name, config in self.scheduler_configs().items():
            # vulcan's second scheduler runs as its ServiceAccount (the overlay's RBAC); the
            # cluster's own one as the admin (a control plane's scheduler has its own
            # credentials; which ones is not what these tests are about).
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

    def start_kubelets(self, timeout: float) -> None:
        args = ["sim", "kubelets", f"--kubeconfig={self.cp.admin_kubeconfig}"]
        for profile in self.node_profiles:
            args += ["--node-profile", profile]
        args += ["--pod-duration", self.pod_duration]
        child = self._run("hollow-kubelets", vulcan_argv(*args))
        profiles = expand_profiles([parse_node_profile(p) for p in self.node_profiles], None)
        expected = sum(p.count or 0 for p in profiles)

        def ready() -> bool:
            if not child.running:
                raise AssertionError(f"vulcan sim kubelets exited: {child.failure()}")
            nodes = self.cp.get("/api/v1/nodes")["items"]
            usable = [n for n in nodes if schedulable(n)]
            self.node_names = sorted(n["metadata"]["name"] for n in usable)
            return len(usable) >= expected

        wait_until(f"{expected} hollow nodes Ready and untainted", ready, timeout)

    def _run(self, name: str, argv: list[str]) -> Child:
        child = Child(name, argv, self.cp.logs, restart_on_exit=True)
        self.children.append(child)
        child.start()
        return child

    def wait_ready(self, url: str, what: str, timeout: float) -> None:
        def ready() -> bool:
            for child in self.children:
                if not child.running:
                    raise AssertionError(f"{child.name} exited: {child.failure()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    return bool(response.status == 200)
            except (urllib.error.URLError, OSError):
                return False

        wait_until(f"{what} to be ready ({url})", ready, timeout)

    # ------------------------------------------------------------------ stop

    def stop(self) -> None:
        self.watcher.stop()
        for child in reversed(self.children):
            child.stop()
