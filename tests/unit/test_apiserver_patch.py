"""sim.apiserver.patch: the three PATCH content types of the Kubernetes API.

Expected values come from the specifications and from Kubernetes itself: RFC 7386 appendix A
(merge patch), RFC 6902 (JSON patch), and the test tables of apimachinery's
pkg/util/strategicpatch/patch_test.go (TestCustomStrategicMergePatch and the raw three-way cases;
their `mergingList` / `mergingIntList` fields are played here by `containers` (merge key `name`)
and `metadata.finalizers` (a merging list of primitives)). The kubectl and kube-scheduler bodies
are the shapes those clients send.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sim.apiserver.patch import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    UnsupportedPatchType,
    apply_patch,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)

# --------------------------------------------------------------------------- merge patch

# RFC 7386 appendix A: (target, patch, result). Each row is applied one level down, as the value
# of "x", so that non-object targets and patches fit the object-to-object API.
RFC7386_EXAMPLES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC7386_EXAMPLES)
def test_merge_patch_rfc7386_examples(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch({"x": target, "keep": 1}, {"x": patch}) == {"x": expected, "keep": 1}


def test_merge_patch_null_patch_deletes_the_member() -> None:
    # The RFC row `{"a":"foo"} + null = null`, one level down: the member goes away.
    assert merge_patch({"x": {"a": "foo"}, "y": 1}, {"x": None}) == {"y": 1}


def test_merge_patch_does_not_mutate_or_alias_inputs() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "spec": {"list": [1]}}
    patch = {"metadata": {"labels": {"b": "2"}}, "spec": {"new": {"deep": [1, 2]}}}
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    result = merge_patch(target, patch)
    result["spec"]["list"].append(2)
    result["spec"]["new"]["deep"].append(3)
    result["metadata"]["labels"]["c"] = "3"
    assert target == target_before
    assert patch == patch_before


def test_merge_patch_must_be_an_object() -> None:
    with pytest.raises(PatchError, match="must be a JSON object"):
        merge_patch({"a": 1}, [1])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- JSON patch

DOC = {"metadata": {"name": "p", "labels": {"app": "web"}}, "spec": {"list": [1, 2, 3]}}

JSON_PATCH_CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any]]] = [
    (
        "add member",
        [{"op": "add", "path": "/metadata/labels/tier", "value": "db"}],
        {**DOC, "metadata": {"name": "p", "labels": {"app": "web", "tier": "db"}}},
    ),
    (
        "add at index",
        [{"op": "add", "path": "/spec/list/1", "value": 9}],
        {**DOC, "spec": {"list": [1, 9, 2, 3]}},
    ),
    (
        "add appends with -",
        [{"op": "add", "path": "/spec/list/-", "value": 4}],
        {**DOC, "spec": {"list": [1, 2, 3, 4]}},
    ),
    (
        "remove",
        [{"op": "remove", "path": "/metadata/labels/app"}],
        {**DOC, "metadata": {"name": "p", "labels": {}}},
    ),
    (
        "replace",
        [{"op": "replace", "path": "/spec/list/0", "value": 0}],
        {**DOC, "spec": {"list": [0, 2, 3]}},
    ),
    (
        "move",
        [{"op": "move", "from": "/metadata/labels/app", "path": "/metadata/labels/role"}],
        {**DOC, "metadata": {"name": "p", "labels": {"role": "web"}}},
    ),
    (
        "copy",
        [{"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/name"}],
        {**DOC, "metadata": {"name": "p", "labels": {"app": "web", "name": "p"}}},
    ),
    (
        "test passes, then replace",
        [
            {"op": "test", "path": "/metadata/name", "value": "p"},
            {"op": "replace", "path": "/metadata/name", "value": "q"},
        ],
        {**DOC, "metadata": {"name": "q", "labels": {"app": "web"}}},
    ),
    (
        "~1 and ~0 escapes (the usual way to touch an annotation key with a slash)",
        [
            {"op": "add", "path": "/metadata/labels/example.com~1role", "value": "x"},
            {"op": "add", "path": "/metadata/labels/a~0b", "value": "y"},
        ],
        {
            **DOC,
            "metadata": {
                "name": "p",
                "labels": {"app": "web", "example.com/role": "x", "a~b": "y"},
            },
        },
    ),
]


@pytest.mark.parametrize(
    ("operations", "expected"),
    [(ops, expected) for _, ops, expected in JSON_PATCH_CASES],
    ids=[name for name, _, _ in JSON_PATCH_CASES],
)
def test_json_patch_operations(operations: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(DOC)
    assert json_patch(DOC, operations) == expected
    assert before == DOC


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        ([{"op": "test", "path": "/metadata/name", "value": "other"}], "test failed"),
        ([{"op": "remove", "path": "/metadata/missing"}], "operation 0"),
        ([{"op": "replace", "path": "/nope/deeper", "value": 1}], "'/nope/deeper'"),
        ([{"op": "add", "path": "/spec/list/7", "value": 1}], "failed"),
        ([{"op": "add", "path": "no-leading-slash", "value": 1}], "failed"),
        ([{"op": "move", "from": "/missing", "path": "/x"}], "failed"),
        ([{"op": "frobnicate", "path": "/a"}], "frobnicate"),
        ([{"path": "/a"}], "operation 0"),
        (["not an operation"], "not an object"),
        ([{"op": "add", "path": "", "value": [1]}], "did not produce a JSON object"),
    ],
)
def test_json_patch_errors(operations: list[Any], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        json_patch(DOC, operations)


def test_json_patch_names_the_failing_operation() -> None:
    operations = [
        {"op": "add", "path": "/metadata/labels/a", "value": "1"},
        {"op": "test", "path": "/metadata/labels/a", "value": "2"},
    ]
    with pytest.raises(PatchError, match=r"operation 1 \('test' '/metadata/labels/a'\)"):
        json_patch(DOC, operations)


def test_json_patch_must_be_a_list() -> None:
    with pytest.raises(PatchError, match="must be a list"):
        json_patch(DOC, {"op": "add"})  # type: ignore[arg-type]


def test_json_patch_result_does_not_alias_the_operations() -> None:
    value = {"deep": [1]}
    result = json_patch({}, [{"op": "add", "path": "/x", "value": value}])
    result["x"]["deep"].append(2)
    assert value == {"deep": [1]}


# --------------------------------------------------------------------------- strategic merge


def smp(target: dict[str, Any], patch: dict[str, Any], kind: str | None = "Pod") -> dict[str, Any]:
    """Apply and check that neither input was touched."""
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    result = strategic_merge_patch(target, patch, kind)
    assert target == target_before, "the target was mutated"
    assert patch == patch_before, "the patch was mutated"
    return result


def pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def containers(result: dict[str, Any]) -> list[dict[str, Any]]:
    return result["spec"]["containers"]


def test_containers_merged_by_name() -> None:
    target = pod(
        containers=[
            {"name": "app", "image": "app:1", "args": ["--x"]},
            {"name": "sidecar", "image": "proxy:1"},
        ]
    )
    result = smp(target, {"spec": {"containers": [{"name": "app", "image": "app:2"}]}})
    assert containers(result) == [
        {"name": "app", "image": "app:2", "args": ["--x"]},
        {"name": "sidecar", "image": "proxy:1"},
    ]


def test_delete_directive_removes_an_env_entry() -> None:
    target = pod(
        containers=[
            {
                "name": "app",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            }
        ]
    )
    patch = {"spec": {"containers": [{"name": "app", "env": [{"name": "A", "$patch": "delete"}]}]}}
    assert containers(smp(target, patch)) == [{"name": "app", "env": [{"name": "B", "value": "2"}]}]


def test_replace_directive_on_a_map() -> None:
    target = pod(nodeSelector={"zone": "a", "disk": "ssd"})
    patch = {"spec": {"nodeSelector": {"$patch": "replace", "gpu": "yes"}}}
    assert smp(target, patch)["spec"]["nodeSelector"] == {"gpu": "yes"}


def test_replace_directive_on_a_merging_list() -> None:
    target = pod(containers=[{"name": "a"}, {"name": "b"}])
    patch = {"spec": {"containers": [{"$patch": "replace"}, {"name": "c", "image": "c:1"}]}}
    assert containers(smp(target, patch)) == [{"name": "c", "image": "c:1"}]


def test_delete_directive_on_a_map_removes_it() -> None:
    target = pod(affinity={"nodeAffinity": {}}, nodeName="n1")
    assert smp(target, {"spec": {"affinity": {"$patch": "delete"}}})["spec"] == {"nodeName": "n1"}


def test_label_removal_via_null() -> None:
    # `kubectl label pod p tier-` sends this body.
    target = {"metadata": {"name": "p", "labels": {"app": "web", "tier": "db"}}}
    result = smp(target, {"metadata": {"labels": {"tier": None}}})
    assert result["metadata"]["labels"] == {"app": "web"}


def test_kube_scheduler_status_patch_merges_condition_by_type() -> None:
    # kube-scheduler's PATCH pods/NAME/status (util.PatchPodStatus) after a failed attempt on a pod
    # that already carries conditions; lastProbeTime is null because metav1.Time marshals so.
    target = pod(containers=[{"name": "app"}])
    target["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "False"},
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: old.",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            },
        ],
    }
    patch = {
        "metadata": {"uid": "u-1"},
        "status": {
            "$setElementOrder/conditions": [
                {"type": "PodReadyToStartContainers"},
                {"type": "PodScheduled"},
            ],
            "conditions": [
                {
                    "type": "PodScheduled",
                    "lastProbeTime": None,
                    "message": "0/3 nodes are available: new.",
                }
            ],
            "nominatedNodeName": "node-2",
        },
    }
    status = smp(target, patch)["status"]
    assert status == {
        "phase": "Pending",
        "nominatedNodeName": "node-2",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "False"},
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: new.",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            },
        ],
    }


def test_new_condition_goes_where_set_element_order_puts_it() -> None:
    target = pod()
    target["status"] = {"conditions": [{"type": "Initialized", "status": "True"}]}
    scheduled = {"type": "PodScheduled", "status": "True"}
    with_order = {
        "status": {
            "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "PodScheduled"}],
            "conditions": [scheduled],
        }
    }
    assert smp(target, with_order)["status"]["conditions"] == [
        {"type": "Initialized", "status": "True"},
        scheduled,
    ]
    # Without the directive Go's mergeSlice puts an element new to the server first.
    without = {"status": {"conditions": [scheduled]}}
    assert smp(target, without)["status"]["conditions"] == [
        scheduled,
        {"type": "Initialized", "status": "True"},
    ]


def test_node_conditions_and_addresses_merge_by_type() -> None:
    node = {
        "kind": "Node",
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "DiskPressure"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        },
    }
    patch = {
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
        }
    }
    status = smp(node, patch, "Node")["status"]
    assert status["conditions"] == [{"type": "Ready", "status": "True"}, {"type": "DiskPressure"}]
    assert status["addresses"] == [{"type": "InternalIP", "address": "10.0.0.2"}]


def test_finalizers_are_a_set_union() -> None:
    target = {"metadata": {"finalizers": ["a", "b"]}}
    result = smp(target, {"metadata": {"finalizers": ["b", "c"]}})
    assert result["metadata"]["finalizers"] == ["a", "b", "c"]


def test_set_element_order_and_delete_from_primitive_list_are_consumed() -> None:
    # kubectl apply removing finalizer "a" and adding "c" (three-way patch shape).
    target = {"metadata": {"name": "x", "finalizers": ["a", "b"]}}
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["b", "c"],
            "$deleteFromPrimitiveList/finalizers": ["a"],
            "finalizers": ["c"],
        }
    }
    assert smp(target, patch)["metadata"] == {"name": "x", "finalizers": ["b", "c"]}


def test_kubectl_apply_three_way_patch_on_a_deployment() -> None:
    # Second `kubectl apply`: env B removed, env C added, image changed; the live object has a
    # server-side field (terminationMessagePath) and a container kubectl does not manage.
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {"last-applied": "..."}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:1",
                            "terminationMessagePath": "/dev/termination-log",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        },
                        {"name": "injected", "image": "mesh:1"},
                    ]
                }
            }
        },
    }
    patch = {
        "metadata": {"annotations": {"last-applied": "...2"}},
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "app"}],
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:2",
                            "$setElementOrder/env": [{"name": "A"}, {"name": "C"}],
                            "env": [
                                {"name": "C", "value": "3"},
                                {"name": "B", "$patch": "delete"},
                            ],
                        }
                    ],
                }
            }
        },
    }
    result = smp(deployment, patch, "Deployment")
    assert result["metadata"]["annotations"] == {"last-applied": "...2"}
    assert result["spec"]["template"]["spec"]["containers"] == [
        {
            "name": "app",
            "image": "app:2",
            "terminationMessagePath": "/dev/termination-log",
            "env": [{"name": "A", "value": "1"}, {"name": "C", "value": "3"}],
        },
        {"name": "injected", "image": "mesh:1"},
    ]


def test_retain_keys_clears_the_other_members_of_a_union() -> None:
    # kubectl apply switching a Deployment from RollingUpdate to Recreate.
    deployment = {
        "kind": "Deployment",
        "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
    }
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert smp(deployment, patch, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}


def test_retain_keys_rejects_a_patch_key_it_does_not_retain() -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}
    with pytest.raises(PatchError, match="retainKeys"):
        strategic_merge_patch({"spec": {}}, patch, "Deployment")


def test_list_without_merge_key_is_replaced() -> None:
    target = pod(tolerations=[{"key": "a", "operator": "Exists"}, {"key": "b"}])
    patch = {"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}}
    assert smp(target, patch)["spec"]["tolerations"] == [{"key": "c", "operator": "Exists"}]


def test_node_taints_are_replaced_like_kubernetes_does() -> None:
    # NodeSpec.Taints has no patchStrategy: `kubectl taint node n k-` sends the remaining list.
    node = {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b"}]}}
    patch = {"spec": {"taints": [{"key": "b"}]}}
    assert smp(node, patch, "Node")["spec"]["taints"] == [{"key": "b"}]


def test_container_ports_merge_by_container_port() -> None:
    target = pod(containers=[{"name": "app", "ports": [{"containerPort": 80, "name": "http"}]}])
    patch = {
        "spec": {
            "containers": [{"name": "app", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
        }
    }
    assert containers(smp(target, patch))[0]["ports"] == [
        {"containerPort": 80, "name": "http", "hostPort": 8080}
    ]


def test_service_ports_merge_by_port() -> None:
    service = {
        "kind": "Service",
        "spec": {
            "ports": [
                {"port": 80, "targetPort": 8080, "name": "http"},
                {"port": 443, "targetPort": 8443, "name": "https"},
            ]
        },
    }
    patch = {"spec": {"ports": [{"port": 443, "targetPort": 9443}]}}
    assert smp(service, patch, "Service")["spec"]["ports"] == [
        {"port": 80, "targetPort": 8080, "name": "http"},
        {"port": 443, "targetPort": 9443, "name": "https"},
    ]


def test_endpoints_ports_are_replaced() -> None:
    endpoints = {"kind": "Endpoints", "subsets": [{"ports": [{"port": 80}, {"port": 81}]}]}
    patch = {"subsets": [{"ports": [{"port": 82}]}]}
    assert smp(endpoints, patch, "Endpoints")["subsets"] == [{"ports": [{"port": 82}]}]


def test_new_values_are_stored_without_nulls_or_directives() -> None:
    target = {"metadata": {"name": "p"}}
    patch = {
        "metadata": {"labels": {"a": "1", "b": None}},
        "spec": {
            "$setElementOrder/containers": [{"name": "x"}],
            "containers": [{"name": "x", "env": [{"name": "gone", "$patch": "delete"}]}],
            "affinity": {"$patch": "replace", "nodeAffinity": {"x": None}},
        },
    }
    assert smp(target, patch) == {
        "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {"containers": [{"name": "x", "env": []}], "affinity": {"nodeAffinity": {}}},
    }


def test_result_does_not_alias_the_patch() -> None:
    patch = {"spec": {"containers": [{"name": "x", "args": ["a"]}]}}
    result = strategic_merge_patch(pod(), patch, "Pod")
    result["spec"]["containers"][0]["args"].append("b")
    assert patch == {"spec": {"containers": [{"name": "x", "args": ["a"]}]}}


def test_kind_none_uses_every_kind_specific_entry() -> None:
    service = {"spec": {"ports": [{"port": 80, "name": "http"}]}}
    patch = {"spec": {"ports": [{"port": 80, "targetPort": 1}]}}
    assert smp(service, patch, None)["spec"]["ports"] == [
        {"port": 80, "name": "http", "targetPort": 1}
    ]


@pytest.mark.parametrize(
    ("target", "patch", "message"),
    [
        (
            pod(containers=[{"name": "a"}]),
            {"spec": {"containers": [{"image": "no-name"}]}},
            "does not contain declared merge key: name",
        ),
        (pod(), {"spec": {"$patch": "bogus"}}, "unknown patch type 'bogus'"),
        (
            pod(containers=[{"name": "a"}]),
            {"spec": {"containers": [{"name": "a", "$patch": "merge"}]}},
            "cannot yet be specified",
        ),
        (
            pod(containers=[{"name": "a"}]),
            {"spec": {"containers": ["a"]}},
            "mixes objects",
        ),
        (
            {"metadata": {"finalizers": ["a"]}},
            {"metadata": {"finalizers": [{"name": "x"}]}},
            "without merge key",
        ),
        (pod(), {"spec": {"$retainKeys": "type"}}, "not a list"),
        (pod(), {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}, "not a list"),
    ],
)
def test_strategic_merge_patch_errors(
    target: dict[str, Any], patch: dict[str, Any], message: str
) -> None:
    with pytest.raises(PatchError, match=message):
        strategic_merge_patch(target, patch, "Pod")


# Rows of apimachinery's TestCustomStrategicMergePatch (two-way) and of the raw three-way cases
# (current + threeWay = result), with mergingList -> spec.containers, mergingIntList ->
# metadata.finalizers.
def _ml(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(items), **extra}}


def _mil(*items: Any, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"finalizers": list(items), **extra}}


APIMACHINERY_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    ("unique scalars when merging lists", _mil(1, 2), _mil(2, 3), _mil(1, 2, 3)),
    (
        "delete all items from merging list",
        _ml({"name": "1"}, {"name": "2"}),
        _ml({"$patch": "replace"}),
        _ml(),
    ),
    ("delete all keys from map", {"name": 1, "value": 1}, {"$patch": "replace"}, {}),
    (
        "add key and delete all keys from map",
        {"name": 1, "value": 1},
        {"other": "a", "$patch": "replace"},
        {"other": "a"},
    ),
    (
        "delete all duplicate entries in a merging list",
        _ml(
            {"name": "1"}, {"name": "1"}, {"name": "2", "value": "a"}, {"name": "3"}, {"name": "3"}
        ),
        _ml({"name": "1", "$patch": "delete"}, {"name": "3", "$patch": "delete"}),
        _ml({"name": "2", "value": "a"}),
    ),
    (
        "preserve the order from the patch in a merging list",
        _ml({"name": "1"}, {"name": "2", "value": "b"}, {"name": "3"}),
        _ml({"name": "3", "value": "c"}, {"name": "1", "value": "a"}, {"name": "2", "other": "x"}),
        _ml(
            {"name": "3", "value": "c"},
            {"name": "1", "value": "a"},
            {"name": "2", "value": "b", "other": "x"},
        ),
    ),
    (
        "preserve the order from the patch in a merging list 2",
        _ml({"name": "1"}, {"name": "2", "value": "b"}, {"name": "3"}),
        _ml({"name": "3", "value": "c"}, {"name": "1", "value": "a"}),
        _ml({"name": "2", "value": "b"}, {"name": "3", "value": "c"}, {"name": "1", "value": "a"}),
    ),
    (
        "preserve the order from the patch in a merging int list",
        _mil(1, 2, 3),
        _mil(3, 1),
        _mil(2, 3, 1),
    ),
    (
        "$setElementOrder contains item that is not present in the list to be merged",
        _ml({"name": "1"}, {"name": "3"}),
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "3"}, {"name": "2"}, {"name": "1"}],
                "containers": [{"name": "3", "value": 3}, {"name": "1", "value": 1}],
            }
        },
        _ml({"name": "3", "value": 3}, {"name": "1", "value": 1}),
    ),
    (
        "$setElementOrder contains item that is not present in the int list to be merged",
        _mil(1, 3),
        {"metadata": {"$setElementOrder/finalizers": [3, 2, 1]}},
        _mil(3, 1),
    ),
    (
        "$deleteFromPrimitiveList of nonexistent item should not add the item to the list",
        _mil(1, 2),
        {"metadata": {"$deleteFromPrimitiveList/finalizers": [3]}},
        _mil(1, 2),
    ),
    (
        "$deleteFromPrimitiveList on nonexistent primitive list should not add the list",
        {"foo": ["bar"]},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": [3]}},
        {"foo": ["bar"], "metadata": {}},
    ),
    (
        "nested patch merge with empty list (three-way)",
        {"name": "hi", **_ml({"name": "hello2"})},
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "hello"}, {"name": "doesntexist"}],
                "containers": [{"name": "hello"}, {"$patch": "delete", "name": "doesntexist"}],
            }
        },
        {"name": "hi", **_ml({"name": "hello"}, {"name": "hello2"})},
    ),
    (
        "delete all duplicate items in lists of scalars (three-way)",
        _mil(1, 2, 3, 3, 4),
        {
            "metadata": {
                "$setElementOrder/finalizers": [1, 2],
                "$deleteFromPrimitiveList/finalizers": [3],
            }
        },
        _mil(1, 2, 4),
    ),
    (
        "merge lists of maps (three-way)",
        _ml({"name": "1", "other": "a"}, {"name": "2", "value": 2, "other": "b"}),
        {
            "spec": {
                "$setElementOrder/containers": [
                    {"name": "4"},
                    {"name": "1"},
                    {"name": "2"},
                    {"name": "3"},
                ],
                "containers": [{"name": "4", "value": 4}, {"name": "3", "value": 3}],
            }
        },
        _ml(
            {"name": "4", "value": 4},
            {"name": "1", "other": "a"},
            {"name": "2", "value": 2, "other": "b"},
            {"name": "3", "value": 3},
        ),
    ),
]


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [(t, p, e) for _, t, p, e in APIMACHINERY_CASES],
    ids=[name for name, *_ in APIMACHINERY_CASES],
)
def test_apimachinery_cases(
    target: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert smp(target, patch) == expected


# --------------------------------------------------------------------------- dispatch


def test_apply_patch_dispatches_on_content_type() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "spec": {"finalizers": ["x"]}}
    merge = apply_patch(target, f"{MERGE_PATCH}; charset=utf-8", b'{"metadata":{"labels":null}}')
    assert merge == {"metadata": {}, "spec": {"finalizers": ["x"]}}
    ops = '[{"op":"replace","path":"/metadata/labels/a","value":"2"}]'
    assert apply_patch(target, JSON_PATCH, ops)["metadata"]["labels"] == {"a": "2"}
    strategic = apply_patch(
        {"metadata": {"finalizers": ["a"]}},
        STRATEGIC_MERGE_PATCH.upper(),
        {"metadata": {"finalizers": ["b"]}},
        "Pod",
    )
    assert strategic == {"metadata": {"finalizers": ["b", "a"]}}


def test_apply_patch_rejects_unknown_types_and_bad_bodies() -> None:
    with pytest.raises(UnsupportedPatchType, match="unknown format"):
        apply_patch({}, "application/apply-patch+yaml", b"{}")
    assert issubclass(UnsupportedPatchType, PatchError)
    with pytest.raises(PatchError, match="not valid JSON"):
        apply_patch({}, MERGE_PATCH, b"{nope")
    with pytest.raises(PatchError, match="must be a list"):
        apply_patch({}, JSON_PATCH, b"{}")
    with pytest.raises(PatchError, match="must be a JSON object"):
        apply_patch({}, STRATEGIC_MERGE_PATCH, b"[]")
