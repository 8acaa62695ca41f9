"""The scheduler conf changes what the extender does (`vulcan sim up --extender-config`): the
same gangs end on visibly different node layouts under a packing conf (Volcano's default:
binpack) and a spreading one (nodeorder's least-requested alone)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

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
