"""vulcan's image on a real control plane: the extender and the controllers run from the root
filesystem of dist/vulcan-image.tar (`make image`) with their Deployments' exact command and
arguments, as a kubelet would start the pods (tests/image_rootfs.py): the image's user, its
root filesystem read-only, the pod's ServiceAccount token, CA and namespace at
/var/run/secrets/kubernetes.io/serviceaccount with KUBERNETES_SERVICE_HOST/PORT (the in-cluster
configuration), the ConfigMap volumes where the Deployments mount them, and the host's network
(so the Deployments' own ports, which must be free). Their probes answer, and a PodGroup reaches
Inqueue on hollow nodes. Skips without the archive or where images cannot be run (not root)."""

from __future__ import annotations

import json
import socket
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO
from tests.image_rootfs import Image, can_run_images, command, unpack
from vulcan.real_cluster.control_plane import ControlPlane
from vulcan.real_cluster.install import VulcanInstall
from vulcan.real_cluster.manifests import NAMESPACE, find
from vulcan.real_cluster.processes import Child, wait_until

pytestmark = pytest.mark.real

ARCHIVE = REPO / "dist" / "vulcan-image.tar"
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
DEPLOYMENTS = ("vulcan-extender", "vulcan-controllers")
NODE_PROFILES = ["count=2,cpu=8,memory=32Gi"]


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    if not ARCHIVE.exists():
        pytest.skip(f"no {ARCHIVE.relative_to(REPO)}: run `make image` first")
    reason = can_run_images()
    if reason:
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="vulcan-image-") as tmp:
        yield unpack(ARCHIVE, Path(tmp) / "rootfs")


def pod_spec(install: VulcanInstall, deployment: str) -> dict[str, Any]:
    return find(install.docs, "Deployment", deployment)["spec"]["template"]["spec"]


def container_port(container: dict[str, Any]) -> int:
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == "http"]
    return int(port)


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        # as a server binds: connections of an earlier run in TIME_WAIT do not block it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def as_a_pod(install: VulcanInstall, image: Image, deployment: str) -> Child:
    """The Deployment's container run from the image as its pod would run: its command (the
    image's ENTRYPOINT when it names none) and arguments unchanged."""
    spec = pod_spec(install, deployment)
    (container,) = spec["containers"]
    argv = [*(container.get("command") or image.config["Entrypoint"]), *container["args"]]
    account = spec["serviceAccountName"]
    files = install.root / deployment
    (files / "serviceaccount").mkdir(parents=True)
    token = install.kubectl("create", "token", account, "-n", NAMESPACE, "--duration=1h")
    (files / "serviceaccount" / "token").write_text(token.strip())
    (files / "serviceaccount" / "namespace").write_text(NAMESPACE)
    # kube-apiserver's self-signed serving certificate (--cert-dir) is the CA to trust.
    ca = install.cp.root / "apiserver-certs" / "apiserver.crt"
    (files / "serviceaccount" / "ca.crt").write_bytes(ca.read_bytes())
    binds = {files / "serviceaccount": SERVICE_ACCOUNT}
    volumes = {v["name"]: v for v in spec.get("volumes") or ()}
    for mount in container.get("volumeMounts") or ():
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            assert mount["mountPath"] == "/tmp", "the runner gives /tmp a fresh tmpfs only"
            continue
        name = volume["configMap"]["name"]
        data = find(install.docs, "ConfigMap", name)["data"]
        (files / name).mkdir()
        for key, value in data.items():
            (files / name / key).write_text(value)
        binds[files / name] = mount["mountPath"]
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(install.cp.port)}
    for item in container.get("env") or ():
        assert "value" in item, f"{deployment}: env {item['name']} from a source not run here"
        env[item["name"]] = item["value"]
    child = Child(deployment, command(image, argv, binds=binds, env=env), install.cp.logs)
    install.children.append(child)
    child.start()
    return child


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def pods(image: Image, control_plane: ControlPlane) -> Iterator[tuple[VulcanInstall, dict]]:
    """The install applied (its Deployments not), the extender and the controllers run from
    the image as their pods, hollow nodes; {deployment: (child, its probe port)}."""
    install = VulcanInstall(control_plane, "second-scheduler", node_profiles=NODE_PROFILES)
    ports = {d: container_port(pod_spec(install, d)["containers"][0]) for d in DEPLOYMENTS}
    busy = [f"{d} :{p}" for d, p in ports.items() if not port_is_free(p)]
    if busy:
        pytest.skip(f"the Deployments' own ports are in use here: {', '.join(busy)}")
    try:
        install.apply_install()
        children = {d: (as_a_pod(install, image, d), ports[d]) for d in DEPLOYMENTS}
        for deployment, (child, port) in children.items():

            def ready(child: Child = child, port: int = port) -> bool:
                assert child.running, child.failure()
                return answers(f"http://127.0.0.1:{port}/readyz")

            wait_until(f"{deployment} from the image to be ready", ready, 120)
        install.start_kubelets(120)
        yield install, children
    finally:
        install.stop()


def test_the_extender_and_the_controllers_run_from_the_image_as_its_user(
    image: Image, pods: tuple[VulcanInstall, dict]
) -> None:
    _, children = pods
    for deployment, (child, port) in children.items():
        assert child.running, child.failure()
        assert answers(f"http://127.0.0.1:{port}/healthz"), deployment
        pid = child.process.pid  # the program itself: the runner ends by exec
        status = Path(f"/proc/{pid}/status").read_text()
        uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
        assert uid == image.config["User"].partition(":")[0], (deployment, uid)
        assert Path(f"/proc/{pid}/root").resolve() == image.rootfs.resolve(), deployment
        # --log-format=json; --leader-elect with the ServiceAccount's RBAC on its Lease
        lines = child.log_path.read_text().splitlines()
        records = [json.loads(line) for line in lines if line.startswith("{")]
        assert any(
            r["msg"] == "became leader" and r["lease"] == f"{NAMESPACE}/{deployment}"
            for r in records
        ), lines[:20]


def test_a_podgroup_reaches_inqueue(pods: tuple[VulcanInstall, dict]) -> None:
    install, _ = pods
    install.kubectl(
        "apply",
        "-f",
        "-",
        stdin="""apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: from-the-image, namespace: default}
spec:
  minMember: 2
  minResources: {cpu: "2"}
""",
    )
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/from-the-image"

    def phase() -> str:
        return ((install.cp.get(path) or {}).get("status") or {}).get("phase", "")

    wait_until("the PodGroup to be Inqueue", lambda: phase() == "Inqueue", 90)
