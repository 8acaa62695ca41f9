"""`vulcan explain` end to end: `vulcan sim up --with-extender --with-controllers` on GPU nodes,
objects created with kubectl, and `vulcan explain` run as a user runs it. For each pending cause
its FIRST line names the cause, with the extender's debug endpoints (--extender) and from the
API server alone. Also: the debug endpoints' JSON, and `--enable-debug-endpoints=false`.

One cluster for the module (4 nodes x 8 cpu, 2 GPUs); every test cleans up after itself and
uses queues of its own, so the queues' shares of one test never depend on another's."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import SimCluster, start_cluster, wait_for
from tests.helpers import REPO, announced_url, sim_apiserver_process, vulcan_process

LABELS = {"e2e": "explain"}
GROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path_factory.mktemp("sim-explain"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=8,memory=32Gi,nvidia.com/gpu=2",
        "--with-extender",
        "--with-controllers",
        "--pod-duration",
        "forever",
        "--gang-backoff",
        "1s",
    )


@pytest.fixture(autouse=True)
def clean(cluster: SimCluster) -> Iterator[None]:
    yield

    def gone() -> bool:
        # Again until nothing is left: a flow or job controller mid-sync may make one more.
        for kind in ("jobflows", "jobtemplates", "vcjob", "podgroups"):
            cluster.kubectl("delete", kind, "--all", "--wait=false", check=False)
        cluster.kubectl("delete", "pods", "--all", "--grace-period=0", "--force", check=False)
        left = cluster.kubectl("get", "jobflows,vcjob,pods", "-o", "name")
        return not left.strip()

    wait_for("the test's objects to be gone", gone, 60)


# ------------------------------------------------------------------------------ helpers


def explain(cluster: SimCluster, kind: str, name: str, *, extender: bool = True) -> str:
    """`vulcan explain` as a user runs it; its whole output (exit status 0)."""
    args = [sys.executable, "-m", "vulcan", "explain", kind, name]
    args += ["--kubeconfig", str(cluster.kubeconfig)]
    if extender:
        assert cluster.extender is not None
        args += ["--extender", cluster.extender]
    result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def first_line(cluster: SimCluster, kind: str, name: str, *, extender: bool = True) -> str:
    return explain(cluster, kind, name, extender=extender).splitlines()[0]


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, **spec},
    }


def group(
    name: str, members: int, queue_name: str = "default", **annotations: str
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "labels": LABELS, "annotations": annotations},
        "spec": {"minMember": members, "queue": queue_name},
    }


def member(
    name: str,
    group_name: str,
    *,
    cpu: str = "1",
    gpu: int = 0,
    grace: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    limits = {"cpu": cpu, "memory": "1Gi"}
    if gpu:
        limits["nvidia.com/gpu"] = str(gpu)
    annotations = {"scheduling.k8s.io/group-name": group_name}
    if grace is not None:  # the pod takes its whole grace period to stop
        annotations["vulcan.sh/sim-termination-duration"] = "forever"
        spec["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": LABELS, "annotations": annotations},
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}],
            **spec,
        },
    }


def gang(name: str, members: int, queue_name: str = "default", **kw: Any) -> list[dict[str, Any]]:
    return [group(name, members, queue_name)] + [
        member(f"{name}-{i}", name, **kw) for i in range(members)
    ]


def condition_says(cluster: SimCluster, name: str, text: str) -> bool:
    found = cluster.get(f"{GROUPS}/{name}") or {}
    return any(
        text in (c.get("message") or "")
        for c in (found.get("status") or {}).get("conditions") or ()
    )


def bound(cluster: SimCluster, prefix: str) -> int:
    return sum(
        1
        for p in cluster.pods()
        if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
    )


def _count(cluster: SimCluster, prefix: str) -> int:
    return sum(1 for p in cluster.pods() if p["metadata"]["name"].startswith(prefix))


def debug(cluster: SimCluster, path: str) -> Any:
    assert cluster.extender is not None
    with urllib.request.urlopen(cluster.extender + path, timeout=10) as response:
        return json.loads(response.read())


# ------------------------------------------------------------------------------ queue causes


def test_a_closed_queue(cluster: SimCluster) -> None:
    cluster.apply([queue("shut"), group("s-0", 1, "shut")])
    uid = wait_for(
        "the queue", lambda: (cluster.get(f"{QUEUES}/shut") or {}).get("metadata", {}).get("uid")
    )
    cluster.apply(
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": "close-shut"},
            "action": "CloseQueue",
            "target": {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "name": "shut",
                "uid": uid,
            },
        }
    )
    # Closing while its PodGroup exists (Volcano's state machine), then the member arrives.
    wait_for(
        "the queue to close",
        lambda: (
            (cluster.get(f"{QUEUES}/shut") or {})
            .get("status", {})
            .get("state", "")
            .startswith("Clos")
        ),
    )
    cluster.apply(member("s-0-0", "s-0"))
    wait_for("the extender's refusal", lambda: condition_says(cluster, "s-0", "queue shut is"))
    for extender in (True, False):
        line = first_line(cluster, "pod", "s-0-0", extender=extender)
        assert line.startswith("pod default/s-0-0 is Pending: queue shut is Clos"), line
        assert "is not Open admits no new work" in line


def test_a_queue_at_its_capability(cluster: SimCluster) -> None:
    cluster.apply([queue("capped", capability={"cpu": "4"}), *gang("c-0", 4, "capped")])
    wait_for("c-0 to run", lambda: bound(cluster, "c-0-") == 4 or None)
    cluster.apply(gang("c-1", 1, "capped", cpu="2"))
    wait_for("the extender's refusal", lambda: condition_says(cluster, "c-1", "capped"))
    for extender in (True, False):
        line = first_line(cluster, "podgroup", "c-1", extender=extender)
        # Enqueued (it declares no minResources) when the extender saw its PodGroup before its
        # pod, as Volcano enqueues it; else refused with its pod at once: either way it waits.
        phase = "Inqueue" if " is Inqueue: " in line else "Pending"
        assert line == (
            f"podgroup default/c-1 is {phase}: queue capped is at its capability: it holds cpu 4 "
            "of its capability cpu 4, and the gang needs cpu 2 more"
        ), line


def test_over_the_deserved_share_while_another_queue_waits(cluster: SimCluster) -> None:
    """qa runs 16 of the 32 cpu; qb's gang (short of a member) asks for 16: each deserves 16,
    so qa's next gang waits although 16 cpu are free."""
    cluster.apply([queue("qa"), queue("qb"), *gang("a-0", 8, "qa", cpu="2")])
    wait_for("a-0 to run", lambda: bound(cluster, "a-0-") == 8 or None)
    waiting = gang("b-0", 8, "qb", cpu="2")
    waiting[0]["spec"]["minMember"] = 9
    cluster.apply(waiting)
    cluster.apply(gang("a-1", 2, "qa", cpu="2"))
    wait_for("the extender's refusal", lambda: condition_says(cluster, "a-1", "over its share"))
    for extender in (True, False):
        line = first_line(cluster, "podgroup", "a-1", extender=extender)
        assert "queue qa is at its deserved share: it holds cpu 16 and deserves cpu 16" in line
        assert "the gang needs cpu 4 more while queue qb waits for cpu" in line
    # The debug view of the queues: what the last pass computed, who waits.
    queues = {q["name"]: q for q in debug(cluster, "/debug/queues")["queues"]}
    assert queues["qa"]["deserved"]["cpu"] == "16" and queues["qa"]["allocated"]["cpu"] == "16"
    assert queues["qb"]["waiting"]["cpu"] == "16"  # its 8 pods wait
    assert set(queues["qa"]) >= {"state", "weight", "capability", "request", "inqueue", "borrowing"}


# ------------------------------------------------------------------------------ gang causes


def test_a_gang_missing_members(cluster: SimCluster) -> None:
    docs = gang("short", 3)
    cluster.apply(docs[:3])  # the PodGroup and 2 of its 3 members
    wait_for("the extender's refusal", lambda: condition_says(cluster, "short", "2/3"))
    for extender in (True, False):
        line = first_line(cluster, "podgroup", "short", extender=extender)
        assert line == (
            "podgroup default/short is Inqueue: the gang is missing members: 2 of the 3 pods it "
            "needs exist (minMember 3)"
        ), line


def test_a_member_larger_than_any_node_cannot_fit_this_cluster(cluster: SimCluster) -> None:
    """4 GPUs per member on nodes of 2: no wait helps, and explain says so."""
    cluster.apply(gang("gpus", 2, gpu=4))
    wait_for("the extender's refusal", lambda: condition_says(cluster, "gpus", "nvidia.com/gpu"))
    for extender in (True, False):
        line = first_line(cluster, "pod", "gpus-0", extender=extender)
        assert line == (
            "pod default/gpus-0 is Pending: the gang cannot fit this cluster: default/gpus-0 asks "
            "for nvidia.com/gpu 4 on one node, the largest node hollow-node-0 has nvidia.com/gpu 2"
        ), line


def test_held_binds_wait_for_a_member_that_cannot_come(cluster: SimCluster) -> None:
    """Two members are placed and hold their binds; the third mounts a claim that does not
    exist, so kube-scheduler refuses it before it asks vulcan: the hold waits for it until the
    gang timeout."""
    docs = gang("late", 3)
    docs[0]["metadata"]["annotations"]["vulcan.sh/gang-timeout"] = "60s"
    docs[3]["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "no-such-claim"}}
    ]
    # The PodGroup first, seen by the extender (enqueued) before its pods come: a member that
    # reaches filter before the extender's cache has its group is refused "podgroup ... not
    # found", and kube-scheduler keeps that message on the pod while its bind is held (the
    # race noted on issue 48), which explain without the extender would then report.
    cluster.apply(docs[:1])
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/late"
    wait_for(
        "the extender to enqueue the PodGroup",
        lambda: ((cluster.get(path) or {}).get("status") or {}).get("phase") == "Inqueue" or None,
    )
    cluster.apply(docs[1:])
    view = wait_for(
        "two binds held",
        lambda: (
            (v := debug(cluster, "/debug/gangs/default/late"))["members"]["holdingBinds"] == 2 and v
        ),
    )
    # The documented shape of /debug/gangs.
    assert set(view) == {
        "podgroup", "uid", "queue", "phase", "minMember", "minTaskMember", "minResources",
        "admitted", "reason", "promise", "members", "statuses", "gangTimeoutSeconds", "hold",
        "committed", "backoffSecondsLeft", "reserved", "reservations", "elasticWaiting",
    }  # fmt: skip
    assert view["admitted"] is True and view["gangTimeoutSeconds"] == 60
    assert view["hold"]["pods"] == ["default/late-0", "default/late-1"]
    assert 0 < view["hold"]["secondsLeft"] <= 60
    assert len(view["reservations"]) == 3
    line = first_line(cluster, "podgroup", "late")
    assert line.startswith(
        "podgroup default/late is Inqueue: 2 of 3 members hold their binds, waiting for the rest "
        "of the gang: default/late-2 cannot be placed: "
    ), line
    line = first_line(cluster, "pod", "late-0", extender=False)
    assert "members hold their binds, waiting for the rest of the gang: default/late-2" in line


def test_waiting_for_reclaimed_victims_to_terminate(cluster: SimCluster) -> None:
    """Queue big fills the cluster with pods that take their 30 s grace period to stop; queue
    small's gang reclaims one and waits for it to go."""
    docs = [queue("big"), queue("small")]
    for index in range(8):
        docs += gang(f"big-{index}", 1, "big", cpu="4", grace=30)
    cluster.apply(docs)
    wait_for("big to fill the cluster", lambda: bound(cluster, "big-") == 8 or None)
    cluster.apply(gang("sm", 2, "small", cpu="2"))
    wait_for("the reclaim", lambda: condition_says(cluster, "sm", "to terminate on hollow-node-"))
    for extender in (True, False):
        line = first_line(cluster, "podgroup", "sm", extender=extender)
        assert line.startswith(
            "podgroup default/sm is Inqueue: waiting for 1 pod(s) evicted for it to terminate: "
            "default/big-"
        ), line
        assert "(grace period ends in " in line


# ------------------------------------------------------------------------------ jobs and flows


def template(name: str, *, gpu: int = 0, duration: str | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "1"}}
    if gpu:
        resources["limits"] = {"nvidia.com/gpu": str(gpu)}
    pod: dict[str, Any] = {
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
            "restartPolicy": "Never",
        }
    }
    if duration:
        pod["metadata"] = {"annotations": {"vulcan.sh/sim-duration": duration}}
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": 2,
            "schedulerName": "volcano",
            "tasks": [{"replicas": 2, "name": "worker", "template": pod}],
        },
    }


def test_a_jobflow_and_its_vcjob_name_the_pending_step_and_why(cluster: SimCluster) -> None:
    cluster.apply(
        [
            template("prep", duration="0.5s"),
            template("train", gpu=4),
            {
                "apiVersion": "flow.volcano.sh/v1alpha1",
                "kind": "JobFlow",
                "metadata": {"name": "pipe"},
                "spec": {
                    "jobRetainPolicy": "retain",
                    "flows": [
                        {"name": "prep"},
                        {"name": "train", "dependsOn": {"targets": ["prep"]}},
                    ],
                },
            },
        ]
    )
    wait_for(
        "train's pods",
        lambda: _count(cluster, "pipe-train-") == 2 or None,
        60,
    )
    wait_for(
        "the gang's refusal", lambda: "nvidia.com/gpu" in json.dumps(cluster.get(GROUPS)) or None
    )
    line = first_line(cluster, "jobflow", "pipe")
    assert line.startswith(
        "jobflow default/pipe is Running: step train (vcjob default/pipe-train) is Pending: the "
        "gang cannot fit this cluster: default/pipe-train-worker-"
    ), line
    assert line.endswith(
        "asks for nvidia.com/gpu 4 on one node, the largest node hollow-node-0 has nvidia.com/gpu 2"
    )
    text = explain(cluster, "vcjob", "pipe-train")
    labels = [row.split()[0] for row in text.splitlines()[1:] if not row.startswith("   ")]
    assert labels[:6] == ["job", "podgroup", "queue", "gang", "nodes", "unblock"]
    # `vcctl job explain` is the same screen.
    assert cluster.extender is not None
    args = ["job", "explain", "-N", "pipe-train", "-k", str(cluster.kubeconfig)]
    vcctl = subprocess.run(
        [sys.executable, "-m", "vcctl", *args, "--extender", cluster.extender],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert vcctl.returncode == 0, vcctl.stderr
    assert vcctl.stdout.splitlines()[0] == text.splitlines()[0]


# ------------------------------------------------------------------------------ errors, the flag


def test_an_object_that_does_not_exist_is_one_line_of_error(cluster: SimCluster) -> None:
    kubeconfig = str(cluster.kubeconfig)
    result = subprocess.run(
        [sys.executable, "-m", "vulcan", "explain", "pg", "nope", "--kubeconfig", kubeconfig],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == "vulcan explain: error: podgroup default/nope not found\n"


def test_debug_endpoints_disabled_answer_404_and_explain_still_answers(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    apiserver, _ = sim_apiserver_process(kubeconfig)
    extender = None
    try:
        extender = vulcan_process(
            "extender", "--kubeconfig", str(kubeconfig), "--port", "0",
            "--bind-address", "127.0.0.1", "--enable-debug-endpoints=false",
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        base = announced_url(extender, "vulcan extender listening on http://127.0.0.1:")
        base = base.removesuffix("/v1")
        wait_for("the extender to be ready", lambda: _status(base + "/readyz") == 200, 30)
        assert _status(base + "/debug/queues") == 404
        assert _status(base + "/debug/gangs/default/x") == 404
        subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "create", "-f", "-"],
            input=json.dumps(group("x", 2)),
            check=True,
            capture_output=True,
            text=True,
        )
        result = subprocess.run(
            [sys.executable, "-m", "vulcan", "explain", "pg", "x", "--kubeconfig", str(kubeconfig),
             "--extender", base],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        # (enqueued before its pods, as Volcano enqueues any PodGroup)
        assert "is Inqueue: the gang is missing members: 0 of the 2 pods" in result.stdout
        assert "not reached: no /debug endpoints" in result.stdout
    finally:
        for process in (extender, apiserver):
            if process is not None:
                process.terminate()
                process.wait(10)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0
