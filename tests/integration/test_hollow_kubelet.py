"""Hollow kubelets and the node lifecycle controller against the embedded API server over real
HTTP, with no scheduler: the tests bind pods themselves."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from core.kube.client import EVENTS, LEASES, NODES, PODGROUPS, PODS, ApiError, KubeClient
from core.kube.informer import Informer
from sim.apiserver.server import EmbeddedApiServer
from sim.kubelet import HollowKubelets, NodeProfile, parse_node_profile
from sim.kubelet.keys import SIM_DURATION, SIM_EXIT_CODE, SIM_NODE_STATE
from sim.nodelifecycle import NodeLifecycleController

T = TypeVar("T")

NS = "default"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
TIMEOUT = 15.0  # overall bound for anything awaited; the events normally come in well under 1 s


async def eventually(
    fetch: Callable[[], Awaitable[T]], check: Callable[[T], bool], timeout: float = TIMEOUT
) -> T:
    """Poll `fetch` until `check` holds (short interval, overall timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await fetch()
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout}s; last value: {value}")
        await asyncio.sleep(0.02)


@pytest_asyncio.fixture
async def server() -> AsyncIterator[EmbeddedApiServer]:
    async with EmbeddedApiServer(watch_history=5000, bookmark_interval=0.2) as api:
        yield api


@pytest_asyncio.fixture
async def client(server: EmbeddedApiServer) -> AsyncIterator[KubeClient]:
    async with await KubeClient.connect(master=server.url, qps=0, retry_initial=0.05) as kube:
        yield kube


def kubelets(client: KubeClient, nodes: int = 1, **kwargs: Any) -> HollowKubelets:
    return HollowKubelets(client, [NodeProfile(count=nodes)], **kwargs)


@pytest_asyncio.fixture
async def lifecycle(client: KubeClient) -> AsyncIterator[NodeLifecycleController]:
    controller = NodeLifecycleController(client, node_monitor_period=0.1)
    await controller.start()
    yield controller
    await controller.stop()


class _Seen:
    __slots__ = ("key", "obj", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        self.key = obj["metadata"]["name"]
        self.rv = obj["metadata"]["resourceVersion"]
        self.obj = obj


class PodHistory:
    """Every version of every pod, as a watch delivers them (so short-lived states are seen)."""

    def __init__(self, client: KubeClient) -> None:
        self.versions: dict[str, list[dict[str, Any]]] = {}
        self.informer: Informer[_Seen] = Informer(client, PODS, _Seen, namespace=NS)
        self.informer.add_handlers(
            self._seen, lambda _old, new: self._seen(new), lambda last: self._seen(last)
        )

    def _seen(self, record: _Seen) -> None:
        self.versions.setdefault(record.key, []).append(record.obj)

    def phases(self, name: str) -> list[str]:
        phases: list[str] = []
        for obj in self.versions.get(name, ()):
            phase = (obj.get("status") or {}).get("phase")
            if not phases or phases[-1] != phase:
                phases.append(phase)
        return phases

    def first(self, name: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return next(obj for obj in self.versions.get(name, ()) if check(obj))

    async def caught_up(self, name: str, check: Callable[[dict[str, Any]], bool]) -> None:
        """Wait until the watch has delivered a version of `name` that passes `check` (it may
        lag behind a GET)."""

        async def seen() -> bool:
            return any(check(obj) for obj in self.versions.get(name, ()))

        await eventually(seen, bool)


@pytest_asyncio.fixture
async def history(client: KubeClient) -> AsyncIterator[PodHistory]:
    recorder = PodHistory(client)
    task = asyncio.create_task(recorder.informer.run())
    await recorder.informer.wait_synced(TIMEOUT)
    yield recorder
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def pod_manifest(
    name: str,
    *,
    duration: str | None = None,
    exit_code: int | None = None,
    restart_policy: str = "Never",
    group: str | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if duration is not None:
        annotations[SIM_DURATION] = duration
    if exit_code is not None:
        annotations[SIM_EXIT_CODE] = str(exit_code)
    if group is not None:
        annotations["scheduling.k8s.io/group-name"] = group
    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "containers": [{"name": "main", "image": "busybox:1.36"}],
    }
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": name, "annotations": annotations}, "spec": spec}


async def run_pod(client: KubeClient, node: str, name: str, **kwargs: Any) -> dict[str, Any]:
    """Create the pod and bind it to `node`, as a scheduler would."""
    pod = await client.create(PODS, pod_manifest(name, **kwargs), NS)
    await client.bind_pod(NS, name, node, uid=pod["metadata"]["uid"])
    return pod


async def get_pod(client: KubeClient, name: str) -> dict[str, Any] | None:
    try:
        return await client.get(PODS, name, NS)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


def phase(pod: dict[str, Any] | None) -> str | None:
    return None if pod is None else (pod.get("status") or {}).get("phase")


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


def container(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["status"]["containerStatuses"][0]


def taint_set(node: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in node["spec"].get("taints") or ()}


# ------------------------------------------------------------------------------- nodes


async def test_nodes_register_with_profile_ready_status_and_renewed_leases(
    client: KubeClient,
) -> None:
    profiles = [
        NodeProfile(
            count=2,
            capacity={"cpu": "8", "memory": "32Gi", "pods": "50"},
            labels={"topology.kubernetes.io/zone": "a"},
        ),
        parse_node_profile("nvidia.com/gpu=8,count=1"),
    ]
    hollow = HollowKubelets(client, profiles, lease_interval=0.1)
    await hollow.start()
    try:
        assert hollow.node_names == ["hollow-node-0", "hollow-node-1", "hollow-node-2"]
        nodes = {n["metadata"]["name"]: n for n in (await client.list(NODES))["items"]}
        assert set(nodes) == set(hollow.node_names)
        small, gpu = nodes["hollow-node-1"], nodes["hollow-node-2"]
        assert small["status"]["capacity"] == {"cpu": "8", "memory": "32Gi", "pods": "50"}
        assert small["status"]["allocatable"] == small["status"]["capacity"]
        assert gpu["status"]["capacity"] == {
            "cpu": "32",
            "memory": "128Gi",
            "ephemeral-storage": "100Gi",
            "nvidia.com/gpu": "8",
            "pods": "110",
        }
        labels = small["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == "hollow-node-1"
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["kubernetes.io/arch"] == "amd64"
        assert labels["topology.kubernetes.io/zone"] == "a"
        assert labels["node.kubernetes.io/instance-type"] == "cpu8-mem32Gi"
        assert gpu["metadata"]["labels"]["node.kubernetes.io/instance-type"] == (
            "cpu32-mem128Gi-gpu8"
        )
        ready = condition(small, "Ready")
        assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
        assert ready["message"] == "kubelet is posting ready status"
        assert ready["lastHeartbeatTime"] and ready["lastTransitionTime"]
        for pressure in ("MemoryPressure", "DiskPressure", "PIDPressure"):
            assert condition(small, pressure)["status"] == "False"
        info = small["status"]["nodeInfo"]
        # The API server's version (its /version), not a version of the hollow kubelet's own:
        # kubectl warns about a kubelet newer than its server.
        assert info["kubeletVersion"] == (await client.request("GET", "/version"))["gitVersion"]
        assert info["kubeletVersion"] == "v1.32.0"
        assert info["containerRuntimeVersion"] == "vulcan-hollow://1"
        addresses = {a["type"]: a["address"] for a in small["status"]["addresses"]}
        assert addresses["Hostname"] == "hollow-node-1"
        assert addresses["InternalIP"].startswith("10.")
        ips = {
            next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP")
            for n in nodes.values()
        }
        assert len(ips) == 3
        # Admission tainted every new Node; with no node lifecycle controller running the
        # taint stays, as on a real cluster.
        assert (NOT_READY, "NoSchedule") in taint_set(small)

        lease = await client.get(LEASES, "hollow-node-0", "kube-node-lease")
        assert lease["spec"]["holderIdentity"] == "hollow-node-0"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert MICRO_TIME.match(lease["spec"]["renewTime"])
        first = lease["spec"]["renewTime"]
        renewed = await eventually(
            lambda: client.get(LEASES, "hollow-node-0", "kube-node-lease"),
            lambda lease: lease["spec"]["renewTime"] > first,
        )
        assert MICRO_TIME.match(renewed["spec"]["renewTime"])
    finally:
        await hollow.stop()


async def test_a_restarted_sim_adopts_its_nodes(client: KubeClient) -> None:
    first = kubelets(client, 1)
    await first.start()
    created = await client.get(NODES, "hollow-node-0")
    await first.stop()
    second = kubelets(client, 1)
    await second.start()
    try:
        adopted = await client.get(NODES, "hollow-node-0")
        assert adopted["metadata"]["uid"] == created["metadata"]["uid"]
        assert condition(adopted, "Ready")["status"] == "True"
    finally:
        await second.stop()


async def test_lifecycle_controller_clears_the_admission_taint(
    client: KubeClient, lifecycle: NodeLifecycleController
) -> None:
    hollow = kubelets(client, 2)
    await hollow.start()
    try:
        for name in hollow.node_names:
            node = await eventually(
                lambda name=name: client.get(NODES, name), lambda n: not taint_set(n)
            )
            assert condition(node, "Ready")["status"] == "True"
    finally:
        await hollow.stop()


# -------------------------------------------------------------------------------- pods


async def test_bound_pod_runs_then_succeeds(client: KubeClient, history: PodHistory) -> None:
    hollow = kubelets(client, 1, start_delay=0.05)
    await hollow.start()
    try:
        await run_pod(client, "hollow-node-0", "short", duration="0.2s")
        done = await eventually(lambda: get_pod(client, "short"), lambda p: phase(p) == "Succeeded")
        await history.caught_up("short", lambda p: phase(p) == "Succeeded")
        assert history.phases("short") == ["Pending", "Running", "Succeeded"]
        creating = history.first(
            "short", lambda p: "containerStatuses" in p["status"] and phase(p) == "Pending"
        )
        assert container(creating)["state"] == {"waiting": {"reason": "ContainerCreating"}}
        running = history.first("short", lambda p: phase(p) == "Running")
        node = await client.get(NODES, "hollow-node-0")
        node_ip = next(a for a in node["status"]["addresses"] if a["type"] == "InternalIP")
        status = running["status"]
        assert status["hostIP"] == node_ip["address"]
        assert status["podIP"].startswith("10.244.")
        assert status["podIPs"] == [{"ip": status["podIP"]}]
        assert status["startTime"]
        for type_ in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
            assert condition(running, type_)["status"] == "True"
        assert condition(running, "PodScheduled")["status"] == "True"  # the binding's, kept
        main = container(running)
        assert main["name"] == "main"
        assert main["image"] == "busybox:1.36"
        assert main["imageID"].startswith("docker.io/library/busybox@sha256:")
        assert main["containerID"].startswith("vulcan-hollow://")
        assert (main["ready"], main["started"], main["restartCount"]) == (True, True, 0)
        assert main["state"]["running"]["startedAt"]

        terminated = container(done)["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
        assert terminated["containerID"] == main["containerID"]
        assert terminated["startedAt"] and terminated["finishedAt"]
        ready = condition(done, "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "PodCompleted")
        assert condition(done, "PodScheduled")["status"] == "True"
        assert done["status"]["podIP"] == status["podIP"]
    finally:
        await hollow.stop()


async def test_exit_code_annotation_fails_the_pod(client: KubeClient) -> None:
    hollow = kubelets(client, 1)
    await hollow.start()
    try:
        await run_pod(client, "hollow-node-0", "crash", duration="0.1s", exit_code=3)
        failed = await eventually(lambda: get_pod(client, "crash"), lambda p: phase(p) == "Failed")
        terminated = container(failed)["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
        ready = condition(failed, "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "PodFailed")
    finally:
        await hollow.stop()


async def test_restart_policies(client: KubeClient, history: PodHistory) -> None:
    hollow = kubelets(client, 1, restart_backoff=(0.05, 0.1))
    await hollow.start()
    try:
        node = "hollow-node-0"
        await run_pod(
            client, node, "flaky", duration="0.05s", exit_code=1, restart_policy="OnFailure"
        )
        await run_pod(client, node, "once", duration="0.05s", restart_policy="OnFailure")
        await run_pod(client, node, "service", duration="0.05s", restart_policy="Always")

        flaky = await eventually(
            lambda: get_pod(client, "flaky"), lambda p: p and container(p)["restartCount"] >= 2
        )
        assert phase(flaky) == "Running"
        last = container(flaky)["lastState"]["terminated"]
        assert (last["exitCode"], last["reason"]) == (1, "Error")
        await history.caught_up(
            "flaky", lambda p: phase(p) == "Running" and container(p)["restartCount"] >= 2
        )
        backoff = history.first(
            "flaky",
            lambda p: phase(p) == "Running" and "waiting" in container(p)["state"],
        )
        waiting = container(backoff)["state"]["waiting"]
        assert waiting["reason"] == "CrashLoopBackOff"
        assert "restarting failed container=main pod=flaky_default" in waiting["message"]
        assert condition(backoff, "Ready")["reason"] == "ContainersNotReady"

        once = await eventually(lambda: get_pod(client, "once"), lambda p: phase(p) == "Succeeded")
        assert container(once)["restartCount"] == 0

        service = await eventually(
            lambda: get_pod(client, "service"), lambda p: p and container(p)["restartCount"] >= 2
        )
        assert container(service)["lastState"]["terminated"]["exitCode"] == 0
        assert "Succeeded" not in history.phases("service")
        assert "Failed" not in history.phases("service")
    finally:
        await hollow.stop()


async def test_deleting_a_running_pod_is_confirmed(client: KubeClient, history: PodHistory) -> None:
    hollow = kubelets(client, 1)
    await hollow.start()
    try:
        pod = await run_pod(client, "hollow-node-0", "server", duration="forever")
        await eventually(lambda: get_pod(client, "server"), lambda p: phase(p) == "Running")
        await client.delete(PODS, "server", NS)  # graceful: the kubelet must confirm
        assert await eventually(lambda: get_pod(client, "server"), lambda p: p is None) is None
        await history.caught_up("server", lambda p: phase(p) == "Failed")
        last = history.versions["server"][-1]
        assert last["metadata"]["uid"] == pod["metadata"]["uid"]
        assert last["metadata"]["deletionTimestamp"]
        assert phase(last) == "Failed"
        terminated = container(last)["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (137, "Error")
    finally:
        await hollow.stop()


async def test_gang_members_progress_only_while_the_gang_is_complete(client: KubeClient) -> None:
    hollow = kubelets(client, 2)
    await hollow.start()
    try:
        await client.create(
            PODGROUPS,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "train"},
                "spec": {"minMember": 3},
            },
            NS,
        )
        names = ["train-0", "train-1", "train-2"]
        for i, name in enumerate(names[:2]):
            await run_pod(client, f"hollow-node-{i}", name, duration="0.2s", group="train")
        for name in names[:2]:
            await eventually(
                lambda name=name: get_pod(client, name), lambda p: phase(p) == "Running"
            )
        # Half a gang hangs: well past the 0.2 s run time, the two are still running (the one
        # bounded wait in these tests: it shows something does not happen).
        await asyncio.sleep(1.0)
        for name in names[:2]:
            assert phase(await get_pod(client, name)) == "Running"
        await run_pod(client, "hollow-node-1", names[2], duration="0.2s", group="train")
        for name in names:
            await eventually(
                lambda name=name: get_pod(client, name), lambda p: phase(p) == "Succeeded"
            )
    finally:
        await hollow.stop()


async def test_pods_without_a_podgroup_object_have_no_gang_rule(client: KubeClient) -> None:
    hollow = kubelets(client, 1)
    await hollow.start()
    try:
        await run_pod(client, "hollow-node-0", "lonely", duration="0.1s", group="missing")
        await eventually(lambda: get_pod(client, "lonely"), lambda p: phase(p) == "Succeeded")
    finally:
        await hollow.stop()


# ---------------------------------------------------------------------------- failures


async def test_failed_node_evicts_after_toleration_and_restore_confirms(
    client: KubeClient, lifecycle: NodeLifecycleController
) -> None:
    hollow = kubelets(client, 2, restart_backoff=(0.05, 0.1))
    await hollow.start()
    try:
        node = "hollow-node-0"
        await eventually(lambda: client.get(NODES, node), lambda n: not taint_set(n))
        short = [
            {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}
        ]
        forever = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}]
        await run_pod(client, node, "evicted", duration="inf", tolerations=short)
        await run_pod(client, node, "patient", duration="inf", tolerations=forever)
        await run_pod(client, node, "service", duration="inf", restart_policy="Always")
        await run_pod(client, "hollow-node-1", "elsewhere", duration="inf", tolerations=short)
        await run_pod(client, node, "finished", duration="0s", tolerations=short)
        for name in ("evicted", "patient", "service", "elsewhere"):
            await eventually(
                lambda name=name: get_pod(client, name), lambda p: phase(p) == "Running"
            )
        await eventually(lambda: get_pod(client, "finished"), lambda p: phase(p) == "Succeeded")

        # As `kubectl annotate node hollow-node-0 vulcan.sh/sim-node-state=failed` does.
        await client.patch(NODES, node, {"metadata": {"annotations": {SIM_NODE_STATE: "failed"}}})
        down = await eventually(
            lambda: client.get(NODES, node),
            lambda n: {(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")} <= taint_set(n),
        )
        ready = condition(down, "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "KubeletNotReady")
        assert "node failed" in ready["message"]
        no_execute = next(t for t in down["spec"]["taints"] if t["effect"] == "NoExecute")
        assert no_execute["timeAdded"]
        # A deletion while the node is down is not confirmed: its kubelet is gone.
        await client.delete(PODS, "patient", NS)

        evicted = await eventually(
            lambda: get_pod(client, "evicted"),
            lambda p: bool(p["metadata"].get("deletionTimestamp")),
        )
        # Terminating until the kubelet is back, in the phase it last reported: nothing else
        # on a real control plane finishes a pod on a lost node (pod GC only on a node tainted
        # out-of-service).
        assert phase(evicted) == "Running" and "reason" not in evicted["status"]
        disruption = condition(evicted, "DisruptionTarget")
        assert (disruption["status"], disruption["reason"]) == ("True", "DeletionByTaintManager")

        def evictions(found: dict[str, Any]) -> dict[str, str]:
            return {
                e["regarding"]["name"]: e["note"]
                for e in found["items"]
                if e["reason"] == "TaintManagerEviction"
            }

        events = await eventually(
            lambda: client.list(EVENTS, NS),
            lambda found: {"evicted", "finished"} <= set(evictions(found)),
        )
        assert evictions(events)["evicted"] == "Marking for deletion Pod default/evicted"
        # A finished pod is evicted too (the real controller looks at no phase), and the API
        # server deletes a Succeeded pod at once.
        assert await eventually(lambda: get_pod(client, "finished"), lambda p: p is None) is None
        patient = await get_pod(client, "patient")
        assert patient is not None and patient["metadata"]["deletionTimestamp"]
        assert phase(patient) == "Running"
        service = await get_pod(client, "service")  # tolerates not-ready for 300 s (default)
        assert phase(service) == "Running" and "deletionTimestamp" not in service["metadata"]
        elsewhere = await get_pod(client, "elsewhere")
        assert phase(elsewhere) == "Running" and "deletionTimestamp" not in elsewhere["metadata"]
        # The pods left on the node are marked not Ready (kube-controller-manager's
        # MarkPodsNotReady), each with a NodeNotReady Warning; the other node's stay Ready.
        service = await eventually(
            lambda: get_pod(client, "service"),
            lambda p: condition(p, "Ready")["status"] == "False",
        )
        assert phase(service) == "Running"
        assert condition(elsewhere, "Ready")["status"] == "True"

        def node_not_ready(found: dict[str, Any]) -> list[dict[str, Any]]:
            return [
                e
                for e in found["items"]
                if e["reason"] == "NodeNotReady" and e["regarding"]["name"] == "service"
            ]

        not_ready = node_not_ready(
            await eventually(lambda: client.list(EVENTS, NS), lambda f: bool(node_not_ready(f)))
        )
        assert (not_ready[0]["type"], not_ready[0]["note"]) == ("Warning", "Node is not ready")
        assert not_ready[0]["reportingController"] == "node-controller"

        await hollow.restore_node(node)
        restored = await eventually(lambda: client.get(NODES, node), lambda n: not taint_set(n))
        assert condition(restored, "Ready")["status"] == "True"
        assert await eventually(lambda: get_pod(client, "evicted"), lambda p: p is None) is None
        assert await eventually(lambda: get_pod(client, "patient"), lambda p: p is None) is None
        # The running container died with the node; restartPolicy Always restarts it.
        service = await eventually(
            lambda: get_pod(client, "service"),
            lambda p: container(p)["restartCount"] >= 1 and phase(p) == "Running",
        )
        assert container(service)["lastState"]["terminated"]["exitCode"] == 137
        # Its kubelet reports it Ready again once its container runs.
        await eventually(
            lambda: get_pod(client, "service"),
            lambda p: condition(p, "Ready")["status"] == "True",
        )
    finally:
        await hollow.stop()


async def test_fail_node_method_and_never_policy_after_restore(client: KubeClient) -> None:
    hollow = kubelets(client, 1)
    await hollow.start()
    try:
        await run_pod(client, "hollow-node-0", "batch", duration="inf")
        await eventually(lambda: get_pod(client, "batch"), lambda p: phase(p) == "Running")
        await hollow.fail_node("hollow-node-0")
        node = await client.get(NODES, "hollow-node-0")
        assert node["metadata"]["annotations"][SIM_NODE_STATE] == "failed"
        assert condition(node, "Ready")["status"] == "False"
        await hollow.restore_node("hollow-node-0")
        node = await client.get(NODES, "hollow-node-0")
        assert SIM_NODE_STATE not in node["metadata"].get("annotations", {})
        assert condition(node, "Ready")["status"] == "True"
        # restartPolicy Never: the container killed with the node fails the pod.
        failed = await eventually(lambda: get_pod(client, "batch"), lambda p: phase(p) == "Failed")
        assert container(failed)["state"]["terminated"]["exitCode"] == 137
        with pytest.raises(ValueError, match="not a node"):
            await hollow.fail_node("hollow-node-9")
    finally:
        await hollow.stop()


async def test_node_whose_lease_stops_becomes_unreachable(client: KubeClient) -> None:
    controller = NodeLifecycleController(
        client, node_monitor_grace_period=2.0, node_monitor_period=0.1
    )
    await controller.start()
    hollow = kubelets(client, 1, lease_interval=0.1)
    await hollow.start()
    try:
        node = "hollow-node-0"
        await eventually(lambda: client.get(NODES, node), lambda n: not taint_set(n))
        at_once = [
            {
                "key": UNREACHABLE,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 0,
            }
        ]
        await run_pod(client, node, "fragile", duration="inf", tolerations=at_once)
        await run_pod(client, node, "sturdy", duration="inf")
        for name in ("fragile", "sturdy"):
            await eventually(
                lambda name=name: get_pod(client, name), lambda p: phase(p) == "Running"
            )
        await hollow.stop()  # the kubelet process is gone: no more lease renewals

        lost = await eventually(
            lambda: client.get(NODES, node),
            lambda n: taint_set(n) == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")},
        )
        ready = condition(lost, "Ready")
        assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
        assert ready["message"] == "Kubelet stopped posting node status."
        assert condition(lost, "MemoryPressure")["status"] == "Unknown"
        fragile = await eventually(
            lambda: get_pod(client, "fragile"),
            lambda p: bool(p["metadata"].get("deletionTimestamp")),
        )
        assert phase(fragile) == "Running"  # terminating, as its kubelet last said
        sturdy = await eventually(  # tolerates unreachable for 300 s; marked not Ready
            lambda: get_pod(client, "sturdy"),
            lambda p: condition(p, "Ready")["status"] == "False",
        )
        assert phase(sturdy) == "Running" and "deletionTimestamp" not in sturdy["metadata"]

        # A new kubelet process for the same node brings it back and confirms the deletion.
        hollow = kubelets(client, 1, lease_interval=0.1)
        await hollow.start()
        await eventually(lambda: client.get(NODES, node), lambda n: not taint_set(n))
        assert await eventually(lambda: get_pod(client, "fragile"), lambda p: p is None) is None
    finally:
        await hollow.stop()
        await controller.stop()
