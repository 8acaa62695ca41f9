"""The install manifests (manifests/base, manifests/overlays/*, the rendered
manifests/vulcan.yaml): kubectl's built-in kustomize renders every overlay, the single-file
install is the base's render, and what renders is accepted by an API server (`kubectl apply
--dry-run=server` against the embedded one) without a warning."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import REPO, sim_apiserver_process
from topology_controller.config import parse

KUBECTL = shutil.which("kubectl")
MANIFESTS = REPO / "manifests"
OVERLAYS = sorted(p.parent for p in (MANIFESTS / "overlays").glob("*/kustomization.yaml"))
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

# What the embedded API server cannot take on a dry run, and why (the rest is applied):
# CRDs it serves already (its own), kinds whose CRDs an install brings (cert-manager's,
# prometheus-operator's), and webhook configurations pointing at a Service (it has no cluster
# network to call one through).
SKIPPED_KINDS = {
    "CustomResourceDefinition",
    "Issuer",
    "Certificate",
    "ServiceMonitor",
    "PrometheusRule",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}


def render(directory: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    meta = doc.get("metadata") or {}
    return (doc["kind"], meta.get("namespace", ""), meta["name"])


def test_the_single_file_install_is_the_base_render() -> None:
    rendered = sorted(render(MANIFESTS / "base"), key=key)
    on_disk = [d for d in yaml.safe_load_all((MANIFESTS / "vulcan.yaml").read_text()) if d]
    assert sorted(on_disk, key=key) == rendered, "run `make manifests`"


def test_every_overlay_renders_the_base_and_its_own_parts() -> None:
    base = {key(d) for d in render(MANIFESTS / "base")}
    assert OVERLAYS, "no overlays found"
    for overlay in OVERLAYS:
        keys = {key(d) for d in render(overlay)}
        assert base <= keys, overlay.name
    second = {key(d) for d in render(MANIFESTS / "overlays" / "second-scheduler")}
    assert ("Deployment", "vulcan-system", "vulcan-scheduler") in second


def test_the_extender_and_controllers_run_as_non_root_with_probes_and_two_replicas() -> None:
    deployments = {
        d["metadata"]["name"]: d for d in render(MANIFESTS / "base") if d["kind"] == "Deployment"
    }
    assert set(deployments) == {"vulcan-extender", "vulcan-controllers"}
    for deployment in deployments.values():
        spec = deployment["spec"]
        assert spec["replicas"] == 2  # leader election picks the one that acts
        pod = spec["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        (container,) = pod["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    extender_args = deployments["vulcan-extender"]["spec"]["template"]["spec"]["containers"][0]
    assert "--leader-elect=true" in extender_args["args"]


def test_what_renders_is_accepted_by_an_api_server_without_warnings(tmp_path: Path) -> None:
    assert KUBECTL is not None
    kubeconfig = tmp_path / "kubeconfig"
    apiserver, _ = sim_apiserver_process(kubeconfig)
    try:
        kubectl = [KUBECTL, "--kubeconfig", str(kubeconfig), "--request-timeout=20s"]
        # The namespace first, as `kubectl apply` of the install creates it before the rest
        # (a dry run creates nothing for the others to land in).
        subprocess.run([*kubectl, "create", "namespace", "vulcan-system"], check=True)
        for directory in [MANIFESTS / "base", *OVERLAYS]:
            docs = [
                d
                for d in render(directory)
                if d["kind"] not in SKIPPED_KINDS and d["kind"] != "Namespace"
            ]
            result = subprocess.run(
                [*kubectl, "apply", "--dry-run=server", "-f", "-"],
                input=yaml.safe_dump_all(docs),
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0, (directory.name, result.stderr)
            assert "Warning" not in result.stderr, (directory.name, result.stderr)
            assert result.stdout.count("(server dry run)") == len(docs), result.stdout
    finally:
        apiserver.send_signal(signal.SIGTERM)
        apiserver.wait(timeout=20)


def test_the_cluster_scheduler_stanza_routes_only_marked_pods_to_vulcan() -> None:
    """Mode 2's stanza is a valid KubeSchedulerConfiguration fragment whose two entries each
    name one of vulcan's markers, the controllers add those markers, and `vulcan sim up
    --install-mode cluster-scheduler` runs the very same entries."""
    from core.api.keys import BINDING_MARKER, MARKERS, SCHEDULING_MARKER
    from sim.scheduler.config import API_VERSION, KIND, parse_config, sim_config

    docs = render(MANIFESTS / "overlays" / "cluster-scheduler")
    (configmap,) = [d for d in docs if d["metadata"]["name"] == "vulcan-kube-scheduler-extenders"]
    stanza = yaml.safe_load(configmap["data"]["extenders.yaml"])
    config = parse_config({"apiVersion": API_VERSION, "kind": KIND, **stanza})
    assert "volcano" in config.scheduler_names
    assert [[r.name for r in e.managed_resources] for e in config.extenders] == [
        [SCHEDULING_MARKER],
        [BINDING_MARKER],
    ]
    assert config.ignored_resources == set(MARKERS)
    sim = sim_config("http://sim", markers=MARKERS)["extenders"]
    url = stanza["extenders"][0]["urlPrefix"]
    assert [{**e, "urlPrefix": url} for e in sim] == stanza["extenders"]
    (controllers,) = [d for d in docs if d["kind"] == "Deployment" and "controllers" in key(d)[2]]
    args = controllers["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--pod-resource-markers={','.join(MARKERS)}" in args
    # A gang member that opted in with the scheduling marker alone would be bound by
    # kube-scheduler past the gang barrier: the extender refuses it (`--bind-marker`).
    (extender,) = [d for d in docs if key(d) == ("Deployment", "vulcan-system", "vulcan-extender")]
    extender_args = extender["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--bind-marker={BINDING_MARKER}" in extender_args


def _seconds(duration: str) -> float:
    from core.durations import parse_duration

    return parse_duration(duration)


def test_the_extender_is_told_the_bind_timeout_kube_scheduler_is_configured_with() -> None:
    """The extender warns at start when kube-scheduler's bind httpTimeout is not longer than
    its gang timeout; it knows that timeout only from --scheduler-bind-timeout, so every install
    passes the value its kube-scheduler configuration sets (no false warning)."""
    flags: set[float] = set()
    for directory in [MANIFESTS / "base", *OVERLAYS]:
        docs = render(directory)
        (extender,) = [
            d for d in docs if key(d) == ("Deployment", "vulcan-system", "vulcan-extender")
        ]
        args = extender["spec"]["template"]["spec"]["containers"][0]["args"]
        (flag,) = [a.split("=", 1)[1] for a in args if a.startswith("--scheduler-bind-timeout=")]
        flags.add(_seconds(flag))
        gang = [a.split("=", 1)[1] for a in args if a.startswith("--gang-timeout=")]
        assert _seconds(flag) > (_seconds(gang[0]) if gang else 60.0)
        bind_timeouts = [
            _seconds(entry["httpTimeout"])
            for doc in docs
            if doc["kind"] == "ConfigMap"
            for text in (doc.get("data") or {}).values()
            for config in [yaml.safe_load(text)]
            if isinstance(config, dict)
            for entry in config.get("extenders") or []
            if entry.get("bindVerb")
        ]
        if directory.parent.name == "overlays":
            assert bind_timeouts, f"{directory.name}: no bind extender entry found"
        assert all(t == _seconds(flag) for t in bind_timeouts), (directory.name, bind_timeouts)
    assert len(flags) == 1


def test_the_hypernode_discovery_component_mounts_volcanos_configuration(tmp_path: Path) -> None:
    component = MANIFESTS / "components" / "hypernode-discovery"
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [
                    os.path.relpath(MANIFESTS / "overlays" / "second-scheduler", tmp_path)
                ],
                "components": [os.path.relpath(component, tmp_path)],
            }
        )
    )
    docs = {key(d): d for d in render(tmp_path)}
    config_map = docs[("ConfigMap", "vulcan-system", "volcano-controller-configmap")]
    discovery = parse(config_map["data"]["volcano-controller.conf"])
    assert discovery is not None
    assert discovery.tiers == {"topologyA3": ("volcano.sh/hypernode", "volcano.sh/hypercluster")}
    pod = docs[("Deployment", "vulcan-system", "vulcan-controllers")]["spec"]["template"]["spec"]
    flag = next(a for a in pod["containers"][0]["args"] if a.startswith("--hypernode-discovery"))
    mount = next(
        m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "volcano-controller-conf"
    )
    assert flag.split("=", 1)[1] == f"{mount['mountPath']}/volcano-controller.conf"
    volume = next(v for v in pod["volumes"] if v["name"] == "volcano-controller-conf")
    assert volume["configMap"]["name"] == "volcano-controller-configmap"
