"""The numa-aware plugin's formulas (Volcano's cpu hint provider and topology-manager
policies): which nodes admit a Guaranteed pod's cpus under each policy, what the cpus take,
how nodes score, and what a Numatopology and a pod spec give."""

from __future__ import annotations

from typing import Any

import pytest

from core.numa import NumaAsk, exclusive_cpus, format_cpuset, numa_ask, parse_cpuset
from core.records.numa import NumaRecord
from plugins.builtin.numaaware import NumaAwarePlugin, numa_scores, numa_settings
from plugins.framework.config import ConfigError, parse_scheduler_config
from plugins.framework.registry import build_policy
from plugins.model.numa_fit import Hint, NumaNodes, best_hint, cpu_hints, judge, take

TWO_BY_16 = {0: 16, 1: 16}
REFUSED = "node(s) had NUMA topology affinity errors (container main cannot be assigned by numa"


def ask(*cpus: int, policy: str = "") -> NumaAsk:
    return NumaAsk(cpus, tuple("main" if i == 0 else f"c{i}" for i in range(len(cpus))), policy)


@pytest.mark.parametrize(
    ("policy", "free", "cpus", "admitted", "taken"),
    [
        # 24 cpus on 2 x 16: only both cells hold them.
        ("single-numa-node", TWO_BY_16, 24, False, {}),
        ("restricted", TWO_BY_16, 24, True, {0: 16, 1: 8}),
        ("best-effort", TWO_BY_16, 24, True, {0: 16, 1: 8}),
        ("none", TWO_BY_16, 24, True, {}),
        # 8 cpus: one cell could hold them; is one free enough?
        ("single-numa-node", {0: 4, 1: 10}, 8, True, {1: 8}),
        ("single-numa-node", {0: 4, 1: 6}, 8, False, {}),
        ("restricted", {0: 4, 1: 6}, 8, False, {}),
        ("best-effort", {0: 4, 1: 6}, 8, True, {0: 4, 1: 4}),
        # The narrowest then lowest cell wins among preferred hints.
        ("single-numa-node", {0: 16, 1: 16}, 8, True, {0: 8}),
        ("best-effort", {0: 2, 1: 16}, 8, True, {1: 8}),
    ],
)
def test_each_policy_admits_and_takes_as_volcano(
    policy: str, free: dict[int, int], cpus: int, admitted: bool, taken: dict[int, int]
) -> None:
    verdict = judge(ask(cpus), "static", policy, TWO_BY_16, free)
    assert (verdict.reason is None) is admitted
    if not admitted:
        assert verdict.reason is not None and verdict.reason.startswith(REFUSED)
        assert policy in verdict.reason
    assert dict(verdict.taken) == taken


def test_hints_prefer_the_fewest_cells_that_could_ever_hold_the_request() -> None:
    hints = cpu_hints(TWO_BY_16, {0: 4, 1: 10}, 8)
    assert hints == [Hint(frozenset({1}), True), Hint(frozenset({0, 1}), False)]
    # 24 cpus: only the pair could ever hold them, so the pair is preferred.
    assert cpu_hints(TWO_BY_16, TWO_BY_16, 24) == [Hint(frozenset({0, 1}), True)]
    assert cpu_hints(TWO_BY_16, {0: 1, 1: 1}, 8) == []


def test_best_hint_and_take() -> None:
    # No hint at all (no free combination): not preferred, every cell.
    assert best_hint("restricted", [0, 1], []) == (Hint(frozenset({0, 1}), False), False)
    assert best_hint("best-effort", [0, 1], [])[1] is True
    # A container asking no whole cpu has no preference: admitted everywhere.
    assert best_hint("single-numa-node", [0, 1], None) == (Hint(frozenset({0, 1}), True), True)
    assert take({0: 3, 1: 16}, 8, Hint(frozenset({0}), False)) == {0: 3, 1: 5}
    assert take({0: 3, 1: 3}, 8, Hint(None, False)) == {}  # too few: nothing taken


def test_containers_take_in_turn() -> None:
    # Two containers of 12: each fits a cell of its own under single-numa-node.
    verdict = judge(ask(12, 12), "static", "single-numa-node", TWO_BY_16, TWO_BY_16)
    assert verdict.reason is None and dict(verdict.taken) == {0: 12, 1: 12}
    # A third of 12 has no cell left with 12 free.
    verdict = judge(ask(12, 12, 12), "static", "single-numa-node", TWO_BY_16, TWO_BY_16)
    assert verdict.reason is not None and "container c2 cannot be assigned" in verdict.reason


def test_what_the_node_and_the_pod_say_of_their_policies() -> None:
    # No static cpu manager, or no topology policy: no constraint on a pod naming none.
    assert judge(ask(24), "none", "single-numa-node", TWO_BY_16, TWO_BY_16).reason is None
    assert judge(ask(24), None, "", {}, {}).reason is None
    assert judge(ask(24), "static", "none", TWO_BY_16, TWO_BY_16).reason is None
    # A pod naming its policy (volcano.sh/numa-topology-policy) needs a node of that policy.
    named = ask(8, policy="single-numa-node")
    assert "numa info is empty" in str(judge(named, None, "", {}, {}).reason)
    assert "isn't static" in str(judge(named, "none", "single-numa-node", TWO_BY_16, {}).reason)
    mismatch = judge(named, "static", "best-effort", TWO_BY_16, TWO_BY_16).reason
    assert mismatch is not None and "task topology policy[single-numa-node]" in mismatch
    assert judge(named, "static", "single-numa-node", TWO_BY_16, TWO_BY_16).reason is None


def _topology(name: str, policy: str, allocatable: str, **spec: Any) -> dict[str, Any]:
    detail = {str(cpu): {"numa": cpu // 16, "socket": cpu // 16, "core": cpu} for cpu in range(32)}
    return {
        "metadata": {"name": name},
        "spec": {
            "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": policy},
            "numares": {"cpu": {"allocatable": allocatable, "capacity": 32}},
            "cpuDetail": detail,
            **spec,
        },
    }


def test_the_record_counts_free_cpus_per_cell() -> None:
    record = NumaRecord(_topology("n1", "best-effort", "0-3,16-31"))
    assert record.cells == (0, 1) and record.capacity == (16, 16) and record.free == (4, 16)
    assert record.cpu_policy == "static" and record.topology_policy == "best-effort"
    reserved = NumaRecord(_topology("n1", "best-effort", "0-31", resReserved={"cpu": "1500m"}))
    assert reserved.free == (14, 16)  # two cpus kept back, from the lowest ids
    allocated = {"podAllocations": [{"uid": "u1", "namespace": "ns", "name": "p"}]}
    assert NumaRecord(_topology("n1", "none", "0-31", **allocated)).assigned == {"u1", "ns/p"}


def test_cpusets_read_and_write_as_the_kubelet_does() -> None:
    assert parse_cpuset("0-3,8, 10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpuset([11, 0, 1, 2, 8, 10]) == "0-2,8,10-11"
    assert parse_cpuset("") == []
    with pytest.raises(ValueError, match="'3-1' is not a range"):
        parse_cpuset("3-1")


def _container(cpu: str, memory: str = "1Gi", *, requests: bool = True) -> dict[str, Any]:
    limits = {"cpu": cpu, "memory": memory}
    resources = {"limits": limits, **({"requests": dict(limits)} if requests else {})}
    return {"name": "main", "resources": resources}


def test_only_guaranteed_pods_pin_cpus() -> None:
    assert exclusive_cpus({"containers": [_container("24")]}) == (24,)
    assert exclusive_cpus({"containers": [_container("24", requests=False)]}) == (24,)
    assert exclusive_cpus({"containers": [_container("1500m")]}) == (0,)  # shares the pool
    burstable = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "4"}}}]}
    assert exclusive_cpus(burstable) is None
    no_memory = {"containers": [{"name": "main", "resources": {"limits": {"cpu": "4"}}}]}
    assert exclusive_cpus(no_memory) is None
    unequal = _container("4")
    unequal["resources"]["requests"]["cpu"] = "2"
    assert exclusive_cpus({"containers": [unequal]}) is None
    assert numa_ask({"containers": [_container("4")]}, "best-effort") == NumaAsk(
        (4,), ("main",), "best-effort"
    )


def test_nodes_hold_what_pods_took_before_the_exporter_said_so() -> None:
    record = NumaRecord(_topology("n1", "single-numa-node", "0-31"))

    class Bound:
        numa = ask(12)
        uid, key, occupies_node = "u1", "ns/p", True

    nodes = NumaNodes({"n1": record}, lambda node: [Bound()])  # type: ignore[list-item]
    assert nodes.free("n1") == {0: 4, 1: 16}
    assert nodes.reason(ask(12), "n1") is None
    nodes.place(ask(12), "n1")  # placed by this decision
    assert nodes.free("n1") == {0: 4, 1: 4}
    assert nodes.reason(ask(12), "n1") is not None
    # Once the exporter lists the pod, its cpus are in the record's own numbers.
    reported = NumaRecord(
        _topology("n1", "single-numa-node", "12-31", podAllocations=[{"uid": "u1"}])
    )
    assert NumaNodes({"n1": reported}, lambda node: [Bound()]).free("n1") == {0: 4, 1: 16}  # type: ignore[list-item]


def test_fewer_cells_score_higher_with_the_weight() -> None:
    aligned = NumaRecord(_topology("a", "best-effort", "0-31"))
    split = NumaRecord(_topology("b", "best-effort", "0-7,16-23"))
    nodes = NumaNodes({"a": aligned, "b": split}, lambda node: [])
    assert numa_scores(nodes, ask(12), ["a", "b", "plain"], 1) == [50.0, 0.0, 100.0]
    assert numa_scores(nodes, ask(12), ["a"], 3) == [0.0]
    assert numa_scores(nodes, ask(8), ["a"], 2) == [0.0]  # one cell out of a most of one


def test_the_conf_accepts_the_plugin_with_volcanos_weight() -> None:
    for name in ("numa-aware", "numaaware"):
        conf = parse_scheduler_config(
            f"tiers:\n- plugins:\n  - name: {name}\n    arguments: {{weight: 5}}\n"
        )
        settings = build_policy(conf).numa
        assert settings is not None and settings.plugin.weight == 5
        assert settings.filters and settings.scores
    off = parse_scheduler_config(
        "tiers:\n- plugins:\n  - name: numa-aware\n    enablePredicate: false\n"
    )
    assert build_policy(off).numa_filters is False
    assert build_policy(parse_scheduler_config("tiers:\n- plugins:\n  - name: gang\n")).numa is None
    assert NumaAwarePlugin().weight == 1
    with pytest.raises(ConfigError, match=r'tiers\[0\]\.plugins\[0\]\.arguments\["weight"\]'):
        build_policy(
            parse_scheduler_config(
                "tiers:\n- plugins:\n  - name: numa-aware\n    arguments: {weight: x}\n"
            )
        )
    assert numa_settings(off, {}) is None


def test_node_profiles_give_numa_cells_and_a_policy() -> None:
    from sim.kubelet.profiles import parse_node_profile

    profile = parse_node_profile("numa=2x16,tm-policy=single-numa-node,memory=64Gi")
    assert profile.numa == (2, 16) and profile.topology_policy == "single-numa-node"
    assert profile.capacity["cpu"] == "32"
    assert parse_node_profile("numa=4x8,cpu=32").topology_policy == "none"
    assert parse_node_profile("cpu=8").numa is None
    for text, error in (
        ("numa=2by16", "expected numa=CELLSxCPUS"),
        ("numa=2x16,cpu=8", "cpu=8 is not numa=2x16's 32 cpus"),
        ("numa=2x16,tm-policy=strict", "tm-policy must be one of none, best-effort"),
        ("tm-policy=best-effort", "tm-policy needs numa=CELLSxCPUS"),
    ):
        with pytest.raises(ValueError, match=error):
            parse_node_profile(text)


def test_what_the_exporter_writes_passes_the_crd_and_the_model() -> None:
    """A Numatopology as Volcano's resource-exporter (and the hollow nodes') write it is
    accepted by the generated CRD's schema and the model; a negative NUMA id by neither."""
    from core.api.nodeinfo import Numatopology
    from sim.kubelet.numa_exporter import NumaShape, _NodeCpus
    from tests.unit.test_crds import schema_errors

    spec = _NodeCpus(NumaShape(2, 16, "single-numa-node")).spec()
    doc = {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": "n1"},
        "spec": {**spec, "resReserved": {"cpu": "1", "memory": "1Gi"}},
    }
    assert schema_errors(doc) == []
    Numatopology.model_validate(doc)
    assert NumaRecord(doc).free == (15, 16)  # one cpu reserved, from the lowest ids
    doc["spec"]["cpuDetail"]["0"]["numa"] = -1
    assert schema_errors(doc) != []
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Numatopology.model_validate(doc)


def test_the_hollow_exporter_pins_each_container_in_the_lowest_cell_with_room() -> None:
    from sim.kubelet.numa_exporter import NumaShape, _NodeCpus, _PodCpus

    def pinned(node: _NodeCpus, name: str, cpu: str) -> str:
        doc = {
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"nodeName": "n1", "containers": [_container(cpu)]},
            "status": {"phase": "Running"},
        }
        node.pin(_PodCpus(doc))
        return format_cpuset(node.pods[name][1][0][1]) if node.pods[name][1] else ""

    node = _NodeCpus(NumaShape(2, 16, "single-numa-node"))
    assert pinned(node, "a", "12") == "0-11"
    assert pinned(node, "b", "12") == "16-27"  # cell 0 has 4 left
    assert pinned(node, "c", "6") == "12-15,28-29"  # no cell has 6: across cells, lowest first
    assert pinned(node, "d", "1500m") == ""  # shares the pool: pins nothing
    assert node.spec()["numares"]["cpu"]["allocatable"] == "30-31"
    node.pods.pop("b")
    assert node.spec()["numares"]["cpu"]["allocatable"] == "16-27,30-31"
