"""sim.nodelifecycle's pure parts (taints for a Ready status, NoExecute eviction deadlines) and
the embedded API server's admission that the node lifecycle relies on."""

from __future__ import annotations

from typing import Any

from sim.apiserver.server import build_store
from sim.nodelifecycle import desired_taints, eviction_time

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
ADDED = "2030-01-01T00:00:00Z"
ADDED_TS = 1893456000.0  # ADDED as epoch seconds
NOW = ADDED_TS + 100


def no_execute(key: str, added: str | None = ADDED) -> dict[str, Any]:
    taint = {"key": key, "effect": "NoExecute"}
    if added:
        taint["timeAdded"] = added
    return taint


# ------------------------------------------------------------------------- eviction time


def test_untolerated_no_execute_taint_evicts_now() -> None:
    assert eviction_time([], [no_execute(NOT_READY)], NOW) == NOW


def test_no_execute_taints_only() -> None:
    assert eviction_time([], [{"key": "x", "effect": "NoSchedule"}], NOW) is None
    assert eviction_time([], [], NOW) is None


def test_toleration_seconds_count_from_the_taint_time_added() -> None:
    tolerations = [{"key": NOT_READY, "operator": "Exists", "tolerationSeconds": 300}]
    assert eviction_time(tolerations, [no_execute(NOT_READY)], NOW) == ADDED_TS + 300


def test_toleration_without_seconds_tolerates_forever() -> None:
    tolerations = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}]
    assert eviction_time(tolerations, [no_execute(NOT_READY)], NOW) is None


def test_non_positive_seconds_evict_at_once_and_missing_time_added_counts_from_now() -> None:
    zero = [{"key": NOT_READY, "operator": "Exists", "tolerationSeconds": 0}]
    assert eviction_time(zero, [no_execute(NOT_READY)], NOW) == ADDED_TS
    negative = [{"key": NOT_READY, "operator": "Exists", "tolerationSeconds": -5}]
    assert eviction_time(negative, [no_execute(NOT_READY)], NOW) == ADDED_TS
    five = [{"key": NOT_READY, "operator": "Exists", "tolerationSeconds": 5}]
    assert eviction_time(five, [no_execute(NOT_READY, added=None)], NOW) == NOW + 5


def test_the_first_matching_toleration_decides_and_the_earliest_taint_wins() -> None:
    tolerations = [
        {"key": NOT_READY, "operator": "Exists", "tolerationSeconds": 30},
        {"operator": "Exists"},  # matches everything, forever, but comes second for not-ready
    ]
    taints = [no_execute(UNREACHABLE), no_execute(NOT_READY)]
    assert eviction_time(tolerations, taints, NOW) == ADDED_TS + 30
    # One untolerated NoExecute taint evicts at once whatever the others say.
    assert eviction_time(tolerations[:1], taints, NOW) == NOW


# ------------------------------------------------------------------------- taints


def keys(taints: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(t["key"], t["effect"]) for t in taints]


def test_ready_node_loses_condition_taints_and_keeps_others() -> None:
    taints = [
        {"key": NOT_READY, "effect": "NoSchedule"},
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        no_execute(UNREACHABLE),
    ]
    assert desired_taints(taints, "True", NOW) == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    ]


def test_not_ready_node_gets_not_ready_taints_with_time_added() -> None:
    result = desired_taints([{"key": NOT_READY, "effect": "NoSchedule"}], "False", NOW)
    assert keys(result) == [(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")]
    assert result[0] == {"key": NOT_READY, "effect": "NoSchedule"}  # admission's, kept as is
    assert result[1]["timeAdded"] == "2030-01-01T00:01:40Z"


def test_unknown_node_swaps_not_ready_for_unreachable_and_keeps_time_added() -> None:
    existing = [no_execute(UNREACHABLE), {"key": NOT_READY, "effect": "NoSchedule"}]
    result = desired_taints(existing, "Unknown", NOW)
    assert keys(result) == [(UNREACHABLE, "NoExecute"), (UNREACHABLE, "NoSchedule")]
    assert result[0]["timeAdded"] == ADDED


def test_node_that_never_reported_keeps_its_taints() -> None:
    taints = [{"key": NOT_READY, "effect": "NoSchedule"}]
    assert desired_taints(taints, None, NOW) == taints


# ------------------------------------------------------------------------- admission


def test_new_nodes_get_the_not_ready_taint_once() -> None:
    store = build_store()
    nodes = store.registry.get("", "v1", "nodes")
    assert nodes is not None
    plain, _ = store.create(nodes, "", {"metadata": {"name": "a"}})
    assert plain.decode()["spec"]["taints"] == [{"key": NOT_READY, "effect": "NoSchedule"}]
    own = {"key": NOT_READY, "effect": "NoSchedule", "timeAdded": ADDED}
    other = {"key": "dedicated", "value": "x", "effect": "NoExecute"}
    tainted, _ = store.create(
        nodes, "", {"metadata": {"name": "b"}, "spec": {"taints": [other, own]}}
    )
    assert tainted.decode()["spec"]["taints"] == [other, own]


def pod_tolerations(store: Any, name: str, tolerations: list[dict[str, Any]] | None = None) -> Any:
    pods = store.registry.get("", "v1", "pods")
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    stored, _ = store.create(pods, "default", {"metadata": {"name": name}, "spec": spec})
    return stored.decode()["spec"]["tolerations"]


def test_default_toleration_seconds_are_configurable() -> None:
    assert pod_tolerations(build_store(), "p") == [
        {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]
    store = build_store(
        default_not_ready_toleration_seconds=1, default_unreachable_toleration_seconds=2
    )
    assert pod_tolerations(store, "p") == [
        {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1},
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
    ]
    own = {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}
    assert pod_tolerations(store, "q", [dict(own)]) == [
        own,
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
    ]


def test_a_status_update_does_not_finish_a_graceful_pod_deletion() -> None:
    store = build_store()
    pods = store.registry.get("", "v1", "pods")
    assert pods is not None
    spec = {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]}
    store.create(pods, "default", {"metadata": {"name": "p"}, "spec": spec})
    _, finished = store.delete(pods, "default", "p")
    assert not finished
    pod = store.get(pods, "default", "p").decode()
    pod["status"]["phase"] = "Failed"
    store.update(pods, "default", "p", pod, subresource="status")
    assert store.get(pods, "default", "p").decode()["status"]["phase"] == "Failed"
    # The kubelet's confirmation (grace 0) completes it.
    _, finished = store.delete(pods, "default", "p", grace_period=0)
    assert finished
    assert store.find(pods, "default", "p") is None
