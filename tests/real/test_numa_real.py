"""NUMA-aware placement on a real control plane (issue 50): the stock kube-scheduler v1.36 named
`volcano` calls vulcan's extender, whose conf names Volcano's `numa-aware` plugin
(tests/real/fixtures/numa-conf.yaml); hollow nodes of two 16-cpu NUMA cells publish their
Numatopology (the CRD as the install serves it) and the extender's service account watches
them. The embedded tier's scenarios (tests/e2e/test_numa_e2e.py), on pods of `volcano`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_numa_e2e import NODE_PROFILES as NUMA_PROFILES
from tests.e2e.test_numa_e2e import gangs_by_cell, published_topologies, wide_pods
from tests.real.conftest import RealCluster

pytestmark = pytest.mark.real

INSTALL_MODE = "second-scheduler"
CONF = Path(__file__).parent / "fixtures" / "numa-conf.yaml"
EXTENDER_FLAGS = (f"--config={CONF}", "--gang-backoff=1s")  # the last --config is kept
NODE_PROFILES = NUMA_PROFILES
POD_DURATION = "24h"
SCHEDULER = "volcano"


def test_the_hollow_nodes_publish_their_numatopologies(cluster: RealCluster) -> None:
    published_topologies(cluster)


def test_24_cpus_refused_under_single_numa_node_placed_under_best_effort(
    cluster: RealCluster,
) -> None:
    wide_pods(cluster, SCHEDULER)


def test_gang_members_take_a_cell_each(cluster: RealCluster) -> None:
    gangs_by_cell(cluster, SCHEDULER)
