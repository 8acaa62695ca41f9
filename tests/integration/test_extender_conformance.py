"""The extender driven exactly as kube-scheduler drives it (k8s.io/kube-scheduler/extender/v1):
requests captured from a real kube-scheduler (tests/fixtures/kube-scheduler), PascalCase,
nulls, both node modes, all four verbs."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import pytest_asyncio

from core.kube.client import PODS
from extender.protocol import BindingArgs
from tests.helpers import KUBE_SCHEDULER_CAPTURES
from tests.integration.extender_harness import Harness, extender_harness

CAPTURES = KUBE_SCHEDULER_CAPTURES


@pytest_asyncio.fixture
async def h() -> AsyncIterator[Harness]:
    async with extender_harness() as harness:
        yield harness


def capture(name: str) -> dict[str, Any]:
    return json.loads((CAPTURES / name).read_text())


def args(
    pod: dict[str, Any], names: list[str] | None = None, nodes: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """ExtenderArgs as kube-scheduler sends them: both keys, one of them null."""
    return {
        "Pod": pod,
        "Nodes": None if nodes is None else {"metadata": {}, "items": nodes},
        "NodeNames": names,
    }


def pod_doc(created: dict[str, Any]) -> dict[str, Any]:
    """The pod as kube-scheduler's informer cache has it: no kind/apiVersion."""
    doc = copy.deepcopy(created)
    doc.pop("kind", None)
    doc.pop("apiVersion", None)
    return doc


# ------------------------------------------------------------------------------- filter


async def test_filter_non_cache_mode_with_real_capture(h: Harness) -> None:
    request = capture("filter-request-full-nodes.json")
    assert request["NodeNames"] is None  # captured in nodeCacheCapable: false mode
    status, answer = await h.post("filter", request)
    assert status == 200
    assert set(answer) == {
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    }
    assert answer["Error"] == ""
    sent = {n["metadata"]["name"]: n for n in request["Nodes"]["items"]}
    returned = answer["Nodes"]["items"]
    # Passing nodes are echoed back exactly as received (byte-compare after re-serialisation).
    for node in returned:
        assert orjson.dumps(node) == orjson.dumps(sent[node["metadata"]["name"]])
    judged = {n["metadata"]["name"] for n in returned} | set(answer["FailedNodes"])
    assert judged == set(sent)  # every node passes or is failed with a reason


async def test_prioritize_with_real_capture(h: Harness) -> None:
    request = capture("prioritize-request-full-nodes.json")
    status, answer = await h.post("prioritize", request)
    assert status == 200 and isinstance(answer, list)
    names = {n["metadata"]["name"] for n in request["Nodes"]["items"]}
    assert {entry["Host"] for entry in answer} <= names
    for entry in answer:
        assert set(entry) == {"Host", "Score"}
        assert type(entry["Score"]) is int and 0 <= entry["Score"] <= 10


async def filter_with_room_held_on(h: Harness, held_on: str) -> dict[str, Any]:
    """Filter a 1-cpu pod on a roomy node, a full one and one vulcan does not know, while a
    gang's member holds room on `held_on`."""
    from core.resources import ResourceVector
    from extender.ledger import Reservation

    await h.add_node("roomy", cpu="8")
    await h.add_node("full", cpu="2")
    await h.add_node("elsewhere", cpu="8")
    await h.add_pod("hog", cpu="1500m", node="full")
    pod = pod_doc(await h.add_pod("p", cpu="1"))
    await h.settle()
    h.server.ledger.reserve(Reservation("default/gang-0", held_on, ResourceVector({"cpu": 500})))
    status, answer = await h.post("filter", args(pod, ["roomy", "full", "ghost"]))
    assert status == 200
    return dict(answer)


async def test_filter_cache_mode_passes_what_kube_scheduler_offers_when_no_room_is_held(
    h: Harness,
) -> None:
    """kube-scheduler offers only nodes its own NodeResourcesFit passed: with no gang's room held
    on any of them (only on a node that is not a candidate), vulcan has nothing to add and
    passes each (even one its cache does not know yet, or one it thinks full: kube-scheduler
    has counted what it bound and assumed)."""
    answer = await filter_with_room_held_on(h, "elsewhere")
    assert answer == {
        "NodeNames": ["roomy", "full", "ghost"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


async def test_filter_cache_mode_fits_and_explains(h: Harness) -> None:
    # A gang member's room held on a candidate: vulcan checks every candidate's fit.
    answer = await filter_with_room_held_on(h, "roomy")
    assert answer["NodeNames"] == ["roomy"]
    assert answer["FailedNodes"] == {
        "full": "Insufficient cpu",
        "ghost": "node unknown to vulcan (not in its cache yet)",
    }
    assert answer["FailedAndUnresolvableNodes"] == {} and answer["Error"] == ""
    # The subset rule: every name returned was in the request.
    assert set(answer["NodeNames"]) <= {"roomy", "full", "ghost"}


async def test_filter_counts_ledger_reservations(h: Harness) -> None:
    from core.resources import ResourceVector
    from extender.ledger import Reservation

    await h.add_node("n1", cpu="4")
    pod = pod_doc(await h.add_pod("p", cpu="2"))
    await h.settle()
    h.server.ledger.reserve(Reservation("default/gang-0", "n1", ResourceVector({"cpu": 3000})))
    _, answer = await h.post("filter", args(pod, ["n1"]))
    assert answer["NodeNames"] == [] and answer["FailedNodes"] == {"n1": "Insufficient cpu"}
    # A pod's own reservation is not held against it.
    h.server.ledger.reserve(Reservation("default/p", "n1", ResourceVector({"cpu": 2000})))
    h.server.ledger.release("default/gang-0")
    _, answer = await h.post("filter", args(pod, ["n1"]))
    assert answer["NodeNames"] == ["n1"]


async def test_prioritize_cache_mode_names_only_the_preferred_node(h: Harness) -> None:
    """Scores are sent relative to the lowest (kube-scheduler adds nothing for an omitted
    node, so the choice is the same): under Volcano's default conf nodeorder's least-requested
    outweighs binpack, and the emptier node is the only one named."""
    await h.add_node("empty", cpu="8")
    await h.add_node("empty-too", cpu="8")
    await h.add_node("busy", cpu="8")
    await h.add_pod("running", cpu="4", node="busy")
    pod = pod_doc(await h.add_pod("p", cpu="1"))
    await h.settle()
    status, answer = await h.post("prioritize", args(pod, ["empty", "busy"]))
    assert status == 200
    assert [e["Host"] for e in answer] == ["empty"]
    assert type(answer[0]["Score"]) is int and 0 < answer[0]["Score"] <= 10
    # Two equally loaded candidates: no preference, nothing named.
    _, answer = await h.post("prioritize", args(pod, ["empty", "empty-too"]))
    assert answer == []


async def test_case_insensitive_keys_are_accepted(h: Harness) -> None:
    await h.add_node("n1")
    pod = pod_doc(await h.add_pod("p"))
    await h.settle()
    status, answer = await h.post("filter", {"pod": pod, "nodes": None, "nodenames": ["n1"]})
    assert status == 200 and answer["NodeNames"] == ["n1"]


async def test_empty_candidate_list(h: Harness) -> None:
    pod = pod_doc(await h.add_pod("p"))
    status, answer = await h.post("filter", args(pod, []))
    assert status == 200 and answer["NodeNames"] == []
    status, answer = await h.post("prioritize", args(pod, []))
    assert status == 200 and answer == []


# ------------------------------------------------------------------------------ preempt


async def test_preempt_cache_mode_passes_candidates_in_meta_form(h: Harness) -> None:
    request = {
        "Pod": {
            "metadata": {"name": "train-b-worker-0", "namespace": "team-b", "uid": "77"},
            "spec": {"priority": 2000, "containers": [{"name": "w", "image": "x"}]},
            "status": {"phase": "Pending"},
        },
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {
            "gpu-node-02": {"Pods": [{"UID": "aa01"}, {"UID": "aa02"}], "NumPDBViolations": 0},
            "gpu-node-11": {"Pods": [{"UID": "bb07"}], "NumPDBViolations": 1},
            "gpu-node-12": {"Pods": [], "NumPDBViolations": 0},
        },
    }
    status, answer = await h.post("preempt", request)
    assert status == 200
    assert answer == {"NodeNameToMetaVictims": request["NodeNameToMetaVictims"]}


async def test_preempt_non_cache_mode_answers_meta_form(h: Harness) -> None:
    request = {
        "Pod": {
            "metadata": {"name": "p", "namespace": "ns", "uid": "9e"},
            "spec": {"priority": 100, "containers": []},
            "status": {},
        },
        "NodeNameToVictims": {
            "cpu-node-03": {
                "Pods": [
                    {
                        "metadata": {"name": "low-1", "namespace": "ns", "uid": "c1"},
                        "spec": {"priority": 0, "nodeName": "cpu-node-03", "containers": []},
                        "status": {"phase": "Running"},
                    }
                ],
                "NumPDBViolations": 0,
            }
        },
        "NodeNameToMetaVictims": None,
    }
    status, answer = await h.post("preempt", request)
    assert status == 200
    assert answer == {
        "NodeNameToMetaVictims": {"cpu-node-03": {"Pods": [{"UID": "c1"}], "NumPDBViolations": 0}}
    }


# --------------------------------------------------------------------------------- bind


def bind_args(pod: dict[str, Any], node: str) -> dict[str, str]:
    meta = pod["metadata"]
    return {
        "PodName": meta["name"],
        "PodNamespace": meta["namespace"],
        "PodUID": meta["uid"],
        "Node": node,
    }


async def test_bind_is_idempotent(h: Harness) -> None:
    await h.add_node("n1")
    pod = await h.add_pod("p")
    status, answer = await h.post("bind", bind_args(pod, "n1"))
    assert (status, answer) == (200, {})
    assert (await h.client.get(PODS, "p", "default"))["spec"]["nodeName"] == "n1"
    status, answer = await h.post("bind", bind_args(pod, "n1"))  # a retry after a timeout
    assert (status, answer) == (200, {})
    status, answer = await h.post("bind", bind_args(pod, "n2"))
    assert status == 200 and answer["Error"].endswith('is already bound to node "n1"')


async def test_bind_of_a_recreated_pod_fails(h: Harness) -> None:
    pod = await h.add_pod("p")
    stale = bind_args(pod, "n1")
    stale["PodUID"] = "00000000-0000-0000-0000-000000000000"
    status, answer = await h.post("bind", stale)
    assert status == 200 and "UID" in answer["Error"]
    assert (await h.client.get(PODS, "p", "default"))["spec"].get("nodeName") is None


async def test_bind_missing_pod(h: Harness) -> None:
    status, answer = await h.post(
        "bind", {"PodName": "ghost", "PodNamespace": "default", "PodUID": "u", "Node": "n1"}
    )
    assert status == 200 and "not found" in answer["Error"]


async def test_hundred_concurrent_binds(h: Harness) -> None:
    pods = [await h.add_pod(f"p{i}") for i in range(50)]
    same = await h.add_pod("same")
    requests = [bind_args(p, f"n{i % 5}") for i, p in enumerate(pods)]
    requests += [bind_args(same, "n-same")] * 50  # one pod, 50 concurrent repeats
    results = await asyncio.gather(*(h.post("bind", r) for r in requests))
    assert all(result == (200, {}) for result in results), results
    for i in range(50):
        assert (await h.client.get(PODS, f"p{i}", "default"))["spec"]["nodeName"] == f"n{i % 5}"
    assert (await h.client.get(PODS, "same", "default"))["spec"]["nodeName"] == "n-same"
    metrics = h.server.metrics.binds
    assert metrics.labels("bound")._value.get() == 51  # one Binding per pod
    # Every answer counted once: the 49 repeats that shared the attempt found it bound.
    assert metrics.labels("already_bound")._value.get() == 49


async def test_abandoned_bind_creates_no_binding() -> None:
    reached = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow_annotations(args: BindingArgs) -> None:
        reached.set()
        try:
            await asyncio.sleep(30)  # stands for work that takes longer than httpTimeout
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with extender_harness(bind_hook=slow_annotations) as h:
        pod = await h.add_pod("p")
        call = asyncio.create_task(h.post("bind", bind_args(pod, "n1"), timeout=30))
        await asyncio.wait_for(reached.wait(), 5)
        call.cancel()  # kube-scheduler's httpTimeout: it closes the connection
        await asyncio.gather(call, return_exceptions=True)
        await asyncio.wait_for(cancelled.wait(), 5)
        assert (await h.client.get(PODS, "p", "default"))["spec"].get("nodeName") is None


# -------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("verb", "raw", "fragment"),
    [
        ("filter", b"{not json", "malformed JSON"),
        ("filter", b"", "empty request body"),
        ("filter", b"[1, 2]", "must be a JSON object"),
        ("filter", b'{"Nodes": null, "NodeNames": ["a"]}', "missing Pod"),
        ("filter", b'{"Pod": {"metadata": {}}, "NodeNames": ["a"]}', "metadata.name"),
        (
            "prioritize",
            b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "a"}',
            "NodeNames must be a list",
        ),
        (
            "filter",
            b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{}]}}',
            "Nodes.items[0].metadata.name",
        ),
        (
            "filter",
            b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",'
            b' "resources": {"requests": {"cpu": "lots"}}}]}}, "NodeNames": []}',
            'invalid quantity "lots"',
        ),
        (
            "preempt",
            b'{"Pod": {"metadata": {"name": "p"}}, "NodeNameToMetaVictims": '
            b'{"n": {"Pods": [{"Name": "x"}]}}}',
            "has no UID",
        ),
        ("bind", b'{"PodName": "p", "PodNamespace": "default", "PodUID": "u"}', "Node is missing"),
        (
            "bind",
            b'{"PodName": 5, "PodNamespace": "default", "PodUID": "u", "Node": "n"}',
            "PodName is missing or not a string",
        ),
    ],
)
async def test_bad_input_gets_400_and_server_keeps_serving(
    h: Harness, verb: str, raw: bytes, fragment: str
) -> None:
    status, answer = await h.post(verb, None, raw=raw)
    assert status == 400
    assert set(answer) == {"Error"} and fragment in answer["Error"]
    status, _ = await h.post(
        "preempt",
        {
            "Pod": {"metadata": {"name": "p"}},
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": None,
        },
    )
    assert status == 200


# ------------------------------------------------------------------- health and metrics


async def test_health_readiness_and_metrics(h: Harness) -> None:
    async with h.http.get(f"{h.url}/healthz") as response:
        assert response.status == 200
    async with h.http.get(f"{h.url}/readyz") as response:
        assert response.status == 200
    await h.add_node("n1")
    pod = pod_doc(await h.add_pod("p"))
    await h.settle()
    await h.post("filter", args(pod, ["n1"]))
    await h.post("filter", None, raw=b"{")
    async with h.http.get(f"{h.url}/metrics") as response:
        text = await response.text()
    assert 'vulcan_extender_request_duration_seconds_bucket{le="0.001",verb="filter"}' in text
    assert 'vulcan_extender_requests_total{code="400",verb="filter"} 1.0' in text
    assert 'vulcan_extender_filter_nodes_total{result="passed"} 1.0' in text
    assert 'vulcan_cache_objects{kind="nodes"} 1.0' in text
    assert 'vulcan_informer_lag_seconds{resource="pods"}' in text
    h.server.is_leader = lambda: False
    async with h.http.get(f"{h.url}/readyz") as response:
        assert response.status == 503
