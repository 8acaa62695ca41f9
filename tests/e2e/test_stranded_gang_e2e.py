"""A gang stranded by a lost node on `vulcan sim up --with-extender --with-controllers`
(`tests.e2e.stranded`): its survivors are evicted, not left running half a gang, and it runs
whole again once the node is back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import SimCluster, start_cluster
from tests.e2e.stranded import a_gang_stranded_by_a_lost_node_is_evicted_and_runs_whole_again


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SimCluster]:
    yield from start_cluster(
        tmp_path,
        "--nodes",
        "2",
        "--node-profile",
        "cpu=8,memory=32Gi",
        "--with-extender",
        "--with-controllers",
        "--pod-eviction-timeout",
        "1",
        "--node-monitor-grace-period",
        "2s",
    )


def test_a_gang_stranded_by_a_lost_node_is_evicted_and_runs_whole_again(
    cluster: SimCluster,
) -> None:
    a_gang_stranded_by_a_lost_node_is_evicted_and_runs_whole_again(cluster)
