"""plugins.model.share_json: the queues' share model written as the extender's /debug/queues
serves it and read back as `vulcan explain` does answers every queue check the same, word for
word, for both queue plugins."""

from __future__ import annotations

import orjson

from core.cache import ClusterCache
from core.records import NodeRecord, PodGroupRecord, PodRecord, QueueRecord
from core.resources import ResourceVector
from plugins.framework.config import parse_scheduler_config
from plugins.framework.registry import build_policy
from plugins.model.queue_inputs import queue_pass
from plugins.model.share_json import model_from_rows, queue_rows


def _cluster() -> ClusterCache:
    cache = ClusterCache()
    cache.on_node_add(
        NodeRecord(
            {
                "metadata": {"name": "n0"},
                "status": {
                    "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    )
    for name, spec in (
        ("a", {"weight": 3, "capability": {"cpu": "10"}, "deserved": {"cpu": "6"}}),
        ("b", {"weight": 1, "guarantee": {"resource": {"cpu": "2"}}, "deserved": {"cpu": "4"}}),
    ):
        cache.on_queue_add(QueueRecord({"metadata": {"name": name}, "spec": spec}))
    for name, queue, node in (("ra", "a", "n0"), ("wa", "a", None), ("wb", "b", None)):
        cache.on_podgroup_add(
            PodGroupRecord(
                {
                    "metadata": {"name": name, "namespace": "ns"},
                    "spec": {"queue": queue, "minMember": 1, "minResources": {"cpu": "3"}},
                }
            )
        )
        spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}
        if node:
            spec["nodeName"] = node
        cache.on_pod_add(
            PodRecord(
                {
                    "metadata": {
                        "name": f"{name}-0",
                        "namespace": "ns",
                        "annotations": {"scheduling.k8s.io/group-name": name},
                    },
                    "spec": spec,
                }
            )
        )
    return cache


def test_the_model_read_back_answers_as_the_model_written() -> None:
    for plugin in ("proportion", "capacity"):
        policy = build_policy(parse_scheduler_config(f"tiers:\n- plugins:\n  - name: {plugin}\n"))
        queues = queue_pass(_cluster().live_view(), {}, policy.open_queues)
        served = orjson.loads(orjson.dumps({"plugin": plugin, "queues": queue_rows(queues)}))
        model, inputs, name = model_from_rows(served)
        assert name == plugin and set(inputs) == set(queues.inputs)
        for queue in ("a", "b", "default"):
            for cpu in (1, 3, 8, 20):
                ask = ResourceVector({"cpu": cpu * 1000})
                assert model.allocatable(queue, ask) == queues.model.allocatable(queue, ask)
                assert model.enqueueable(queue, ask) == queues.model.enqueueable(queue, ask)
                assert model.preemptive(queue, ask) == queues.model.preemptive(queue, ask)
            assert model.overused(queue) == queues.model.overused(queue)
