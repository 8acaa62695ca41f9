"""docs/architecture.md's worked example, "add a job-order plugin": a plugin class with the
extension point it registers, one entry in the registry, and a conf that names it. Its jobs are
ordered by it: the smallest job of the queue is placed first."""

from __future__ import annotations

import pytest

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord
from plugins.framework import registry
from plugins.framework.config import parse_scheduler_config
from plugins.framework.decisions import Admitted
from plugins.framework.extension_points import PassState, SessionPlugin
from plugins.framework.registry import build_policy
from plugins.model.job_order import JobInput
from tests.session_harness import run


class SmallestFirst(SessionPlugin):
    """Jobs asking less first (by their minResources' cpu)."""

    name = "smallest-first"

    def job_order_key(self, job: JobInput, state: PassState) -> int:
        return job.min_resources.cpu if job.min_resources is not None else 0


def _cluster() -> ClusterCache:
    cache = ClusterCache()
    cache.on_node_add(
        NodeRecord(
            {
                "metadata": {"name": "n0"},
                "status": {
                    "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    )
    # Older first by creation; only one of them fits the node.
    for name, cpu, created in (("big", 4, "00"), ("small", 3, "01")):
        cache.on_podgroup_add(
            PodGroupRecord(
                {
                    "metadata": {
                        "name": name,
                        "namespace": "ns",
                        "creationTimestamp": f"2026-01-01T00:{created}:00Z",
                    },
                    "spec": {"minMember": 1, "minResources": {"cpu": str(cpu)}},
                }
            )
        )
        cache.on_pod_add(
            PodRecord(
                {
                    "metadata": {
                        "name": f"{name}-0",
                        "namespace": "ns",
                        "annotations": {"scheduling.k8s.io/group-name": name},
                    },
                    "spec": {
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]
                    },
                }
            )
        )
    return cache


def _admitted(conf: str) -> list[str]:
    policy = build_policy(parse_scheduler_config(conf))
    decisions = run(policy, _cluster().live_view()).decisions
    return [d.key for d in decisions if isinstance(d, Admitted)]


def test_a_plugin_added_in_its_file_and_the_registry_orders_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
    assert _admitted(base) == ["ns/big"]  # the older job first
    monkeypatch.setitem(registry.PLUGINS, "smallest-first", SmallestFirst)
    assert _admitted(base + "  - name: smallest-first\n") == ["ns/small"]


def test_a_conf_naming_an_unregistered_plugin_is_refused_with_the_name() -> None:
    with pytest.raises(Exception, match='unknown plugin "smallest-first"'):
        build_policy(parse_scheduler_config("tiers:\n- plugins:\n  - name: smallest-first\n"))
