"""Field ownership and server-side apply of the embedded API server (sim.apiserver.field_sets,
field_walk, managed_fields, apply).

Expected values follow sigs.k8s.io/structured-merge-diff (FieldsV1 serialization and order,
ToFieldSet, Compare, Updater.Update/Apply, merge.Conflicts) and kube-apiserver's field manager
(internal/conflict.go NewConflictError and printManager, stripmeta.go, capmanagers.go,
prefixFromUserAgent). The FieldsV1 tries are the ones a real kube-apiserver shows for the same
objects (`kubectl get -o yaml --show-managed-fields`).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sim.apiserver import errors
from sim.apiserver.apply import apply_configuration, merge
from sim.apiserver.field_sets import (
    difference_into,
    element_order,
    insert,
    intersection,
    key_element,
    path_string,
    paths,
    union_into,
    value_element,
)
from sim.apiserver.field_shapes import MAP, SET, shape_of
from sim.apiserver.field_walk import ShapeError, compare, created, field_set
from sim.apiserver.managed_fields import (
    Writer,
    field_manager_causes,
    identifier,
    prefix_from_user_agent,
    record_update,
)
from sim.apiserver.registry import BUILTINS, Registry, load_crds, resource_type_from_crd

REGISTRY = Registry(BUILTINS)
for _crd in load_crds(None):
    for _rtype in resource_type_from_crd(_crd):
        REGISTRY.add(_rtype)
DEPLOYMENTS = REGISTRY.get("apps", "v1", "deployments")
CONFIGMAPS = REGISTRY.get("", "v1", "configmaps")
PODS = REGISTRY.get("", "v1", "pods")
SERVICES = REGISTRY.get("", "v1", "services")
QUEUES = REGISTRY.get("scheduling.volcano.sh", "v1beta1", "queues")
assert DEPLOYMENTS and CONFIGMAPS and PODS and SERVICES and QUEUES
DEPLOY = shape_of(DEPLOYMENTS)


def deployment(replicas: int = 2, image: str = "nginx:1.25", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": labels or {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }


def entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """managedFields by (manager, operation)."""
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields") or []}


def fields_of(obj: dict[str, Any], manager: str, operation: str) -> dict[str, Any]:
    return entries(obj)[(manager, operation)]["fieldsV1"]


def applied(
    live: dict[str, Any] | None,
    config: dict[str, Any],
    manager: str = "kubectl",
    force: bool = False,
    status: str = "none",
) -> dict[str, Any]:
    return apply_configuration(
        copy.deepcopy(live) if live is not None else None,
        copy.deepcopy(config),
        writer=Writer(manager, "apps/v1"),
        force=force,
        shape=DEPLOY,
        status=status,
    )


def updated(old: dict[str, Any], new: dict[str, Any], manager: str, sub: str = "") -> dict:
    new = copy.deepcopy(new)
    new["metadata"]["managedFields"] = copy.deepcopy(old["metadata"].get("managedFields"))
    record_update(copy.deepcopy(old), new, Writer(manager, "apps/v1", sub), DEPLOY)
    return new


# --------------------------------------------------------------------------- FieldsV1 sets


def test_path_elements_serialize_like_structured_merge_diff() -> None:
    # Key fields sorted by name, compact JSON, Go's escaping of <, > and &.
    assert key_element({"protocol": "TCP", "containerPort": 80}) == (
        'k:{"containerPort":80,"protocol":"TCP"}'
    )
    assert value_element("a<b") == 'v:"a\\u003cb"'
    assert path_string(("f:spec", 'k:{"containerPort":80,"protocol":"TCP"}', "f:name")) == (
        '.spec[containerPort=80,protocol="TCP"].name'
    )
    assert path_string(("f:metadata", "f:finalizers", 'v:"x"')) == '.metadata.finalizers[="x"]'


def test_elements_order_as_path_element_compare() -> None:
    # ".", fields by name, keys (numbers numerically before strings), values, indexes.
    shuffled = ["i:0", 'v:"a"', 'k:{"port":8080}', 'k:{"port":80}', "f:b", "f:a", "."]
    assert sorted(shuffled, key=element_order) == [
        ".",
        "f:a",
        "f:b",
        'k:{"port":80}',
        'k:{"port":8080}',
        'v:"a"',
        "i:0",
    ]


def test_set_operations_keep_fieldsv1_normal_form() -> None:
    tree: dict[str, Any] = {}
    insert(tree, ("f:spec", "f:replicas"))
    insert(tree, ("f:metadata", "f:labels"))
    insert(tree, ("f:metadata", "f:labels", "f:app"))  # a member gaining children keeps "."
    assert tree == {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {"f:replicas": {}},
    }
    assert list(tree) == ["f:metadata", "f:spec"]
    other = {"f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}}, "f:data": {}}
    union_into(tree, other)
    assert tree["f:metadata"]["f:labels"] == {".": {}, "f:app": {}, "f:tier": {}}
    assert list(tree) == ["f:data", "f:metadata", "f:spec"]
    assert intersection(tree, {"f:metadata": {"f:labels": {"f:tier": {}}}}) == {
        "f:metadata": {"f:labels": {"f:tier": {}}}
    }
    difference_into(tree, {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:tier": {}}}})
    assert tree == {"f:data": {}, "f:spec": {"f:replicas": {}}}
    # A member that loses its last child stays a (leaf) member; a parent that does goes.
    tree = {"f:a": {".": {}, "f:b": {}}, "f:c": {"f:d": {}}}
    difference_into(tree, {"f:a": {"f:b": {}}, "f:c": {"f:d": {}}})
    assert tree == {"f:a": {}}


def test_paths_are_listed_members_first() -> None:
    tree = {"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:replicas": {}, "f:x": {}}}
    assert [path_string(p) for p in paths(tree)] == [
        ".metadata.labels.a",
        ".spec.replicas",
        ".spec.x",
    ]
    tree = {"f:spec": {"f:template": {"f:x": {}}, "f:replicas": {}}}
    assert [path_string(p) for p in paths(tree)] == [".spec.replicas", ".spec.template.x"]


# --------------------------------------------------------------------------- list types


def test_list_types_of_built_ins_and_custom_resources() -> None:
    container = DEPLOY.field("spec").field("template").field("spec").field("containers")
    assert container.list_type().kind == MAP and container.list_type().keys == ("name",)
    ports = container.item().field("ports").list_type()
    assert ports.keys == ("containerPort", "protocol") and ports.defaults == {"protocol": "TCP"}
    assert DEPLOY.field("metadata").field("finalizers").list_type().kind == SET
    assert DEPLOY.field("spec").field("template").field("spec").field(
        "tolerations"
    ).list_type().kind == ("atomic")
    service_ports = shape_of(SERVICES).field("spec").field("ports").list_type()
    assert service_ports.keys == ("port", "protocol")
    assert DEPLOY.field("spec").field("selector").atomic_map()
    # Volcano's CRDs declare no list types: every list of a custom resource is atomic.
    job = shape_of(REGISTRY.get("batch.volcano.sh", "v1alpha1", "jobs"))  # type: ignore[arg-type]
    assert job.field("spec").field("tasks").list_type().kind == "atomic"
    assert job.field("metadata").field("finalizers").list_type().kind == SET


# --------------------------------------------------------------------------- ToFieldSet


def test_field_set_of_an_applied_deployment() -> None:
    config = deployment()
    config["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    config["metadata"]["finalizers"] = ["example.com/x"]
    assert field_set(config, DEPLOY) == {
        "f:apiVersion": {},
        "f:kind": {},
        "f:metadata": {
            "f:finalizers": {'v:"example.com/x"': {}},
            "f:labels": {"f:app": {}},
            "f:name": {},
            "f:namespace": {},
        },
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},  # an atomic LabelSelector
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"c"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {
                                'k:{"containerPort":80,"protocol":"TCP"}': {
                                    ".": {},
                                    "f:containerPort": {},
                                }
                            },
                        }
                    }
                },
            },
        },
    }


def test_field_set_of_a_custom_resource_marks_map_entries() -> None:
    queue = {"spec": {"capability": {"cpu": "4"}, "weight": 1}, "metadata": {"labels": {}}}
    # `capability` is a declared property; its entries are map keys (additionalProperties).
    assert field_set(queue, shape_of(QUEUES)) == {
        "f:metadata": {"f:labels": {}},
        "f:spec": {"f:capability": {"f:cpu": {}}, "f:weight": {}},
    }


def test_field_set_refuses_items_without_their_key() -> None:
    config = deployment()
    del config["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(ShapeError, match='omits key field "name"'):
        field_set(config, DEPLOY)
    config = deployment()
    config["spec"]["template"]["spec"]["containers"].append({"name": "c"})
    with pytest.raises(ShapeError, match="duplicate entries"):
        field_set(config, DEPLOY)


# --------------------------------------------------------------------------- Compare


def test_compare_reports_added_modified_removed() -> None:
    old = deployment()
    new = deployment(replicas=3, image="nginx:1.26")
    del new["metadata"]["labels"]
    new["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "envoy"})
    new["metadata"]["resourceVersion"] = "9"  # server metadata is never compared
    result = compare(old, new, DEPLOY)
    assert result.modified == {
        "f:spec": {
            "f:replicas": {},
            "f:template": {"f:spec": {"f:containers": {'k:{"name":"c"}': {"f:image": {}}}}},
        }
    }
    assert result.added == {
        "f:spec": {
            "f:template": {
                "f:spec": {
                    "f:containers": {'k:{"name":"side"}': {".": {}, "f:image": {}, "f:name": {}}}
                }
            }
        }
    }
    assert result.removed == {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}


def test_compare_atomic_values_and_type_changes() -> None:
    old = {"spec": {"selector": {"matchLabels": {"a": "1"}}, "x": {"y": 1}}}
    new = {"spec": {"selector": {"matchLabels": {"a": "2"}}, "x": "flat"}}
    result = compare(old, new, DEPLOY)
    assert result.modified == {"f:spec": {"f:selector": {}, "f:x": {}}}
    assert result.removed == {"f:spec": {"f:x": {"f:y": {}}}}
    assert result.added == {}


def test_created_leaves_out_what_a_decoded_object_always_has() -> None:
    """A create "adds" the fields set, but not the non-pointer structs (spec, the template's
    metadata and spec) nor the containers list (no omitempty): kube-apiserver compares with
    the Go zero object."""
    body = deployment()
    body["spec"]["template"]["metadata"]["creationTimestamp"] = None
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
    body["status"] = {}
    assert created(body, DEPLOY).added == {
        "f:metadata": {
            "f:labels": {".": {}, "f:app": {}},
            "f:name": {},
            "f:namespace": {},
        },
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"c"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:resources": {},
                        }
                    }
                },
            },
        },
    }
    # A custom resource has no zero structs: its spec itself is added.
    queue = {"apiVersion": "x", "kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1}}
    assert created(queue, shape_of(QUEUES)).added["f:spec"] == {".": {}, "f:weight": {}}


# --------------------------------------------------------------------------- Update


def test_create_records_the_creator_and_strips_server_metadata() -> None:
    body = deployment()
    body["metadata"]["uid"] = "u"
    record_update(None, body, Writer("kubectl-create", "apps/v1"), DEPLOY, ignore_status=True)
    [entry] = body["metadata"]["managedFields"]
    assert list(entry) == ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"]
    assert entry["manager"] == "kubectl-create" and entry["operation"] == "Update"
    assert entry["fieldsType"] == "FieldsV1" and entry["time"].endswith("Z")
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}


def test_update_moves_changed_fields_to_the_updater() -> None:
    live = applied(None, deployment())
    scaled = deployment(replicas=5)
    scaled["metadata"] = live["metadata"]
    after = updated(live, scaled, "kubectl", sub="scale")
    scale_entry = entries(after)[("kubectl", "Update")]
    assert scale_entry["subresource"] == "scale"
    assert scale_entry["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    # No conflict for an update: the applier simply lost the field.
    assert "f:replicas" not in fields_of(after, "kubectl", "Apply")["f:spec"]


def test_update_that_changes_nothing_touches_no_entry() -> None:
    live = applied(None, deployment())
    again = copy.deepcopy(live)
    after = updated(live, again, "someone-else")
    assert after["metadata"]["managedFields"] == live["metadata"]["managedFields"]


def test_removed_fields_leave_every_manager() -> None:
    live = applied(None, deployment(app="web", tier="front"))
    new = copy.deepcopy(live)
    del new["metadata"]["labels"]["tier"]
    after = updated(live, new, "kubectl-edit")
    assert fields_of(after, "kubectl", "Apply")["f:metadata"] == {"f:labels": {"f:app": {}}}
    assert ("kubectl-edit", "Update") not in entries(after)  # it took nothing


def test_status_is_not_recorded_for_the_main_resource() -> None:
    body = deployment()
    body["status"] = {"replicas": 3}
    record_update(None, body, Writer("kubectl-create", "apps/v1"), DEPLOY, ignore_status=True)
    assert "f:status" not in body["metadata"]["managedFields"][0]["fieldsV1"]


def test_request_entries_are_used_canonicalized_or_reset() -> None:
    live = applied(None, deployment())
    # A client sends the entries back with another time format: read as the same time.
    sent = copy.deepcopy(live)
    sent["metadata"]["managedFields"][0]["time"] = live["metadata"]["managedFields"][0][
        "time"
    ].replace("Z", "+00:00")
    after = updated(live, sent, "x")
    assert after["metadata"]["managedFields"] == live["metadata"]["managedFields"]
    # [] resets them: only this update's own changes are recorded.
    reset = deployment(replicas=7)
    reset["metadata"]["managedFields"] = []
    record_update(copy.deepcopy(live), reset, Writer("x", "apps/v1"), DEPLOY)
    assert [(e["manager"], e["fieldsV1"]) for e in reset["metadata"]["managedFields"]] == [
        ("x", {"f:spec": {"f:replicas": {}}})
    ]


def test_update_entries_are_capped_at_ten() -> None:
    obj = deployment()
    record_update(None, obj, Writer("m0", "apps/v1"), DEPLOY)
    for i in range(1, 12):
        new = copy.deepcopy(obj)
        new["metadata"]["annotations"] = {**new["metadata"].get("annotations", {}), f"a{i}": "x"}
        record_update(copy.deepcopy(obj), new, Writer(f"m{i}", "apps/v1"), DEPLOY)
        obj = new
    managers = [e["manager"] for e in obj["metadata"]["managedFields"]]
    assert len(managers) == 10 and "ancient-changes" in managers


def test_default_manager_is_the_user_agent_prefix() -> None:
    assert prefix_from_user_agent("kubectl/v1.32.4 (linux/amd64) kubernetes/abc") == "kubectl"
    assert prefix_from_user_agent("OpenAPI-Generator/36.1.0/python") == "OpenAPI-Generator"
    assert prefix_from_user_agent("a\x00b/1") == "ab"
    assert prefix_from_user_agent("x" * 200) == "x" * 128
    assert field_manager_causes("ok") == []
    assert field_manager_causes("x" * 129)[0]["reason"] == "FieldValueTooLong"


# --------------------------------------------------------------------------- apply: merge


def test_merge_maps_keyed_lists_sets_and_atomic_lists() -> None:
    live = {
        "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "a", "image": "i", "args": ["1", "2"]},
                        {"name": "b", "image": "j"},
                    ],
                    "tolerations": [{"key": "k1"}, {"key": "k2"}],
                }
            }
        },
    }
    config = {
        "metadata": {"labels": {"b": "3", "c": "4"}, "finalizers": ["z", "x"]},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "a", "args": ["9"]}, {"name": "new", "image": "k"}],
                    "tolerations": [{"key": "k3"}],
                }
            }
        },
    }
    out = merge(live, config, DEPLOY)
    assert out["metadata"]["labels"] == {"a": "1", "b": "3", "c": "4"}
    assert out["metadata"]["finalizers"] == ["z", "x", "y"]
    pod = out["spec"]["template"]["spec"]
    assert pod["containers"] == [
        {"name": "a", "image": "i", "args": ["9"]},  # merged; the atomic args replaced
        {"name": "b", "image": "j"},
        {"name": "new", "image": "k"},
    ]
    assert pod["tolerations"] == [{"key": "k3"}]  # atomic: replaced whole
    assert live["metadata"]["labels"] == {"a": "1", "b": "2"}  # inputs untouched


def test_merge_follows_the_configuration_order_of_shared_items() -> None:
    shape = DEPLOY.field("metadata").field("finalizers")
    assert merge(["a", "b", "c"], ["c", "a"], shape) == ["b", "c", "a"]
    assert merge(["a", "b"], ["a", "b", "c"], shape) == ["a", "b", "c"]


def test_null_in_a_configuration_unsets_the_field() -> None:
    out = merge({"spec": {"replicas": 3, "paused": True}}, {"spec": {"paused": None}}, DEPLOY)
    assert out == {"spec": {"replicas": 3}}


# --------------------------------------------------------------------------- apply: ownership


def test_apply_creates_and_owns_exactly_its_configuration() -> None:
    obj = applied(None, deployment())
    assert obj["spec"]["replicas"] == 2
    [entry] = obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == (
        "kubectl",
        "Apply",
        "apps/v1",
    )
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}}}
                },
            },
        },
    }


def test_reapply_with_a_change_updates_and_a_noop_keeps_the_time() -> None:
    first = applied(None, deployment())
    first["metadata"]["managedFields"][0]["time"] = "2020-01-01T00:00:00Z"
    same = applied(first, deployment())
    assert same["metadata"]["managedFields"][0]["time"] == "2020-01-01T00:00:00Z"
    changed = applied(first, deployment(replicas=4))
    assert changed["spec"]["replicas"] == 4
    assert changed["metadata"]["managedFields"][0]["time"] != "2020-01-01T00:00:00Z"


def test_conflict_with_an_updater_reads_as_kube_apiserver_writes_it() -> None:
    live = applied(None, deployment())
    scaled = deployment(replicas=5)
    scaled["metadata"] = live["metadata"]
    live = updated(live, scaled, "kubectl", sub="scale")
    with pytest.raises(errors.ApiError) as caught:
        applied(live, deployment(replicas=2))
    error = caught.value
    assert (error.code, error.reason) == (409, "Conflict")
    assert error.message == (
        'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" '
        "using apps/v1: .spec.replicas"
    )
    assert error.status()["details"] == {
        "causes": [
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "kubectl" with subresource "scale" using apps/v1',
                "field": ".spec.replicas",
            }
        ]
    }


def test_several_conflicts_are_grouped_by_manager() -> None:
    live = applied(None, deployment(), manager="alice")
    with pytest.raises(errors.ApiError) as caught:
        applied(live, deployment(replicas=3, image="other"), manager="bob")
    assert caught.value.message == (
        'Apply failed with 2 conflicts: conflicts with "alice":\n- .spec.replicas\n'
        '- .spec.template.spec.containers[name="c"].image'
    )
    # An updater is named with its API version, an applier without.
    created_body = deployment()
    record_update(None, created_body, Writer("kubectl-client-side-apply", "apps/v1"), DEPLOY)
    with pytest.raises(errors.ApiError) as caught:
        applied(created_body, deployment(replicas=3))
    assert caught.value.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using '
        "apps/v1: .spec.replicas"
    )


def test_force_takes_the_fields_from_their_managers() -> None:
    live = applied(None, deployment(), manager="alice")
    out = applied(live, deployment(replicas=3), manager="bob", force=True)
    assert out["spec"]["replicas"] == 3
    assert "f:replicas" not in fields_of(out, "alice", "Apply")["f:spec"]
    assert "f:replicas" in fields_of(out, "bob", "Apply")["f:spec"]


def test_equal_values_are_shared_without_conflict() -> None:
    live = applied(None, deployment(), manager="alice")
    out = applied(live, deployment(), manager="bob")
    assert fields_of(out, "alice", "Apply") == fields_of(out, "bob", "Apply")


def test_fields_dropped_from_the_configuration_are_removed_unless_owned() -> None:
    live = applied(None, deployment(app="web", tier="front"))
    out = applied(live, deployment(app="web"))
    assert out["metadata"]["labels"] == {"app": "web"}
    # Co-owned by another applier: the field stays, now owned by that one only.
    live = applied(None, deployment(app="web", tier="front"))
    live = applied(live, deployment(app="web", tier="front"), manager="other")
    out = applied(live, deployment(app="web"))
    assert out["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert fields_of(out, "other", "Apply")["f:metadata"]["f:labels"] == {
        "f:app": {},
        "f:tier": {},
    }
    # A list item dropped from the configuration goes, with everything in it.
    two = deployment()
    two["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "envoy"})
    out = applied(applied(None, two), deployment())
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["c"]


def test_fields_set_by_updaters_survive_an_apply_that_never_had_them() -> None:
    live = applied(None, deployment())
    annotated = copy.deepcopy(live)
    annotated["metadata"]["annotations"] = {"note": "x"}
    live = updated(live, annotated, "kubectl-annotate")
    out = applied(live, deployment(replicas=3))
    assert out["metadata"]["annotations"] == {"note": "x"}
    assert ("kubectl-annotate", "Update") in entries(out)


def test_an_update_takes_over_an_applied_field_then_apply_conflicts() -> None:
    live = applied(None, deployment())
    edited = copy.deepcopy(live)
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:edited"
    live = updated(live, edited, "kubectl-edit")
    assert fields_of(live, "kubectl-edit", "Update") == {
        "f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"c"}': {"f:image": {}}}}}}
    }
    with pytest.raises(errors.ApiError, match=r'conflict with "kubectl-edit" using apps/v1'):
        applied(live, deployment())


def test_status_is_ignored_unless_the_status_subresource_is_applied() -> None:
    config = deployment()
    config["status"] = {"replicas": 9}
    live = applied(None, deployment())
    live["status"] = {"replicas": 1}
    out = applied(live, config)
    assert out["status"] == {"replicas": 1}
    assert "f:status" not in fields_of(out, "kubectl", "Apply")
    out = apply_configuration(
        copy.deepcopy(live),
        config,
        writer=Writer("ctl", "apps/v1", "status"),
        force=False,
        shape=DEPLOY,
        status="only",
    )
    assert out["status"] == {"replicas": 9} and out["spec"] == live["spec"]
    ctl = entries(out)[("ctl", "Apply")]
    assert ctl["subresource"] == "status" and ctl["fieldsV1"] == {"f:status": {"f:replicas": {}}}


def test_apply_refuses_managed_fields_in_the_configuration() -> None:
    config = deployment()
    config["metadata"]["managedFields"] = []
    with pytest.raises(errors.ApiError, match=r"metadata\.managedFields must be nil"):
        applied(None, config)


def test_identifiers_leave_the_api_version_out_for_appliers() -> None:
    assert identifier({"manager": "m", "operation": "Apply", "apiVersion": "apps/v1"}) == (
        "m",
        "Apply",
        "",
        "",
    )
    assert identifier(
        {"manager": "m", "operation": "Update", "apiVersion": "v1", "subresource": "status"}
    ) == ("m", "Update", "v1", "status")
