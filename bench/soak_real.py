"""`python -m bench.soak --real`: the soak's cluster on a real control plane.

The cluster `vulcan sim up --control-plane real` starts (vulcan.real_cluster.LocalCluster):
etcd, kube-apiserver, kube-controller-manager (every controller: garbage collector, node
lifecycle, taint eviction, Deployments) and kube-scheduler from `KUBEBUILDER_ASSETS` /
`VULCAN_KUBE_ASSETS`, vulcan installed from the second-scheduler overlay (the extender and the
controllers with the install's ServiceAccount tokens, the webhooks registered) and the nodes
from `vulcan sim kubelets`. A node fails as on the embedded cluster (its hollow kubelet stops
renewing its lease when annotated so); the real node lifecycle controller then marks it and the
taint eviction controller evicts its pods after `pod_eviction_timeout` seconds (the pods'
default not-ready/unreachable tolerations, set on kube-apiserver).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from bench.sim_cluster import SimCluster
from core.kube.client import NAMESPACES, ApiError, KubeClient, Resource
from core.kube.flags import ClientOptions
from vulcan.real_cluster.assets import find_assets
from vulcan.real_cluster.cluster import LocalCluster, Settings

INSTALL_MODE = "second-scheduler"
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", True, "ServiceAccount")


@contextlib.asynccontextmanager
async def real_cluster(
    nodes: int,
    profile: str,
    state: Path,
    start_timeout: float,
    *,
    namespace: str,
    extender_flags: tuple[str, ...] = (),
    extender_conf: Path | None = None,
    pod_eviction_timeout: int = 5,
    node_monitor_grace_period: str = "20s",
) -> AsyncIterator[SimCluster]:
    """A real control plane with vulcan installed and `nodes` hollow nodes of `profile`, and
    `namespace` made with its default ServiceAccount (pods are refused until it exists); a
    client on it; everything stopped on the way out."""
    settings = Settings(
        mode=INSTALL_MODE,
        node_profiles=(f"count={nodes},{profile}",),
        pod_duration="forever",  # each pod says its own (vulcan.sh/sim-duration)
        extender_flags=extender_flags,
        extender_conf=extender_conf,
        apiserver_flags=(
            f"--default-not-ready-toleration-seconds={pod_eviction_timeout}",
            f"--default-unreachable-toleration-seconds={pod_eviction_timeout}",
            # vulcan's audited requests over a long soak: kept to one 50 MB file and a backup
            "--audit-log-maxsize=50",
            "--audit-log-maxbackup=1",
        ),
        controller_manager_flags=(f"--node-monitor-grace-period={node_monitor_grace_period}",),
        timeout=start_timeout,
    )
    # AssetsError says where the binaries were looked for.
    local = LocalCluster(find_assets(), settings, root=state)
    client: KubeClient | None = None
    try:
        await asyncio.to_thread(local.start)
        assert local.install is not None
        client = await KubeClient.connect(
            ClientOptions(kubeconfig=str(local.kubeconfig), qps=0, burst=0)
        )
        await _namespace(client, namespace, start_timeout)
        yield SimCluster(client, state, extender=local.install.extender_url)
    finally:
        if client is not None:
            await client.close()
        await asyncio.to_thread(local.stop)


async def _namespace(client: KubeClient, name: str, timeout: float) -> None:
    try:
        await client.create(NAMESPACES, {"metadata": {"name": name}})
    except ApiError as exc:
        if not exc.conflict:
            raise
    # kube-controller-manager's ServiceAccount controller makes it; the admission plugin of
    # the same name refuses the namespace's pods until then.
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await client.get(SERVICE_ACCOUNTS, "default", name)
            return
        except ApiError as exc:
            if not exc.not_found or asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.2)
