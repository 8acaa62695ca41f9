"""Server-side apply and managedFields of the embedded API server over real HTTP: the requests
`kubectl apply --server-side` and client-go send, and the answers kube-apiserver gives them
(status codes, Status messages, managedFields on every write)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from sim.apiserver.server import EmbeddedApiServer

APPLY = "application/apply-patch+yaml"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"

DEPLOYMENT_YAML = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: front}
  annotations: {released: 2024-01-01T00:00:00Z}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        image: nginx:1.25
        ports: [{containerPort: 80}]
"""


class Http:
    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        agent: str = "kubectl/v1.32.4 (linux/amd64) kubernetes/abc",
    ) -> tuple[int, dict[str, Any]]:
        data = body if isinstance(body, str | bytes) or body is None else json.dumps(body)
        headers = {"Content-Type": content_type, "User-Agent": agent}
        async with self.session.request(
            method, self.base + path, data=data, headers=headers
        ) as response:
            return response.status, json.loads(await response.read())

    async def apply(
        self, path: str, body: Any, query: str = "fieldManager=kubectl"
    ) -> tuple[int, dict[str, Any]]:
        return await self("PATCH", f"{path}?{query}", body, APPLY)


@pytest.fixture
async def http() -> Any:
    async with EmbeddedApiServer() as server, aiohttp.ClientSession() as session:
        yield Http(session, server.url)


def managers(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (e["manager"], e["operation"], e.get("subresource", ""))
        for e in obj["metadata"].get("managedFields") or []
    ]


async def test_apply_without_field_manager_is_invalid(http: Http) -> None:
    code, status = await http.apply(f"{DEPLOYMENTS}/web", DEPLOYMENT_YAML, query="")
    assert code == 422
    assert status["reason"] == "Invalid"
    assert status["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required '
        "for apply patch"
    )
    code, status = await http(
        "PATCH", f"{DEPLOYMENTS}/web?force=true", {}, "application/merge-patch+json"
    )
    assert code == 422
    assert "force: Forbidden: may not be specified for non-apply patch" in status["message"]


async def test_apply_creates_then_updates_from_yaml(http: Http) -> None:
    code, created = await http.apply(f"{DEPLOYMENTS}/web", DEPLOYMENT_YAML)
    assert code == 201
    assert created["metadata"]["uid"] and created["spec"]["replicas"] == 2
    # YAML timestamps stay strings, as sigs.k8s.io/yaml reads them.
    assert created["metadata"]["annotations"] == {"released": "2024-01-01T00:00:00Z"}
    assert managers(created) == [("kubectl", "Apply", "")]
    code, again = await http.apply(
        f"{DEPLOYMENTS}/web", DEPLOYMENT_YAML.replace("replicas: 2", "replicas: 4")
    )
    assert code == 200 and again["spec"]["replicas"] == 4
    assert again["metadata"]["uid"] == created["metadata"]["uid"]
    code, got = await http("GET", f"{DEPLOYMENTS}/web")
    assert got["metadata"]["managedFields"] == again["metadata"]["managedFields"]


async def test_apply_checks_the_object_type(http: Http) -> None:
    body = DEPLOYMENT_YAML.replace("kind: Deployment", "kind: StatefulSet")
    code, status = await http.apply(f"{DEPLOYMENTS}/web", body)
    assert (code, status["message"]) == (400, "invalid object type: apps/v1, Kind=StatefulSet")
    body = DEPLOYMENT_YAML.replace("name: web", "name: other")
    code, status = await http.apply(f"{DEPLOYMENTS}/web", body)
    assert code == 400
    assert status["message"] == (
        "the name of the object (other) does not match the name on the URL (web)"
    )


async def test_apply_of_an_item_without_its_key_fails_like_kube_apiserver(http: Http) -> None:
    body = DEPLOYMENT_YAML.replace("- name: c\n        image", "- image")
    code, status = await http.apply(f"{DEPLOYMENTS}/web", body)
    assert code == 500
    assert status["message"].startswith("failed to create typed patch object (default/web; ")
    assert 'omits key field "name"' in status["message"]


async def test_dry_run_apply_stores_nothing(http: Http) -> None:
    code, body = await http.apply(
        f"{DEPLOYMENTS}/web", DEPLOYMENT_YAML, "fieldManager=kubectl&dryRun=All"
    )
    assert code == 201 and body["metadata"]["name"] == "web"
    code, _ = await http("GET", f"{DEPLOYMENTS}/web")
    assert code == 404
    await http.apply(f"{DEPLOYMENTS}/web", DEPLOYMENT_YAML)
    code, body = await http.apply(
        f"{DEPLOYMENTS}/web",
        DEPLOYMENT_YAML.replace("replicas: 2", "replicas: 9"),
        "fieldManager=kubectl&dryRun=All",
    )
    assert code == 200 and body["spec"]["replicas"] == 9
    _, stored = await http("GET", f"{DEPLOYMENTS}/web")
    assert stored["spec"]["replicas"] == 2


async def test_scale_then_apply_conflicts_until_forced(http: Http) -> None:
    await http.apply(f"{DEPLOYMENTS}/web", DEPLOYMENT_YAML)
    code, _ = await http(
        "PATCH",
        f"{DEPLOYMENTS}/web/scale",
        {"spec": {"replicas": 5}},
        "application/merge-patch+json",
    )
    assert code == 200
    _, scaled = await http("GET", f"{DEPLOYMENTS}/web")
    assert ("kubectl", "Update", "scale") in managers(scaled)
    code, status = await http.apply(f"{DEPLOYMENTS}/web", DEPLOYMENT_YAML)
    assert code == 409
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using '
        "apps/v1: .spec.replicas"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl" with subresource "scale" using apps/v1',
            "field": ".spec.replicas",
        }
    ]
    code, forced = await http.apply(
        f"{DEPLOYMENTS}/web", DEPLOYMENT_YAML, "fieldManager=kubectl&force=true"
    )
    assert code == 200 and forced["spec"]["replicas"] == 2
    assert managers(forced) == [("kubectl", "Apply", "")]  # the scale entry had nothing left


async def test_every_write_records_its_manager(http: Http) -> None:
    # A create names its manager by fieldManager, else by the User-Agent's prefix.
    code, created = await http(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        {"metadata": {"name": "cm"}, "data": {"a": "1"}},
        agent="curl/8.5.0",
    )
    assert code == 201 and managers(created) == [("curl", "Update", "")]
    assert created["metadata"]["managedFields"][0]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}
    code, patched = await http(
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm?fieldManager=editor",
        {"data": {"a": "2"}},
        "application/strategic-merge-patch+json",
    )
    assert managers(patched) == [("curl", "Update", ""), ("editor", "Update", "")]
    by_manager = {e["manager"]: e["fieldsV1"] for e in patched["metadata"]["managedFields"]}
    # The creator keeps the map it added; the editor took the entry it changed.
    assert by_manager == {"curl": {"f:data": {}}, "editor": {"f:data": {"f:a": {}}}}
    # A status write is an entry of the status subresource.
    await http.apply(
        f"{QUEUES}/q", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}
    )
    code, queue = await http(
        "PATCH",
        f"{QUEUES}/q/status?fieldManager=vc-controller",
        {"status": {"state": "Open"}},
        "application/merge-patch+json",
    )
    assert code == 200
    assert ("vc-controller", "Update", "status") in managers(queue)


async def test_apply_to_a_custom_resource_and_its_status(http: Http) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {"weight": 3, "reclaimable": True},
        "status": {"state": "Closed"},
    }
    code, created = await http.apply(f"{QUEUES}/research", queue)
    assert code == 201
    assert created["spec"]["weight"] == 3 and "status" not in created  # status: its own API
    [entry] = created["metadata"]["managedFields"]
    assert entry["fieldsV1"] == {"f:spec": {"f:reclaimable": {}, "f:weight": {}}}
    code, with_status = await http.apply(
        f"{QUEUES}/research/status", queue, "fieldManager=vc-controller"
    )
    assert code == 200 and with_status["status"]["state"] == "Closed"
    assert ("vc-controller", "Apply", "status") in managers(with_status)
