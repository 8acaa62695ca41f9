"""The scheduler conf changes what the extender does (`vulcan sim up --extender-config`): the
same gangs end on visibly different node layouts under a packing conf (Volcano's default:
binpack) and a spreading one (nodeorder's least-requested alone)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from plugins.framework.config import DEFAULT_SCHEDULER_CONF
from tests.e2e.conftest import pod_manifest, start_cluster, wait_for

SPREAD_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def layout(tmp: Path, *extra: str) -> Counter[str]:
    """Two 4-member gangs of 1 cpu on 4 nodes of 8 cpu: members per node once all are bound."""
    clusters = start_cluster(
        tmp, "--nodes", "4", "--node-profile", "cpu=8,memory=32Gi", "--with-extender", *extra
    )
    cluster = next(clusters)
    try:
        for job in ("g1", "g2"):
            cluster.apply(
                [
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "PodGroup",
                        "metadata": {"name": job},
                        "spec": {"minMember": 4},
                    },
                    *(
                        pod_manifest(
                            f"{job}-{i}",
                            cpu="1",
                            duration="forever",
                            labels={"job": job},
                            annotations={"scheduling.k8s.io/group-name": job},
                        )
                        for i in range(4)
                    ),
                ]
            )

        def bound() -> Counter[str] | None:
            nodes = [p["spec"].get("nodeName") for p in cluster.pods()]
            return Counter(nodes) if len(nodes) == 8 and all(nodes) else None

        return wait_for("both gangs bound", bound, 60)
    finally:
        clusters.close()  # stops the cluster (and checks it stopped cleanly)


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Counter[str], Counter[str]]:
    packed = layout(tmp_path_factory.mktemp("conf-default"))
    conf = tmp_path_factory.mktemp("conf") / "spread.conf"
    conf.write_text(SPREAD_CONF)
    spread = layout(tmp_path_factory.mktemp("conf-spread"), "--extender-config", str(conf))
    return packed, spread


def test_the_default_conf_packs_gangs_and_least_requested_spreads_them(
    layouts: tuple[Counter[str], Counter[str]],
) -> None:
    packed, spread = layouts
    # binpack: each gang on one node (4 of its 8 cpu), both on at most two nodes.
    assert len(packed) <= 2 and all(n % 4 == 0 for n in packed.values()), packed
    # least-requested alone: every node gets its share.
    assert sorted(spread.values()) == [2, 2, 2, 2], spread


NO_GANG_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def gpu_worker(job: str, index: int) -> dict[str, object]:
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-{index}",
            "labels": {"job": job},
            "annotations": {
                "scheduling.k8s.io/group-name": job,
                "vulcan.sh/sim-duration": "forever",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": gpu, "limits": gpu}}
            ],
        },
    }


def test_without_the_gang_plugin_gangs_are_placed_pod_by_pod(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Turning `gang` off: two 4-GPU jobs on 4 one-GPU nodes are both enqueued and their
    members placed one at a time, so both end half placed — the deadlock gang scheduling is
    for (with `gang` on, one runs whole and the other waits: tests/e2e/test_gang_e2e.py)."""
    conf = tmp_path_factory.mktemp("conf") / "no-gang.conf"
    conf.write_text(NO_GANG_CONF)
    clusters = start_cluster(
        tmp_path_factory.mktemp("conf-no-gang"),
        "--nodes",
        "4",
        "--node-profile",
        "cpu=8,memory=32Gi,nvidia.com/gpu=1",
        "--with-extender",
        "--extender-config",
        str(conf),
    )
    cluster = next(clusters)
    try:
        for job in ("tf-a", "tf-b"):
            cluster.apply(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": job},
                    "spec": {"minMember": 4},
                }
            )
        # Interleaved, as two job controllers creating their workers at once would.
        cluster.apply([gpu_worker(job, i) for i in range(4) for job in ("tf-a", "tf-b")])

        def placed() -> Counter[str] | None:
            bound = Counter(
                p["metadata"]["labels"]["job"] for p in cluster.pods() if p["spec"].get("nodeName")
            )
            return bound if sum(bound.values()) == 4 else None

        bound = wait_for("all 4 GPUs taken", placed, 60)
        assert bound["tf-a"] and bound["tf-b"], bound  # neither job whole: pod by pod
    finally:
        clusters.close()


# vulcan's default conf (Volcano's, with binpack, preempt and reclaim) plus task-topology.
TOPOLOGY_CONF = DEFAULT_SCHEDULER_CONF + (
    "  - name: task-topology\n    arguments:\n      task-topology.weight: 10\n"
)


def tf_job(name: str) -> dict[str, object]:
    """A TensorFlow job (1 ps + 4 workers, 8 cpu together) asking for its ps and workers on
    the same node, as Volcano's task-topology example does."""

    def task(role: str, replicas: int, cpu: str) -> dict[str, object]:
        container = {
            "name": role,
            "image": "volcanosh/dist-mnist-tf-example:0.0.1",
            "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
        }
        return {
            "name": role,
            "replicas": replicas,
            "template": {
                "metadata": {"annotations": {"vulcan.sh/sim-duration": "forever"}},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        }

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "annotations": {
                "volcano.sh/task-topology-affinity": "ps,worker",
                "volcano.sh/task-topology-task-order": "ps,worker",
            },
        },
        "spec": {
            "minAvailable": 5,
            "schedulerName": "volcano",
            "tasks": [task("ps", 1, "2"), task("worker", 4, "1500m")],
        },
    }


def tf_layout(tmp: Path, *extra: str) -> Counter[str]:
    """Three 8-cpu nodes already running 2, 0 and 1 cpu of other work; the TF job's pods per
    node once all five are bound."""
    clusters = start_cluster(
        tmp,
        "--nodes",
        "3",
        "--node-profile",
        "cpu=8,memory=32Gi",
        "--with-extender",
        "--with-controllers",
        *extra,
    )
    cluster = next(clusters)
    try:
        for index, cpu in ((0, "2"), (2, "1")):
            filler = pod_manifest(f"filler-{index}", cpu=cpu, duration="forever")
            filler["spec"]["nodeName"] = f"hollow-node-{index}"
            cluster.apply(filler)
        cluster.apply(tf_job("tf"))

        def bound() -> Counter[str] | None:
            pods = cluster.pods(selector="volcano.sh/job-name=tf")
            nodes = [p["spec"].get("nodeName") for p in pods]
            return Counter(nodes) if len(nodes) == 5 and all(nodes) else None

        return wait_for("the TF job's 5 pods bound", bound, 90)
    finally:
        clusters.close()


def test_task_topology_puts_a_tf_jobs_ps_and_workers_together(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """With task-topology (`ps,worker` affinity) the job lands whole on the one node with 8
    free cpu; the default conf (no task-topology) packs the tightest nodes first and splits it."""
    conf = tmp_path_factory.mktemp("conf") / "topology.conf"
    conf.write_text(TOPOLOGY_CONF)
    together = tf_layout(tmp_path_factory.mktemp("conf-topology"), "--extender-config", str(conf))
    assert together == Counter({"hollow-node-1": 5}), together
    split = tf_layout(tmp_path_factory.mktemp("conf-no-topology"))
    assert len(split) > 1, split
