"""The embedded API server driven over real HTTP by unmodified kubernetes-asyncio."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import (
    ApiClient,
    AppsV1Api,
    CoordinationV1Api,
    CoreV1Api,
    CustomObjectsApi,
    EventsV1Api,
    PolicyV1Api,
    StorageV1Api,
)
from kubernetes_asyncio.client.exceptions import ApiException

from sim.apiserver.server import EmbeddedApiServer

NS = "default"


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
            **spec,
        },
    }


def reason(exc: ApiException) -> str:
    return json.loads(exc.body)["reason"]


async def raw_json(response: Any) -> dict[str, Any]:
    return json.loads(await response.read())


# --------------------------------------------------------------------------- CRUD


async def test_create_fills_server_fields_and_generate_name(api: ApiClient) -> None:
    core = CoreV1Api(api)
    created = await core.create_namespaced_pod(NS, pod("p1"))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.creation_timestamp is not None
    assert created.status.phase == "Pending"
    assert created.status.qos_class == "Burstable"
    assert created.spec.scheduler_name == "default-scheduler"
    generated = await core.create_namespaced_pod(
        NS, {**pod(""), "metadata": {"generateName": "worker-"}}
    )
    assert generated.metadata.name.startswith("worker-") and len(generated.metadata.name) == 12
    fetched = await core.read_namespaced_pod("p1", NS)
    assert fetched.metadata.uid == created.metadata.uid


async def test_already_exists_not_found_and_conflict(api: ApiClient) -> None:
    core = CoreV1Api(api)
    first = await core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_pod(NS, pod("p"))
    assert exc.value.status == 409 and reason(exc.value) == "AlreadyExists"
    with pytest.raises(ApiException) as exc:
        await core.read_namespaced_pod("ghost", NS)
    assert exc.value.status == 404 and reason(exc.value) == "NotFound"
    # An update from a stale copy is refused.
    first.metadata.labels = {"a": "1"}
    await core.replace_namespaced_pod("p", NS, first)
    first.metadata.labels = {"a": "2"}
    with pytest.raises(ApiException) as exc:
        await core.replace_namespaced_pod("p", NS, first)
    assert exc.value.status == 409 and reason(exc.value) == "Conflict"
    with pytest.raises(ApiException) as exc:
        await core.replace_namespaced_pod("ghost", NS, pod("ghost"))
    assert exc.value.status == 404


async def test_unknown_namespace_is_404(api: ApiClient) -> None:
    with pytest.raises(ApiException) as exc:
        await CoreV1Api(api).create_namespaced_pod("nowhere", pod("p"))
    assert exc.value.status == 404


async def test_noop_update_keeps_resource_version(api: ApiClient) -> None:
    core = CoreV1Api(api)
    created = await core.create_namespaced_pod(NS, pod("p"))
    same = await core.replace_namespaced_pod("p", NS, created)
    assert same.metadata.resource_version == created.metadata.resource_version


async def test_label_and_field_selectors(api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod(NS, pod("a", {"app": "web", "tier": "front"}))
    await core.create_namespaced_pod(NS, pod("b", {"app": "web"}, nodeName="n1"))
    await core.create_namespaced_pod(NS, pod("c", {"app": "db"}))

    async def names(**kwargs: Any) -> list[str]:
        result = await core.list_namespaced_pod(NS, **kwargs)
        return sorted(p.metadata.name for p in result.items)

    assert await names(label_selector="app=web") == ["a", "b"]
    assert await names(label_selector="app!=web") == ["c"]
    assert await names(label_selector="app in (db, cache)") == ["c"]
    assert await names(label_selector="app notin (db)") == ["a", "b"]
    assert await names(label_selector="tier") == ["a"]
    assert await names(label_selector="!tier") == ["b", "c"]
    assert await names(label_selector="app=web,tier=front") == ["a"]
    assert await names(field_selector="spec.nodeName=n1") == ["b"]
    assert await names(field_selector="spec.nodeName=") == ["a", "c"]
    assert await names(field_selector="metadata.name=c") == ["c"]
    everything = await core.list_pod_for_all_namespaces(
        field_selector="status.phase!=Succeeded,status.phase!=Failed"
    )
    assert len(everything.items) == 3
    with pytest.raises(ApiException) as exc:
        await core.list_namespaced_pod(NS, field_selector="spec.bogus=1")
    assert exc.value.status == 400
    with pytest.raises(ApiException) as exc:
        await core.list_namespaced_pod(NS, label_selector="app in (x")
    assert exc.value.status == 400


async def test_patch_types(api: ApiClient) -> None:
    core = CoreV1Api(api)
    spec = pod("p", {"keep": "yes", "drop": "me"})
    spec["spec"]["containers"].append({"name": "side", "image": "envoy"})
    await core.create_namespaced_pod(NS, spec)
    merged = await core.patch_namespaced_pod(
        "p",
        NS,
        {"metadata": {"labels": {"drop": None, "new": "1"}}},
        _content_type="application/merge-patch+json",
    )
    assert merged.metadata.labels == {"keep": "yes", "new": "1"}
    patched = await core.patch_namespaced_pod(
        "p",
        NS,
        [
            {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}},
            {"op": "replace", "path": "/metadata/labels/keep", "value": "still"},
        ],
        _content_type="application/json-patch+json",
    )
    assert patched.metadata.annotations == {"x": "y"}
    assert patched.metadata.labels["keep"] == "still"
    strategic = await core.patch_namespaced_pod(
        "p",
        NS,
        {"spec": {"containers": [{"name": "side", "image": "envoy:2"}]}},
        _content_type="application/strategic-merge-patch+json",
    )
    images = {c.name: c.image for c in strategic.spec.containers}
    assert images == {"main": "busybox", "side": "envoy:2"}
    with pytest.raises(ApiException) as exc:
        await core.patch_namespaced_pod(
            "p",
            NS,
            [{"op": "test", "path": "/metadata/labels/keep", "value": "nope"}],
            _content_type="application/json-patch+json",
        )
    assert exc.value.status == 422


async def test_pod_status_patch_like_kube_scheduler(api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod(NS, pod("p"))
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available",
    }
    patched = await core.patch_namespaced_pod_status(
        "p",
        NS,
        {"status": {"conditions": [condition], "nominatedNodeName": "n2"}},
        _content_type="application/strategic-merge-patch+json",
    )
    assert patched.status.phase == "Pending"
    assert patched.status.nominated_node_name == "n2"
    assert [(c.type, c.reason) for c in patched.status.conditions] == [
        ("PodScheduled", "Unschedulable")
    ]
    # The status subresource does not touch spec or labels.
    ignored = await core.patch_namespaced_pod_status(
        "p",
        NS,
        {"metadata": {"labels": {"x": "1"}}, "status": {"phase": "Running"}},
        _content_type="application/merge-patch+json",
    )
    assert ignored.metadata.labels in (None, {}) and ignored.status.phase == "Running"


async def test_custom_resource_status_subresource(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {"weight": 3},
        "status": {"state": "Open"},
    }
    created = await custom.create_cluster_custom_object(
        "scheduling.volcano.sh", "v1beta1", "queues", queue
    )
    assert "status" not in created  # create ignores status when /status exists
    assert created["spec"]["dequeueStrategy"] == "traverse"  # CRD default applied
    created["status"] = {"state": "Closed"}
    created["spec"]["weight"] = 5
    updated = await custom.replace_cluster_custom_object(
        "scheduling.volcano.sh", "v1beta1", "queues", "research", created
    )
    assert updated["spec"]["weight"] == 5 and "status" not in updated
    updated["status"] = {"state": "Open", "allocated": {"cpu": "2"}}
    status = await custom.replace_cluster_custom_object_status(
        "scheduling.volcano.sh", "v1beta1", "queues", "research", updated
    )
    assert status["status"]["allocated"] == {"cpu": "2"}
    with pytest.raises(ApiException) as exc:
        await custom.patch_cluster_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            "research",
            {"spec": {"weight": 2}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert exc.value.status == 415
    merged = await custom.patch_cluster_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        "research",
        {"spec": {"weight": 2}},
        _content_type="application/merge-patch+json",
    )
    assert merged["spec"]["weight"] == 2


async def test_podgroup_keeps_status_on_create(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"minMember": 2},
        "status": {"phase": "Pending"},
    }
    created = await custom.create_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", NS, "podgroups", group
    )
    assert created["status"] == {"phase": "Pending"}  # PodGroup has no status subresource
    assert created["spec"]["queue"] == "default"


async def test_schema_violation_is_422_with_field_path(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "bad"},
        "spec": {"minAvailable": 1, "tasks": [{"name": "w", "replicas": "two", "template": {}}]},
    }
    with pytest.raises(ApiException) as exc:
        await custom.create_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", NS, "jobs", job
        )
    body = json.loads(exc.value.body)
    assert exc.value.status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.tasks[0].replicas"
    assert "must be of type integer" in body["message"]
    # A CEL rule of the CRD: minAvailable above replicas.
    job["spec"]["tasks"][0]["replicas"] = 1
    job["spec"]["tasks"][0]["minAvailable"] = 3
    with pytest.raises(ApiException) as exc:
        await custom.create_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", NS, "jobs", job
        )
    assert exc.value.status == 422
    # kube-apiserver v1.36.2's wording for a failed rule (no value shown).
    assert json.loads(exc.value.body)["message"].endswith(
        "is invalid: spec.tasks[0]: Invalid value: 'minAvailable' is greater than 'replicas' "
        "in task"
    )
    # Unique task names: a rule on the Job's spec.
    job["spec"]["tasks"] = [{"name": "w", "replicas": 1}, {"name": "w", "replicas": 1}]
    with pytest.raises(ApiException) as exc:
        await custom.create_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", NS, "jobs", job
        )
    body = json.loads(exc.value.body)
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec",
            "message": "Invalid value: duplicated task name found",
        }
    ]


async def test_unknown_fields_pruned_or_rejected_when_strict(
    api: ApiClient, apiserver: EmbeddedApiServer
) -> None:
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 1, "wieght": 2},
    }
    url = f"{apiserver.url}/apis/scheduling.volcano.sh/v1beta1/queues"
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "?fieldValidation=Strict", json=body) as response:
            assert response.status == 400
            assert 'unknown field "spec.wieght"' in (await raw_json(response))["message"]
        async with http.post(url, json=body) as response:
            assert response.status == 201
            assert "wieght" not in (await raw_json(response))["spec"]
            assert 'unknown field \\"spec.wieght\\"' in response.headers.get(
                "Warning", ""
            ) or 'unknown field "spec.wieght"' in response.headers.get("Warning", "")


# ------------------------------------------------------------------- pod subresources


async def test_binding_twice_and_uid_precondition(
    api: ApiClient, apiserver: EmbeddedApiServer
) -> None:
    core = CoreV1Api(api)
    created = await core.create_namespaced_pod(NS, pod("p"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": "p",
            "uid": created.metadata.uid,
            "annotations": {"vulcan.sh/slot": "n1#0"},
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    # kubernetes-asyncio 36 raises on a successful binding (spec §4): read the raw answer.
    response = await core.create_namespaced_pod_binding("p", NS, binding, _preload_content=False)
    assert response.status == 201
    bound = await core.read_namespaced_pod("p", NS)
    assert bound.spec.node_name == "n1"
    assert bound.metadata.annotations == {"vulcan.sh/slot": "n1#0"}
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    # With _preload_content=False the client hands back the raw response, errors included.
    again = await core.create_namespaced_pod_binding("p", NS, binding, _preload_content=False)
    assert again.status == 409
    assert 'already assigned to node "n1"' in (await raw_json(again))["message"]
    await core.create_namespaced_pod(NS, pod("q"))
    stale = {**binding, "metadata": {"name": "q", "uid": "not-the-uid"}}
    refused = await core.create_namespaced_pod_binding("q", NS, stale, _preload_content=False)
    assert refused.status == 409
    assert "Precondition failed" in (await raw_json(refused))["message"]
    assert (await core.read_namespaced_pod("q", NS)).spec.node_name is None


async def test_an_evicted_pod_carries_the_disruption_target_condition(api: ApiClient) -> None:
    """As kube-apiserver (PodDisruptionConditions): the eviction is on the pod while it goes."""
    core = CoreV1Api(api)
    await core.create_namespaced_pod(NS, pod("leaving", {"app": "x"}, nodeName="n1"))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "leaving"}}
    response = await core.create_namespaced_pod_eviction(
        "leaving", NS, eviction, _preload_content=False
    )
    assert response.status == 201
    left = await core.read_namespaced_pod("leaving", NS)  # bound: deleted gracefully
    assert left.metadata.deletion_timestamp is not None
    target = [c for c in left.status.conditions or [] if c.type == "DisruptionTarget"]
    assert [(c.status, c.reason) for c in target] == [("True", "EvictionByEvictionAPI")]


async def test_eviction_and_disruption_budget(api: ApiClient) -> None:
    core, policy = CoreV1Api(api), PolicyV1Api(api)
    await core.create_namespaced_pod(NS, pod("free", {"app": "x"}))
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "free", "namespace": NS},
    }
    response = await core.create_namespaced_pod_eviction(
        "free", NS, eviction, _preload_content=False
    )
    assert response.status == 201
    with pytest.raises(ApiException):
        await core.read_namespaced_pod("free", NS)
    # A running, ready pod protected by minAvailable: 1 cannot be evicted.
    await core.create_namespaced_pod(NS, pod("guarded", {"app": "db"}, nodeName="n1"))
    await core.patch_namespaced_pod_status(
        "guarded",
        NS,
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
    )
    await policy.create_namespaced_pod_disruption_budget(
        NS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db-pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
    )
    refused = await core.create_namespaced_pod_eviction(
        "guarded", NS, {**eviction, "metadata": {"name": "guarded"}}, _preload_content=False
    )
    assert refused.status == 429
    assert (await core.read_namespaced_pod("guarded", NS)).metadata.deletion_timestamp is None


async def test_graceful_pod_deletion(api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod(NS, pod("bound", nodeName="n1"))
    await core.delete_namespaced_pod("bound", NS)
    terminating = await core.read_namespaced_pod("bound", NS)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    await core.delete_namespaced_pod("bound", NS, grace_period_seconds=0)
    with pytest.raises(ApiException) as exc:
        await core.read_namespaced_pod("bound", NS)
    assert exc.value.status == 404


# --------------------------------------------------------------- garbage collection


async def _wait_gone(core: CoreV1Api, name: str) -> None:
    """Await the pod's DELETED event (no sleeping)."""
    try:
        await core.read_namespaced_pod(name, NS)
    except ApiException:
        return
    w = watch.Watch()
    async with w.stream(
        core.list_namespaced_pod, NS, field_selector=f"metadata.name={name}", timeout_seconds=5
    ) as stream:
        async for event in stream:
            if event["type"] == "DELETED":
                return
    raise AssertionError(f"{name} was not deleted")


async def test_background_garbage_collection(api: ApiClient) -> None:
    core = CoreV1Api(api)
    owner = await core.create_namespaced_config_map(NS, {"metadata": {"name": "owner"}})
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
        "controller": True,
    }
    for name in ("d1", "d2"):
        body = pod(name)
        body["metadata"]["ownerReferences"] = [ref]
        await core.create_namespaced_pod(NS, body)
    other = await core.create_namespaced_config_map(NS, {"metadata": {"name": "other"}})
    shared = pod("shared")
    shared["metadata"]["ownerReferences"] = [
        ref,
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": other.metadata.uid},
    ]
    await core.create_namespaced_pod(NS, shared)
    await core.delete_namespaced_config_map("owner", NS)
    await _wait_gone(core, "d1")
    await _wait_gone(core, "d2")
    # A dependent with another live owner stays, with only the dangling reference removed.
    survivor = await core.read_namespaced_pod("shared", NS)
    assert [r.name for r in survivor.metadata.owner_references] == ["other"]


async def test_foreground_deletion_waits_for_dependents(api: ApiClient) -> None:
    core, apps = CoreV1Api(api), AppsV1Api(api)
    rs = await apps.create_namespaced_replica_set(
        NS,
        {
            "metadata": {"name": "rs"},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {
                    "metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            },
        },
    )
    child = pod("child", {"a": "b"})
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "rs",
            "uid": rs.metadata.uid,
            "blockOwnerDeletion": True,
        }
    ]
    child["metadata"]["finalizers"] = ["example.com/hold"]
    await core.create_namespaced_pod(NS, child)
    await apps.delete_namespaced_replica_set("rs", NS, propagation_policy="Foreground")
    owner = await apps.read_namespaced_replica_set("rs", NS)
    assert "foregroundDeletion" in owner.metadata.finalizers
    assert owner.metadata.deletion_timestamp is not None
    # The dependent is being deleted but holds a finalizer; releasing it lets both go.
    w = watch.Watch()
    async with w.stream(
        apps.list_namespaced_replica_set,
        NS,
        timeout_seconds=5,
        resource_version=owner.metadata.resource_version,
    ) as stream:
        held = await core.read_namespaced_pod("child", NS)
        assert held.metadata.deletion_timestamp is not None
        await core.patch_namespaced_pod(
            "child",
            NS,
            {"metadata": {"finalizers": None}},
            _content_type="application/merge-patch+json",
        )
        async for event in stream:
            if event["type"] == "DELETED" and event["object"].metadata.name == "rs":
                break
    with pytest.raises(ApiException):
        await core.read_namespaced_pod("child", NS)


async def test_namespace_deletion_removes_contents(api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespace({"metadata": {"name": "team-a"}})
    await core.create_namespaced_pod("team-a", pod("p"))
    await core.delete_namespace("team-a")
    assert (await core.list_namespaced_pod("team-a")).items == []


# --------------------------------------------------------------------------- watch


async def test_watch_events_resume_and_expiry(api: ApiClient) -> None:
    core = CoreV1Api(api)
    listed = await core.list_namespaced_pod(NS)
    start = listed.metadata.resource_version
    await core.create_namespaced_pod(NS, pod("w1"))
    await core.patch_namespaced_pod("w1", NS, {"metadata": {"labels": {"x": "1"}}})
    await core.delete_namespaced_pod("w1", NS)
    seen = []
    w = watch.Watch()
    async with w.stream(
        core.list_namespaced_pod, NS, resource_version=start, timeout_seconds=1
    ) as stream:
        async for event in stream:
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 3:
                break
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    # Push the old version out of the 50-event history: the watch gets 410, the client relists.
    for index in range(60):
        await core.create_namespaced_config_map(NS, {"metadata": {"name": f"c{index}"}})
        await core.create_namespaced_pod(NS, pod(f"x{index}"))
    with pytest.raises(ApiException) as exc:
        async with w.stream(
            core.list_namespaced_pod, NS, resource_version=start, timeout_seconds=1
        ) as stream:
            async for _ in stream:
                pass
    assert exc.value.status == 410
    relisted = await core.list_namespaced_pod(NS)
    assert len(relisted.items) == 60
    async with w.stream(
        core.list_namespaced_pod,
        NS,
        resource_version=relisted.metadata.resource_version,
        timeout_seconds=2,
    ) as stream:
        await core.create_namespaced_pod(NS, pod("after"))
        async for event in stream:
            assert (event["type"], event["object"].metadata.name) == ("ADDED", "after")
            break


async def test_watch_selector_transitions(api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.create_namespaced_pod(NS, pod("p", {"app": "a"}))
    w = watch.Watch()
    types = []
    async with w.stream(
        core.list_namespaced_pod,
        NS,
        label_selector="app=b",
        resource_version=(await core.list_namespaced_pod(NS)).metadata.resource_version,
        timeout_seconds=2,
    ) as stream:
        await core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"app": "b"}}})
        await core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"app": "c"}}})
        async for event in stream:
            types.append(event["type"])
            if len(types) == 2:
                break
    # Entering the selection looks like ADDED, leaving it like DELETED.
    assert types == ["ADDED", "DELETED"]


async def test_watch_timeout_and_bookmarks(apiserver: EmbeddedApiServer) -> None:
    url = (
        f"{apiserver.url}/api/v1/namespaces/default/pods?watch=True&timeoutSeconds=1"
        "&allowWatchBookmarks=true&resourceVersion=1"
    )
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        lines = [json.loads(line) async for line in response.content if line.strip()]
    # The stream ended by itself after timeoutSeconds, with bookmarks meanwhile.
    bookmarks = [e for e in lines if e["type"] == "BOOKMARK"]
    assert bookmarks
    assert bookmarks[0]["object"]["kind"] == "Pod" and bookmarks[0]["object"]["apiVersion"] == "v1"


async def test_watch_list_initial_events(api: ApiClient, apiserver: EmbeddedApiServer) -> None:
    await CoreV1Api(api).create_namespaced_pod(NS, pod("existing"))
    url = (
        f"{apiserver.url}/api/v1/pods?watch=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
    )
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        lines = [json.loads(line) async for line in response.content if line.strip()]
    assert lines[0]["type"] == "ADDED" and lines[0]["object"]["metadata"]["name"] == "existing"
    end = lines[1]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_custom_resource_watch_carries_group_kind(api: ApiClient) -> None:
    custom = CustomObjectsApi(api)
    w = watch.Watch()
    async with w.stream(
        custom.list_namespaced_custom_object,
        "scheduling.volcano.sh",
        "v1beta1",
        NS,
        "podgroups",
        timeout_seconds=2,
    ) as stream:
        await custom.create_namespaced_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            NS,
            "podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "g"},
                "spec": {"minMember": 1},
            },
        )
        async for event in stream:
            assert event["type"] == "ADDED"
            assert event["object"]["kind"] == "PodGroup"
            assert event["object"]["apiVersion"] == "scheduling.volcano.sh/v1beta1"
            break


# ------------------------------------------------------------------------ discovery


async def test_discovery(apiserver: EmbeddedApiServer) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{apiserver.url}/api") as response:
            assert (await raw_json(response))["versions"] == ["v1"]
        async with http.get(f"{apiserver.url}/apis") as response:
            groups = {g["name"] for g in (await raw_json(response))["groups"]}
        assert {
            "batch.volcano.sh",
            "scheduling.volcano.sh",
            "flow.volcano.sh",
            "bus.volcano.sh",
            "coordination.k8s.io",
            "events.k8s.io",
            "apps",
        } <= groups
        async with http.get(f"{apiserver.url}/apis/batch.volcano.sh/v1alpha1") as response:
            resources = {r["name"]: r for r in (await raw_json(response))["resources"]}
        assert resources["jobs"]["shortNames"] == ["vcjob", "vj"]
        assert resources["jobs"]["kind"] == "Job" and resources["jobs"]["namespaced"]
        assert "jobs/status" in resources
        async with http.get(f"{apiserver.url}/api/v1") as response:
            core = {r["name"]: r for r in (await raw_json(response))["resources"]}
        assert {"pods/binding", "pods/eviction", "pods/status"} <= set(core)
        async with http.get(f"{apiserver.url}/version") as response:
            assert (await raw_json(response))["major"] == "1"


KUBE_SCHEDULER_LISTS = [
    "/api/v1/pods",
    "/api/v1/nodes",
    "/api/v1/namespaces",
    "/api/v1/services",
    "/api/v1/replicationcontrollers",
    "/api/v1/persistentvolumes",
    "/api/v1/persistentvolumeclaims",
    "/apis/apps/v1/replicasets",
    "/apis/apps/v1/statefulsets",
    "/apis/policy/v1/poddisruptionbudgets",
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/storage.k8s.io/v1/csidrivers",
    "/apis/storage.k8s.io/v1/csistoragecapacities",
    "/apis/storage.k8s.io/v1/volumeattachments",
    "/apis/resource.k8s.io/v1/resourceclaims",
    "/apis/resource.k8s.io/v1/resourceslices",
    "/apis/resource.k8s.io/v1/deviceclasses",
]


@pytest.mark.parametrize("path", KUBE_SCHEDULER_LISTS)
async def test_everything_kube_scheduler_lists_answers(
    apiserver: EmbeddedApiServer, path: str
) -> None:
    async with aiohttp.ClientSession() as http, http.get(apiserver.url + path) as response:
        assert response.status == 200
        body = await raw_json(response)
    assert body["kind"].endswith("List") and "items" in body
    assert body["metadata"]["resourceVersion"]


async def test_leases_and_events(api: ApiClient) -> None:
    leases = CoordinationV1Api(api)
    lease = await leases.create_namespaced_lease(
        "kube-system",
        {
            "metadata": {"name": "vulcan-extender"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
        },
    )
    lease.spec.holder_identity = "b"
    renewed = await leases.replace_namespaced_lease("vulcan-extender", "kube-system", lease)
    assert renewed.spec.holder_identity == "b"
    events = EventsV1Api(api)
    created = await events.create_namespaced_event(
        NS,
        {
            "metadata": {"name": "e1"},
            "eventTime": "2026-11-21T10:00:00.000000Z",
            "reportingController": "vulcan",
            "reportingInstance": "x",
            "action": "Scheduling",
            "reason": "FailedScheduling",
            "type": "Warning",
            "regarding": {"kind": "Pod", "name": "p", "namespace": NS},
            "note": "no fit",
        },
    )
    assert created.reason == "FailedScheduling"
    core_events = await CoreV1Api(api).create_namespaced_event(
        NS,
        {
            "metadata": {"name": "e2"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Scheduled",
            "message": "ok",
            "type": "Normal",
        },
    )
    assert core_events.reason == "Scheduled"
    storage = await StorageV1Api(api).list_storage_class()
    assert storage.items == []


async def test_concurrent_watchers_all_receive(api: ApiClient) -> None:
    core = CoreV1Api(api)
    rv = (await core.list_namespaced_pod(NS)).metadata.resource_version

    async def collect() -> list[str]:
        names: list[str] = []
        w = watch.Watch()
        async with w.stream(
            core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=5
        ) as stream:
            async for event in stream:
                names.append(event["object"].metadata.name)
                if len(names) == 5:
                    break
        return names

    tasks = [asyncio.create_task(collect()) for _ in range(5)]
    for index in range(5):
        await core.create_namespaced_pod(NS, pod(f"fan{index}"))
    results = await asyncio.gather(*tasks)
    assert all(r == [f"fan{i}" for i in range(5)] for r in results)


async def test_big_list_is_streamed_whole(api: ApiClient, apiserver: EmbeddedApiServer) -> None:
    configmaps = apiserver.store.registry.get("", "v1", "configmaps")
    assert configmaps is not None
    for index in range(4321):  # more than one streaming chunk, not a multiple of it
        apiserver.store.create(
            configmaps, NS, {"metadata": {"name": f"cm{index}"}, "data": {"i": str(index)}}
        )
    listed = await CoreV1Api(api).list_namespaced_config_map(NS)
    assert [c.data["i"] for c in listed.items] == [str(i) for i in range(4321)]


async def test_paginated_list(api: ApiClient, apiserver: EmbeddedApiServer) -> None:
    core = CoreV1Api(api)
    for index in range(23):
        await core.create_namespaced_config_map(NS, {"metadata": {"name": f"cm{index:02d}"}})
    seen: list[str] = []
    token = None
    versions = set()
    while True:
        page = await core.list_namespaced_config_map(NS, limit=5, _continue=token)
        assert len(page.items) <= 5
        seen += [c.metadata.name for c in page.items]
        versions.add(page.metadata.resource_version)
        token = page.metadata._continue
        if not token:
            break
    assert seen == [f"cm{index:02d}" for index in range(23)]
    assert len(versions) == 1  # every page reports the first page's resourceVersion
    with pytest.raises(ApiException) as exc:
        await core.list_namespaced_config_map(NS, limit=5, _continue="garbage!")
    assert exc.value.status == 400
