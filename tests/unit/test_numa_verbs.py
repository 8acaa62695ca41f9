"""The extender's filter and prioritize for a Guaranteed pod where nodes report NUMA cells
(`extender.numa_verbs` through `ExtenderServer`): refused where its cpus cannot align, with the
plugin's reason, counting what other gangs hold there; fewer cells score higher; a conf
without the plugin, and a pod that is not Guaranteed, are answered as before."""

from __future__ import annotations

from typing import Any

import orjson

from core.cache import ClusterCache
from core.numa import format_cpuset
from core.records import NodeRecord, PodRecord
from core.records.numa import NumaRecord
from core.resources import ResourceVector
from extender.binder import Binder
from extender.ledger import GangLedger, Reservation
from extender.server import ExtenderServer
from plugins.framework.config import DEFAULT_SCHEDULER_CONF, parse_scheduler_config
from plugins.framework.node_order import Framework
from plugins.framework.registry import build_policy

WITH_NUMA = DEFAULT_SCHEDULER_CONF + "  - name: numa-aware\n"


def node(name: str) -> NodeRecord:
    allocatable = {"cpu": "32", "memory": "64Gi", "pods": "110"}
    return NodeRecord({"metadata": {"name": name}, "status": {"allocatable": allocatable}})


def topology(name: str, policy: str, free: list[int]) -> NumaRecord:
    return NumaRecord(
        {
            "metadata": {"name": name},
            "spec": {
                "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": policy},
                "numares": {"cpu": {"allocatable": format_cpuset(free), "capacity": 32}},
                "cpuDetail": {str(c): {"numa": c // 16} for c in range(32)},
            },
        }
    )


def pod(name: str, cpus: int, *, guaranteed: bool = True) -> dict[str, Any]:
    requests = {"cpu": str(cpus), "memory": "1Gi"}
    resources: dict[str, Any] = {"requests": requests}
    if guaranteed:
        resources["limits"] = dict(requests)
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
        "spec": {"containers": [{"name": "main", "resources": resources}]},
    }


def server(conf: str, ledger: GangLedger | None = None) -> ExtenderServer:
    cache = ClusterCache()
    for name in ("single", "best", "plain"):
        cache.on_node_add(node(name))
    cache.on_numa_add(topology("single", "single-numa-node", list(range(32))))
    cache.on_numa_add(topology("best", "best-effort", list(range(8)) + list(range(16, 24))))
    framework = Framework(build_policy(parse_scheduler_config(conf)))
    return ExtenderServer(cache, framework, Binder(None), ledger=ledger)  # type: ignore[arg-type]


def filter_answer(ext: ExtenderServer, doc: dict[str, Any]) -> dict[str, Any]:
    body = orjson.dumps({"Pod": doc, "Nodes": None, "NodeNames": ["single", "best", "plain"]})
    return orjson.loads(ext.filter(body))  # type: ignore[arg-type]


def scores(ext: ExtenderServer, doc: dict[str, Any], names: list[str]) -> dict[str, int]:
    body = orjson.dumps({"Pod": doc, "Nodes": None, "NodeNames": names})
    return {h["Host"]: h["Score"] for h in orjson.loads(ext.prioritize(body))}


REFUSED = "node(s) had NUMA topology affinity errors (container main cannot be assigned by numa"


def test_the_filter_refuses_what_cannot_align_with_the_reason() -> None:
    ext = server(WITH_NUMA)
    answer = filter_answer(ext, pod("wide", 24))
    assert answer["NodeNames"] == ["best", "plain"]
    # UnschedulableAndUnresolvable, as Volcano's: no preemption helps.
    assert not answer["FailedNodes"]
    assert answer["FailedAndUnresolvableNodes"]["single"].startswith(REFUSED)
    assert "under single-numa-node" in answer["FailedAndUnresolvableNodes"]["single"]
    # 12 cpus fit one cell of the single-numa-node node.
    assert filter_answer(ext, pod("narrow", 12))["NodeNames"] == ["single", "best", "plain"]
    # Not Guaranteed: no constraint.
    plain = filter_answer(ext, pod("burst", 24, guaranteed=False))
    assert plain["NodeNames"] == ["single", "best", "plain"]
    assert not plain["FailedNodes"] and not plain["FailedAndUnresolvableNodes"]


def test_without_the_plugin_nothing_is_refused() -> None:
    answer = filter_answer(server(DEFAULT_SCHEDULER_CONF), pod("wide", 24))
    assert answer["NodeNames"] == ["single", "best", "plain"]


def test_cells_held_by_other_gangs_reservations_count() -> None:
    ledger = GangLedger()
    ext = server(WITH_NUMA, ledger)
    for index in range(2):  # two 12-cpu members of a gang reserved on `single`: a cell each
        member = PodRecord({**pod(f"m{index}", 12), "status": {"phase": "Pending"}})
        ext.cache.on_pod_add(member)
        request = ResourceVector({"cpu": 12000})
        ledger.reserve(Reservation(member.key, "single", request, "ns/gang"))
    answer = filter_answer(ext, pod("narrow", 8))  # 8 cpus free on the node, 4 per cell
    assert answer["FailedAndUnresolvableNodes"]["single"].startswith(REFUSED), answer
    assert filter_answer(ext, pod("small", 4))["NodeNames"][0] == "single"


def test_fewer_cells_score_higher() -> None:
    ext = server(WITH_NUMA)
    # 12 cpus: one cell of `single`; `best` has 8 + 8 free, so two cells; `plain` none.
    got = scores(ext, pod("narrow", 12), ["single", "best"])
    assert got.get("single", 0) > got.get("best", 0), got
    without = scores(server(DEFAULT_SCHEDULER_CONF), pod("narrow", 12), ["single", "best"])
    assert without.get("single", 0) == without.get("best", 0), without


def test_a_conf_scoring_numa_keeps_the_prioritize_call() -> None:
    from plugins.framework.kube_scoring import plan_profile

    spread = (
        "tiers:\n- plugins:\n  - name: nodeorder\n    arguments: {balancedresource.weight: 0}\n"
    )
    assert plan_profile(parse_scheduler_config(spread)).prioritize is False  # rendered
    plan = plan_profile(parse_scheduler_config(spread + "  - name: numa-aware\n"))
    assert plan.prioritize and plan.scoring is None
    assert "numa-aware orders nodes by the NUMA cells" in plan.why
