"""The real-Kubernetes tier: vulcan installed on a real control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler v1.36) with hollow nodes, driven with kubectl.

The cluster is the product's (`vulcan.real_cluster`, what `vulcan sim up --control-plane real`
starts); these fixtures only choose its settings. The binaries come from `KUBEBUILDER_ASSETS` or
`VULCAN_KUBE_ASSETS` (vulcan/real_cluster/assets.py); without them every test of the tier is
skipped, saying why. One control plane per test module (it starts in 10-60 s on a busy 2-core
machine); a module chooses its install mode, its nodes and extra extender flags with
module-level constants:

    INSTALL_MODE = "second-scheduler"          # or "cluster-scheduler"
    INSTALL_COMPONENTS = ("bind-marker",)      # manifests/components listed with the overlay
    NODE_PROFILES = ["count=4,cpu=8,memory=32Gi,nvidia.com/gpu=1"]
    EXTENDER_FLAGS = ("--gang-backoff=1s",)    # added to the Deployment's arguments
    POD_DURATION = "2s"                        # `vulcan sim kubelets --pod-duration`
    APISERVER_FLAGS = ("--default-unreachable-toleration-seconds=1",)
    CONTROLLER_MANAGER_FLAGS = ("--node-monitor-grace-period=20s",)
    CONTROLLER_MANAGER = False                 # a bare API server (the `control_plane` fixture)

Everything is stopped by pid and its temporary directory removed at the end of the module,
failed or not; a failed test's report carries the tail of every component's log.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import KUBECTL, SimCluster, wait_for
from vulcan.real_cluster.assets import AssetsError, find_assets
from vulcan.real_cluster.cluster import LocalCluster, Settings
from vulcan.real_cluster.control_plane import ControlPlane
from vulcan.real_cluster.install import VulcanInstall
from vulcan.real_cluster.processes import log_tail

BUILTIN_QUEUES = ("root", "default")
DEFAULT_PROFILES = ["count=4,cpu=8,memory=32Gi,nvidia.com/gpu=1"]
_running: list[ControlPlane] = []  # the module's control plane, for failure reports


class RealCluster(SimCluster):
    """The e2e tier's cluster handle (kubectl, API reads) over a real control plane, so the
    e2e helpers (GangWatch, wait_for, ...) work on it unchanged."""

    def __init__(self, local: LocalCluster) -> None:
        control_plane = local.plane
        assert local.install is not None
        install: VulcanInstall = local.install
        self.local = local
        self.control_plane = control_plane
        self.install = install
        self.process = None  # type: ignore[assignment]
        self.lines = []
        self.state = control_plane.root
        self.kubeconfig = control_plane.admin_kubeconfig
        self.api = control_plane.server
        self.token = control_plane.admin_token
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # kube-apiserver's self-signed serving certificate
        self.ssl = context
        self.extender = install.extender_url

    @property
    def nodes(self) -> list[str]:
        return self.install.node_names

    def apply_yaml(self, path: Path, *extra: str) -> str:
        """`kubectl apply -f PATH` as a user types it."""
        return self.kubectl("apply", "-f", str(path), *extra)


def assets_or_skip() -> Any:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (make test installs Debian's kubernetes-client)")
    try:
        return find_assets()
    except AssetsError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A bare control plane (no vulcan) for the module."""
    assets = assets_or_skip()
    root = Path(tempfile.mkdtemp(prefix="vulcan-real-"))
    plane = ControlPlane(
        assets,
        root,
        controller_manager=getattr(request.module, "CONTROLLER_MANAGER", True),
    )
    _running.append(plane)
    try:
        plane.start()
        yield plane
    finally:
        _running.remove(plane)
        plane.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[RealCluster]:
    """The product's local cluster with vulcan installed (the module's INSTALL_MODE)."""
    module = request.module
    settings = Settings(
        mode=getattr(module, "INSTALL_MODE", "second-scheduler"),
        node_profiles=tuple(getattr(module, "NODE_PROFILES", DEFAULT_PROFILES)),
        extender_flags=tuple(getattr(module, "EXTENDER_FLAGS", ())),
        pod_duration=getattr(module, "POD_DURATION", "10s"),
        components=tuple(getattr(module, "INSTALL_COMPONENTS", ())),
        apiserver_flags=tuple(getattr(module, "APISERVER_FLAGS", ())),
        controller_manager_flags=tuple(getattr(module, "CONTROLLER_MANAGER_FLAGS", ())),
    )
    local = LocalCluster(assets_or_skip(), settings)
    _running.append(local.plane)
    try:
        local.start()
        yield RealCluster(local)
    finally:
        _running.remove(local.plane)
        local.stop()


CLEANED_KINDS = ",".join(
    (
        "jobflows.flow.volcano.sh",
        "jobs.batch.volcano.sh",
        "jobtemplates.flow.volcano.sh",
        "deployments",
        "podgroups.scheduling.volcano.sh",
        "pods",
    )
)


@pytest.fixture(autouse=True)
def clean_slate(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on a vulcan cluster, passed or failed: its workloads deleted and their
    pods gone, its queues but the built-in ones deleted, so the next test starts on empty
    nodes."""
    yield
    if "cluster" not in request.fixturenames:
        return
    cluster: RealCluster = request.getfixturevalue("cluster")
    cluster.kubectl("delete", CLEANED_KINDS, "--all", "--ignore-not-found", "--wait=true")
    queues = cluster.get("/apis/scheduling.volcano.sh/v1beta1/queues")["items"]
    extra = [q["metadata"]["name"] for q in queues if q["metadata"]["name"] not in BUILTIN_QUEUES]
    if extra:
        cluster.kubectl("delete", "queue", *extra, "--ignore-not-found", "--wait=true")
    wait_for("the test's pods to be gone", lambda: not cluster.pods(), 60)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and _running:
        logs = sorted(_running[-1].logs.glob("*.log"))
        for path in logs:
            report.sections.append((f"real cluster: {path.name}", log_tail(path, 40)))
    return report
