"""The filter's byte searches (is this pod a gang member? one of vulcan's schedulers?) read only
the pod part of kube-scheduler's request, and never lose any of the pod."""

from __future__ import annotations

from typing import Any

import orjson

from extender.gang_server import pod_part

POD: dict[str, Any] = {
    "metadata": {
        "name": "w-0",
        "namespace": "ns",
        # A label whose key is the next field's name: the pod's bytes hold `,"Nodes":` too.
        "labels": {"app": "x", "Nodes": "many"},
        "annotations": {"scheduling.k8s.io/group-name": "job-a"},
    },
    "spec": {"schedulerName": "volcano", "containers": [{"name": "c"}]},
}


def go_body(names: list[str]) -> bytes:
    """As kube-scheduler marshals ExtenderArgs in cache mode: Pod, Nodes, NodeNames in order."""
    return b'{"Pod":%s,"Nodes":null,"NodeNames":%s}' % (orjson.dumps(POD), orjson.dumps(names))


def test_the_candidate_names_are_left_out_and_the_whole_pod_kept() -> None:
    body = go_body(["volcano", "n-1", "scheduling.k8s.io/group-name"])
    part = pod_part(body)
    assert part == b'{"Pod":' + orjson.dumps(POD)
    # A node named like a scheduler or a group key is no longer read as the pod's.
    assert b'"volcano"' in part  # the pod's own schedulerName
    assert part.count(b"scheduling.k8s.io/group-name") == 1


def test_node_objects_are_searched_whole() -> None:
    nodes = {"metadata": {}, "items": [{"metadata": {"name": "n"}}]}
    body = b'{"Pod":%s,"Nodes":%s,"NodeNames":null}' % (orjson.dumps(POD), orjson.dumps(nodes))
    assert pod_part(body) == body


def test_another_layout_is_searched_whole() -> None:
    body = orjson.dumps({"NodeNames": ["n-1"], "Nodes": None, "Pod": POD})
    assert pod_part(body) == body
    spaced = b'{"Pod": %s, "Nodes": null, "NodeNames": ["n-1"]}' % orjson.dumps(POD)
    assert pod_part(spaced) == spaced
