"""Admission webhooks in the embedded API server: configuration validation and defaults, rule
matching, the AdmissionReview sent and the checks of the answer, and the whole round trip over
HTTPS to an in-process webhook (patch applied, denial, selectors, failurePolicy, dryRun)."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio

from core.api.scheduling import Queue
from core.api.validation import ClusterView, validate_queue_delete
from core.certs import write_serving_certs
from extender.webhook_configs import deploy_manifest, webhook_configurations
from extender.webhooks import defaults_patch
from sim.apiserver.admission import WebhookAdmission
from sim.apiserver.server import EmbeddedApiServer, build_store
from sim.apiserver.webhook_call import Attributes, CallError, review, verify
from sim.apiserver.webhook_call import rejection as to_status
from sim.apiserver.webhook_config import Rule, compile_configuration, set_defaults, validate
from tests.fake_webhook import FakeWebhook
from tests.helpers import REPO

VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def hook(
    name: str = "check.example.com",
    url: str = "https://127.0.0.1:9443/check",
    resources: tuple[str, ...] = ("configmaps",),
    operations: tuple[str, ...] = ("CREATE",),
    **extra: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": url},
        "rules": [
            {
                "operations": list(operations),
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": list(resources),
            }
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **extra,
    }


def config(kind: str, *hooks: dict[str, Any], name: str = "c") -> dict[str, Any]:
    obj = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": list(hooks),
    }
    set_defaults(obj)
    return obj


def messages(obj: dict[str, Any]) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in validate(obj)]


# ------------------------------------------------------------------- configuration objects


def test_defaults_are_kubernetes_v1_defaults() -> None:
    obj = config("MutatingWebhookConfiguration", hook())
    got = obj["webhooks"][0]
    assert got["failurePolicy"] == "Fail"
    assert got["matchPolicy"] == "Equivalent"
    assert got["timeoutSeconds"] == 10
    assert got["namespaceSelector"] == {} and got["objectSelector"] == {}
    assert got["reinvocationPolicy"] == "Never"
    assert got["rules"][0]["scope"] == "*"
    assert validate(obj) == []


def test_invalid_configurations_get_kubernetes_messages() -> None:
    bad = hook(
        name="short.name",
        url="http://127.0.0.1/x?a=1",
        operations=("GET",),
        timeoutSeconds=31,
    )
    del bad["sideEffects"]
    got = messages(config("ValidatingWebhookConfiguration", bad))
    assert got == [
        'webhooks[0].name: Invalid value: "short.name": should be a domain with at least three '
        "segments separated by dots",
        'webhooks[0].rules[0].operations[0]: Unsupported value: "GET": supported values: "*", '
        '"CONNECT", "CREATE", "DELETE", "UPDATE"',
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and "
        "30 seconds",
        "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL "
        "scheme; desired format: https://host[/path]",
        'webhooks[0].clientConfig.url: Invalid value: "a=1": query parameters are not permitted '
        "in the URL",
    ]


def test_service_client_config_is_refused_with_the_reason() -> None:
    with_service = hook()
    with_service["clientConfig"] = {"service": {"namespace": "x", "name": "y"}}
    (message,) = messages(config("ValidatingWebhookConfiguration", with_service))
    assert message.startswith("webhooks[0].clientConfig.service: Forbidden: the embedded API ")
    assert "use clientConfig.url" in message
    neither = hook()
    neither["clientConfig"] = {}
    assert messages(config("ValidatingWebhookConfiguration", neither)) == [
        "webhooks[0].clientConfig: Required value: exactly one of url or service is required"
    ]


def test_rule_resource_and_version_checks() -> None:
    resources = hook(resources=("*", "pods"))
    duplicate = hook()
    versions = hook()
    versions["admissionReviewVersions"] = ["v2"]
    got = messages(config("ValidatingWebhookConfiguration", resources, duplicate, versions))
    assert got == [
        'webhooks[0].rules[0].resources: Invalid value: []string{"*", "pods"}: if \'*\' is '
        "present, must not specify other resources without subresources",
        'webhooks[1].name: Duplicate value: "check.example.com"',
        'webhooks[2].admissionReviewVersions: Invalid value: []string{"v2"}: must include at '
        "least one of v1, v1beta1",
        'webhooks[2].name: Duplicate value: "check.example.com"',
    ]


def test_rules_match_like_kubernetes() -> None:
    def rule(resources: tuple[str, ...], scope: str = "*", ops: tuple[str, ...] = ("*",)) -> Rule:
        return Rule(
            frozenset(ops),
            frozenset({"*"}),
            frozenset({"*"}),
            tuple((r.partition("/")[0], r.partition("/")[2]) for r in resources),
            scope,
        )

    def matches(r: Rule, plural: str, sub: str = "", op: str = "CREATE", ns: bool = True) -> bool:
        return r.matches("g", "v1", plural, sub, op, ns)

    assert matches(rule(("*",)), "pods") and not matches(rule(("*",)), "pods", "status")
    assert matches(rule(("*/*",)), "pods", "status") and matches(rule(("*/*",)), "pods")
    assert matches(rule(("pods/status",)), "pods", "status")
    assert not matches(rule(("pods/status",)), "pods")
    assert matches(rule(("*/status",)), "queues", "status")
    assert not matches(rule(("pods",), scope="Cluster"), "pods")
    assert matches(rule(("queues",), scope="Cluster"), "queues", ns=False)
    assert not matches(rule(("pods",), ops=("DELETE",)), "pods")
    assert matches(rule(("pods",), ops=("DELETE",)), "pods", op="DELETE")


def test_matching_is_precomputed_and_follows_configuration_changes() -> None:
    store = build_store()
    admission = WebhookAdmission(store)
    pods = store.registry.get("", "v1", "pods")
    configmaps = store.registry.get("", "v1", "configmaps")
    validating = store.registry.get(
        "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"
    )
    assert pods is not None and configmaps is not None and validating is not None
    assert admission.match(pods, None, "CREATE") is None  # no configuration at all
    store.create(validating, "", config("ValidatingWebhookConfiguration", hook()))
    matched = admission.match(configmaps, None, "CREATE")
    assert matched is not None and [h.name for h in matched.validating] == ["check.example.com"]
    assert admission.match(pods, None, "CREATE") is None
    assert admission.match(configmaps, None, "DELETE") is None
    # Webhook configurations are never subject to webhooks.
    everything = hook(name="all.example.com", resources=("*",), operations=("*",))
    everything["rules"][0]["apiGroups"] = ["*"]
    store.create(validating, "", config("ValidatingWebhookConfiguration", everything, name="all"))
    assert admission.match(validating, None, "CREATE") is None
    assert admission.match(pods, None, "CREATE") is not None
    store.delete(validating, "", "all")
    assert admission.match(pods, None, "CREATE") is None


# ------------------------------------------------------------------------ the review itself


def _compiled(**extra: Any) -> Any:
    obj = config("MutatingWebhookConfiguration", hook(**extra))
    obj["metadata"]["name"] = "c"
    return compile_configuration(obj)[0]


def test_review_carries_what_kubernetes_sends() -> None:
    attrs = Attributes(
        group="scheduling.volcano.sh",
        version="v1beta1",
        kind="Queue",
        resource="queues",
        subresource="",
        name="q",
        namespace="",
        operation="DELETE",
        obj=None,
        old={"metadata": {"name": "q"}},
        dry_run=True,
    )
    uid, body = review(_compiled(), attrs)
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    request = body["request"]
    assert request["uid"] == uid
    assert request["kind"] == {
        "group": "scheduling.volcano.sh",
        "version": "v1beta1",
        "kind": "Queue",
    }
    assert request["resource"]["resource"] == "queues"
    assert request["operation"] == "DELETE" and request["name"] == "q"
    assert "namespace" not in request and "subResource" not in request
    assert request["object"] is None and request["oldObject"] == {"metadata": {"name": "q"}}
    assert request["dryRun"] is True
    assert request["options"]["kind"] == "DeleteOptions"


def test_answers_are_checked() -> None:
    mutating = _compiled()

    def answer(**response: Any) -> dict[str, Any]:
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }

    with pytest.raises(CallError, match=re.escape('expected response.uid="u", got "other"')):
        verify(mutating, "u", answer(uid="other", allowed=True))
    with pytest.raises(CallError, match=re.escape("response.patch but not response.patchType")):
        verify(mutating, "u", answer(uid="u", allowed=True, patch="W10="))
    with pytest.raises(CallError, match=re.escape("webhook response was absent")):
        verify(mutating, "u", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})
    with pytest.raises(
        CallError, match=re.escape("admission.k8s.io/v1, Kind=AdmissionReview, got")
    ):
        verify(mutating, "u", {**answer(uid="u", allowed=True), "apiVersion": "v1"})
    validating = compile_configuration(config("ValidatingWebhookConfiguration", hook()))[0]
    with pytest.raises(
        CallError, match=re.escape("validating webhook may not return response.patch")
    ):
        verify(validating, "u", answer(uid="u", allowed=True, patch="W10=", patchType="JSONPatch"))
    ok = verify(mutating, "u", answer(uid="u", allowed=True, patch="W10=", patchType="JSONPatch"))
    assert ok.allowed and ok.patch == b"[]"


def test_denials_are_framed_as_kube_apiserver_frames_them() -> None:
    attrs = Attributes(
        "scheduling.volcano.sh", "v1beta1", "Queue", "queues", "", "default", "", "DELETE", None, {}
    )
    hook_ = _compiled()
    denied = to_status(hook_, attrs, {"message": "`default` queue can not be deleted"})
    assert denied.code == 403 and denied.reason == "Forbidden"
    assert denied.message == (
        'queues.scheduling.volcano.sh "default" is forbidden: admission webhook '
        '"check.example.com" denied the request: `default` queue can not be deleted'
    )
    assert denied.details == {"name": "default", "group": "scheduling.volcano.sh", "kind": "queues"}
    assert to_status(hook_, attrs, None).message.endswith("denied the request without explanation")
    coded = to_status(hook_, attrs, {"code": 422, "reason": "Invalid", "message": "no"})
    assert coded.code == 422 and coded.reason == "Invalid"
    internal = to_status(hook_, attrs, {"code": 500, "message": "boom"})
    assert internal.message == (
        'Internal error occurred: admission webhook "check.example.com" denied the request: boom'
    )


# ------------------------------------------------------------- Volcano's side: patch and rules


def test_defaults_patch_touches_only_what_the_defaults_changed() -> None:
    raw = {
        "metadata": {"name": "q", "annotations": {"volcano.sh/hierarchy": "a/b"}},
        "spec": {"weight": 0, "x-unknown": 1},
    }
    before = {"metadata": raw["metadata"], "spec": {"weight": 0}}
    after = {
        "metadata": {"name": "q", "annotations": {"volcano.sh/hierarchy": "root/a/b"}},
        "spec": {"weight": 1, "reclaimable": True},
    }
    ops = defaults_patch(raw, before, after)
    assert ops == [
        {
            "op": "replace",
            "path": "/metadata/annotations/volcano.sh~1hierarchy",
            "value": "root/a/b",
        },
        {"op": "replace", "path": "/spec/weight", "value": 1},
        {"op": "add", "path": "/spec/reclaimable", "value": True},
    ]
    import jsonpatch

    patched = jsonpatch.apply_patch(raw, ops)
    assert patched["spec"] == {"weight": 1, "x-unknown": 1, "reclaimable": True}


def test_a_queue_with_podgroups_cannot_be_deleted() -> None:
    queue = Queue.model_validate({"metadata": {"name": "research"}})
    view = ClusterView(queues={}, podgroups_by_queue={"research": ["team-b/eval", "team-a/train"]})
    (error,) = validate_queue_delete(queue, view)
    assert error.reason == (
        "queue research can not be deleted because it has 2 PodGroups: team-a/train, team-b/eval"
    )
    one = ClusterView(podgroups_by_queue={"research": ["a/x"]})
    assert validate_queue_delete(queue, one)[0].reason.endswith("has 1 PodGroup: a/x")
    assert validate_queue_delete(queue, ClusterView(podgroups_by_queue={})) == []


def test_deploy_manifest_is_generated_from_the_code() -> None:
    path = REPO / "manifests" / "deploy" / "webhooks.yaml"
    assert path.read_text() == deploy_manifest(), (
        "manifests/deploy/webhooks.yaml is stale: regenerate it with "
        "python -c 'from extender.webhook_configs import deploy_manifest; "
        'print(deploy_manifest(), end="")\' > manifests/deploy/webhooks.yaml'
    )


def test_registered_configurations_are_valid() -> None:
    for obj in webhook_configurations(url="https://127.0.0.1:1", ca_bundle=""):
        set_defaults(obj)
        assert validate(obj) == []


# ----------------------------------------------------------------- the round trip over HTTPS


@pytest_asyncio.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[EmbeddedApiServer, FakeWebhook]]:
    fake = FakeWebhook(tmp_path)
    await fake.start()
    async with EmbeddedApiServer() as server:
        yield server, fake
    await fake.stop()


async def call(
    server: EmbeddedApiServer, method: str, path: str, body: Any = None, content_type: str = ""
) -> tuple[int, dict[str, Any], str]:
    headers = {"Content-Type": content_type} if content_type else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            server.url + path,
            data=orjson.dumps(body) if body is not None else None,
            headers=headers,
        ) as response,
    ):
        return response.status, await response.json(), response.headers.get("Warning", "")


async def register(
    server: EmbeddedApiServer, fake: FakeWebhook, kind: str, *hooks: dict[str, Any]
) -> None:
    for h in hooks:
        h["clientConfig"] = {"url": fake.url + h["clientConfig"]["url"], "caBundle": fake.ca_bundle}
    path = VALIDATING if kind == "Validating" else MUTATING
    status, body, _ = await call(
        server, "POST", path, {"metadata": {"name": kind.lower()}, "webhooks": list(hooks)}
    )
    assert status == 201, body


async def test_mutating_patch_then_validating_sees_the_stored_object(cluster: Any) -> None:
    server, fake = cluster

    def respond(req: dict[str, Any]) -> dict[str, Any]:
        if req["object"]["metadata"].get("labels", {}).get("mutated") != "yes":
            patch = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]
            return {
                "allowed": True,
                "patchType": "JSONPatch",
                "patch": base64.b64encode(orjson.dumps(patch)).decode(),
                "warnings": ["mutated it"],
            }
        return {"allowed": True}

    fake.respond = respond
    await register(server, fake, "Mutating", hook(name="m.example.com", url="/m"))
    await register(server, fake, "Validating", hook(name="v.example.com", url="/v"))
    status, body, warning = await call(
        server, "POST", CONFIGMAPS, {"metadata": {"generateName": "cm-"}}
    )
    assert status == 201 and body["metadata"]["labels"] == {"mutated": "yes"}
    assert warning == '299 - "mutated it"'
    mutate, check = fake.requests
    assert mutate["path"] == "/m" and check["path"] == "/v"
    assert mutate["query"] == {"timeout": "10s"}
    # The mutating webhook sees no name or uid yet (generateName is resolved afterwards), the
    # validating one sees the object as it will be stored.
    assert "name" not in mutate and "uid" not in mutate["object"]["metadata"]
    assert check["name"] == body["metadata"]["name"] and check["object"]["metadata"]["uid"]
    assert check["userInfo"]["username"] == "system:admin"


async def test_denial_update_and_delete_reviews(cluster: Any) -> None:
    server, fake = cluster

    def respond(req: dict[str, Any]) -> dict[str, Any]:
        obj = req["object"] or req["oldObject"]
        if (obj.get("data") or {}).get("forbidden"):
            return {"allowed": False, "status": {"message": "forbidden data"}}
        return {"allowed": True}

    fake.respond = respond
    await register(
        server, fake, "Validating", hook(url="/v", operations=("CREATE", "UPDATE", "DELETE"))
    )
    status, body, _ = await call(server, "POST", CONFIGMAPS, {"metadata": {"name": "a"}})
    assert status == 201
    patch = {"data": {"forbidden": "1"}}
    status, body, _ = await call(
        server, "PATCH", f"{CONFIGMAPS}/a", patch, "application/merge-patch+json"
    )
    assert status == 403
    assert body["message"] == (
        'configmaps "a" is forbidden: admission webhook "check.example.com" denied the '
        "request: forbidden data"
    )
    update = fake.requests[-1]
    assert update["operation"] == "UPDATE" and update["oldObject"]["metadata"]["name"] == "a"
    status, _, _ = await call(server, "DELETE", f"{CONFIGMAPS}/a")
    assert status == 200
    delete = fake.requests[-1]
    assert delete["operation"] == "DELETE" and delete["object"] is None
    assert delete["oldObject"]["metadata"]["name"] == "a"


async def test_selectors_pick_the_requests_a_webhook_sees(cluster: Any) -> None:
    server, fake = cluster
    fake.respond = lambda req: {"allowed": False, "status": {"message": "no"}}
    await register(
        server,
        fake,
        "Validating",
        hook(
            url="/v",
            namespaceSelector={
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": ["kube-system"],
                    }
                ]
            },
            objectSelector={"matchLabels": {"checked": "yes"}},
        ),
    )
    status, _, _ = await call(server, "POST", CONFIGMAPS, {"metadata": {"name": "plain"}})
    assert status == 201  # objectSelector: not labelled
    labelled = {"metadata": {"name": "x", "labels": {"checked": "yes"}}}
    status, _, _ = await call(server, "POST", "/api/v1/namespaces/kube-system/configmaps", labelled)
    assert status == 201  # namespaceSelector: kube-system is left alone
    status, _, _ = await call(server, "POST", CONFIGMAPS, labelled)
    assert status == 403
    assert len(fake.requests) == 1


async def test_failure_policy_when_the_webhook_is_down(cluster: Any) -> None:
    server, fake = cluster
    await register(server, fake, "Validating", hook(url="/v"))
    await fake.stop()
    status, body, _ = await call(server, "POST", CONFIGMAPS, {"metadata": {"name": "a"}})
    assert status == 500 and body["reason"] == "InternalError"
    port = fake.url.rsplit(":", 1)[1]
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "check.example.com": failed to call '
        f'webhook: Post "{fake.url}/v?timeout=10s": dial tcp 127.0.0.1:{port}: connect: '
        "connection refused"
    )
    patch = [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]
    status, _, _ = await call(
        server, "PATCH", f"{VALIDATING}/validating", patch, "application/json-patch+json"
    )
    assert status == 200
    status, _, _ = await call(server, "POST", CONFIGMAPS, {"metadata": {"name": "a"}})
    assert status == 201


async def test_timeout_and_untrusted_certificates_are_call_errors(cluster: Any) -> None:
    server, fake = cluster

    async def slow(req: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(3)
        return {"allowed": True}

    fake.respond = slow
    await register(server, fake, "Validating", hook(url="/v", timeoutSeconds=1))
    status, body, _ = await call(server, "POST", CONFIGMAPS, {"metadata": {"name": "a"}})
    assert status == 500 and body["message"].endswith("context deadline exceeded")
    # Another CA than the one that signed the server's certificate.
    other = write_serving_certs(Path(fake.certs.cert_file).parent / "other")
    patch = [
        {
            "op": "replace",
            "path": "/webhooks/0/clientConfig/caBundle",
            "value": base64.b64encode(other.ca_pem).decode(),
        },
        {"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 10},
    ]
    status, _, _ = await call(
        server, "PATCH", f"{VALIDATING}/validating", patch, "application/json-patch+json"
    )
    assert status == 200
    status, body, _ = await call(server, "POST", CONFIGMAPS, {"metadata": {"name": "a"}})
    assert status == 500 and "tls: failed to verify certificate: x509:" in body["message"]


async def test_dry_run_is_reviewed_but_not_stored(cluster: Any) -> None:
    server, fake = cluster
    await register(server, fake, "Validating", hook(url="/v"))
    status, body, _ = await call(
        server, "POST", CONFIGMAPS + "?dryRun=All", {"metadata": {"name": "a"}}
    )
    assert status == 201 and body["metadata"]["uid"] and "resourceVersion" not in body["metadata"]
    assert fake.requests[-1]["dryRun"] is True
    status, _, _ = await call(server, "GET", f"{CONFIGMAPS}/a")
    assert status == 404
    status, body, _ = await call(
        server, "POST", CONFIGMAPS + "?dryRun=Some", {"metadata": {"name": "a"}}
    )
    assert status == 422 and 'supported values: "All"' in body["message"]


async def test_a_patch_that_does_not_apply_is_an_internal_error(cluster: Any) -> None:
    server, fake = cluster
    bad = [{"op": "replace", "path": "/nothing/here", "value": 1}]
    fake.respond = lambda req: {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(orjson.dumps(bad)).decode(),
    }
    await register(server, fake, "Mutating", hook(url="/m", failurePolicy="Ignore"))
    status, body, _ = await call(server, "POST", CONFIGMAPS, {"metadata": {"name": "a"}})
    assert status == 500 and body["message"].startswith("Internal error occurred: ")


async def test_an_update_racing_the_webhook_is_redone(cluster: Any) -> None:
    server, fake = cluster
    gate = asyncio.Event()

    async def respond(req: dict[str, Any]) -> dict[str, Any]:
        if req["operation"] == "UPDATE" and not gate.is_set():
            gate.set()
            # Someone else writes the object while this webhook thinks.
            status, _, _ = await call(
                server,
                "PATCH",
                f"{CONFIGMAPS}/a",
                {"data": {"other": "1"}},
                "application/merge-patch+json",
            )
            assert status == 200
        return {"allowed": True}

    fake.respond = respond
    await call(server, "POST", CONFIGMAPS, {"metadata": {"name": "a"}})
    await register(server, fake, "Validating", hook(url="/v", operations=("UPDATE",)))
    status, body, _ = await call(
        server, "PATCH", f"{CONFIGMAPS}/a", {"data": {"mine": "1"}}, "application/merge-patch+json"
    )
    assert status == 200 and body["data"] == {"other": "1", "mine": "1"}
