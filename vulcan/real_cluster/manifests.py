"""The install as `kubectl kustomize` renders it (`manifests/overlays/<mode>`, with any
`manifests/components` listed beside it), and what a local run reads out of it: the
Deployments' arguments and the kube-scheduler configurations pointed at a local extender."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from vulcan.real_cluster.processes import StartError

MODES = ("second-scheduler", "cluster-scheduler")
NAMESPACE = "vulcan-system"
KUBECTL = "kubectl"
# The checkout's manifests (a wheel ships the CRDs alone: the overlays need a checkout).
MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


class KubectlError(RuntimeError):
    """kubectl refused or failed; the message is its stderr."""


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    try:
        result = subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            # Out of the terminal's process group: a Ctrl-C is the launcher's to handle (it
            # stops after this call), not a kubectl failure to report.
            start_new_session=True,
        )
    except FileNotFoundError:
        raise StartError(f"{KUBECTL} is not installed (the install is applied with it)") from None
    if result.returncode != 0:
        raise KubectlError(
            f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
        )
    return result.stdout


def missing_requirement() -> str | None:
    """Why the install cannot be rendered here, or None."""
    if shutil.which(KUBECTL) is None:
        return f"{KUBECTL} is not installed (the install is rendered and applied with it)"
    if not (MANIFESTS / "overlays").is_dir():
        return f"{MANIFESTS / 'overlays'} is missing: the install's overlays come with a checkout"
    return None


def render(
    overlay: str, components: tuple[str, ...] = (), workdir: Path | None = None
) -> list[dict[str, Any]]:
    """The install as `kubectl kustomize` renders it; with `components` (names under
    manifests/components), as a user's kustomization listing the overlay and them renders it
    (written in `workdir`: kustomize wants relative paths)."""
    directory = MANIFESTS / "overlays" / overlay
    if components:
        if workdir is None:
            raise ValueError("a kustomization with components needs a directory")
        workdir.mkdir(parents=True, exist_ok=True)
        kustomization = {
            "resources": [os.path.relpath(directory, workdir)],
            "components": [
                os.path.relpath(MANIFESTS / "components" / c, workdir) for c in components
            ],
        }
        (workdir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        directory = workdir
    try:
        result = subprocess.run(
            [KUBECTL, "kustomize", str(directory)],
            capture_output=True,
            text=True,
            timeout=60,
            start_new_session=True,  # as in kubectl() above
        )
    except FileNotFoundError:
        raise StartError(f"{KUBECTL} is not installed (the install is rendered with it)") from None
    if result.returncode != 0:
        raise KubectlError(f"kubectl kustomize {directory} failed: {result.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for doc in docs:
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(f"the install renders no {kind} {name}")


def container_args(docs: list[dict[str, Any]], deployment: str) -> list[str]:
    spec = find(docs, "Deployment", deployment)["spec"]["template"]["spec"]
    return list(spec["containers"][0].get("args") or [])


def local_args(args: list[str], replace: dict[str, str | None]) -> list[str]:
    """A Deployment's `--flag=value` arguments with some flags replaced (None: dropped)."""
    kept = [a for a in args if a.split("=", 1)[0] not in replace]
    return kept + [f"{flag}={value}" for flag, value in replace.items() if value is not None]


def scheduler_configs(docs: list[dict[str, Any]], mode: str, extender_url: str) -> dict[str, Any]:
    """name -> KubeSchedulerConfiguration of each kube-scheduler `mode` runs, the extender
    entries pointing at `extender_url` (clientConnection is the caller's to set)."""
    prefix = f"{extender_url}/v1"
    if mode == "second-scheduler":
        config = yaml.safe_load(
            find(docs, "ConfigMap", "vulcan-scheduler-config")["data"]["config.yaml"]
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
    extenders = find(docs, "ConfigMap", "vulcan-kube-scheduler-extenders")
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
