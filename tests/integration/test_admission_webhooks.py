"""vulcan's admission webhooks for real: `vulcan sim apiserver` calls a `vulcan extender` process
over HTTPS (certificates from core.certs, configurations from extender.webhook_configs), and
clients see what they would see on a cluster with Volcano's admission installed."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.certs import ServingCerts, write_serving_certs
from extender.webhook_configs import webhook_configurations
from tests.helpers import announced_url, sim_apiserver_process, stop_process, vulcan_process

KUBECTL = shutil.which("kubectl")
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
WEBHOOK_LINE = "vulcan admission webhooks listening on "


HYPERNODES = "/apis/topology.volcano.sh/v1alpha1/hypernodes"


def podgroups(namespace: str) -> str:
    return f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups"


@dataclass
class Cluster:
    api: str
    kubeconfig: Path
    certs: ServingCerts
    webhooks: str
    tmp: Path

    def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.api + path, data=data, method=method)
        request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def register(self, webhook_url: str, name: str = "vulcan-admission", **changes: Any) -> None:
        ca = base64.b64encode(self.certs.ca_pem).decode()
        for config in webhook_configurations(url=webhook_url, ca_bundle=ca):
            config["metadata"]["name"] = name
            for hook in config["webhooks"]:
                hook.update(changes)
            plural = config["kind"].lower() + "s"
            status, body = self.call(
                "POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", config
            )
            assert status == 201, body


def start_extender(
    kubeconfig: Path, certs: ServingCerts, log: Path
) -> tuple[subprocess.Popen[str], str]:
    with log.open("w") as handle:  # the child keeps its own copy of the descriptor
        process = vulcan_process(
            "extender",
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--webhook-port",
            "0",
            "--tls-cert-file",
            str(certs.cert_file),
            "--tls-private-key-file",
            str(certs.key_file),
            stderr=handle.fileno(),
        )
    announced_url(process, "vulcan extender listening on http://127.0.0.1:")
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith(WEBHOOK_LINE), line
    return process, line.split()[-1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("webhooks")
    kubeconfig = tmp / "kubeconfig"
    apiserver, api = sim_apiserver_process(kubeconfig)
    extender = None
    try:
        certs = write_serving_certs(tmp / "certs")
        extender, webhooks = start_extender(kubeconfig, certs, tmp / "extender.log")
        cluster = Cluster(api, kubeconfig, certs, webhooks, tmp)
        for name, reclaimable in (("root", False), ("default", True)):
            body = {"metadata": {"name": name}, "spec": {"weight": 1, "reclaimable": reclaimable}}
            assert cluster.call("POST", QUEUES, body)[0] == 201
        cluster.register(webhooks)
        for namespace in ("team-a", "team-b"):
            assert (
                cluster.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})[0]
                == 201
            )
        yield cluster
    finally:
        if extender is not None:
            stop_process(extender, timeout=10)
        stop_process(apiserver, timeout=10)


def eventually(what: str, check: Callable[[], bool], timeout: float = 15.0) -> None:
    """Poll the API until `check` holds (the extender's cache follows by watch)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# ------------------------------------------------------------------------------- hypernodes


def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"tier": tier, "members": members}}


def test_a_cyclic_or_invalid_hypernode_is_refused_with_the_field_and_reason(
    cluster: Cluster,
) -> None:
    def member(kind: str, name: str) -> dict[str, Any]:
        return {"type": kind, "selector": {"exactMatch": {"name": name}}}

    # n0 does not exist: allowed, and the admission warning says so (kubectl prints it).
    request = urllib.request.Request(
        cluster.api + HYPERNODES,
        data=json.dumps(hypernode("tor-a", 1, [member("Node", "n0")])).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201
        assert response.headers["Warning"] == '299 - "spec.members[0]: selects no node yet"'
    spine = hypernode("spine-a", 2, [member("HyperNode", "tor-a")])
    assert cluster.call("POST", HYPERNODES, spine)[0] == 201
    loop = hypernode("tor-a", 1, [member("HyperNode", "spine-a")])

    def refused() -> bool:
        current = cluster.call("GET", f"{HYPERNODES}/tor-a")[1]
        loop["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        status, body = cluster.call("PUT", f"{HYPERNODES}/tor-a", loop)
        assert status in (200, 403), body
        refused.body = body  # type: ignore[attr-defined]
        return status == 403

    # The webhook's informer sees spine-a by watch; until it does the update reads as valid.
    eventually("the cycle refused", refused)
    assert refused.body["message"] == (  # type: ignore[attr-defined]
        'hypernodes.topology.volcano.sh "tor-a" is forbidden: admission webhook '
        '"validatehypernode.volcano.sh" denied the request: spec.members[0]: member HyperNode '
        '"spine-a" has tier 2, not below this HyperNode\'s tier 1; spec.members: HyperNodes '
        "form a cycle: tor-a -> spine-a -> tor-a"
    )
    bad = hypernode("tor-b", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "n[("}}}])
    status, body = cluster.call("POST", HYPERNODES, bad)
    assert status == 403, body
    assert "spec.members[0].selector.regexMatch.pattern: " in body["message"]
    assert "member regexMatch pattern is invalid" in body["message"]


# ----------------------------------------------------------------------------------- queues


@pytest.mark.parametrize("name", ["default", "root"])
def test_builtin_queues_cannot_be_deleted(cluster: Cluster, name: str) -> None:
    status, body = cluster.call("DELETE", f"{QUEUES}/{name}")
    assert status == 403, body
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        f'queues.scheduling.volcano.sh "{name}" is forbidden: admission webhook '
        f'"validatequeue.volcano.sh" denied the request: `{name}` queue can not be deleted'
    )
    assert cluster.call("GET", f"{QUEUES}/{name}")[0] == 200


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_delete_queue_default_is_refused(cluster: Cluster) -> None:
    result = subprocess.run(
        [
            KUBECTL or "kubectl",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--cache-dir",
            str(cluster.tmp / "kubectl-cache"),
            "delete",
            "queue",
            "default",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'Error from server (Forbidden): queues.scheduling.volcano.sh "default" is forbidden: '
        'admission webhook "validatequeue.volcano.sh" denied the request: `default` queue can '
        "not be deleted"
    )


def test_a_queue_with_podgroups_cannot_be_deleted_until_they_are_gone(cluster: Cluster) -> None:
    assert cluster.call("POST", QUEUES, {"metadata": {"name": "research"}})[0] == 201
    for namespace, name in (("team-a", "train"), ("team-b", "eval")):
        group = {"metadata": {"name": name}, "spec": {"minMember": 1, "queue": "research"}}
        status, body = cluster.call("POST", podgroups(namespace), group)
        assert status == 201, body
    expected = (
        'queues.scheduling.volcano.sh "research" is forbidden: admission webhook '
        '"validatequeue.volcano.sh" denied the request: queue research can not be deleted '
        "because it has 2 PodGroups: team-a/train, team-b/eval"
    )
    # A dry run asks the webhook without deleting: wait until the extender has seen both.
    eventually(
        "the webhook to know both PodGroups",
        lambda: (
            cluster.call("DELETE", f"{QUEUES}/research?dryRun=All")[1].get("message") == expected
        ),
    )
    status, body = cluster.call("DELETE", f"{QUEUES}/research")
    assert (status, body["message"]) == (403, expected)
    for namespace, name in (("team-a", "train"), ("team-b", "eval")):
        assert cluster.call("DELETE", f"{podgroups(namespace)}/{name}")[0] == 200
    eventually(
        "the webhook to see the PodGroups go",
        lambda: cluster.call("DELETE", f"{QUEUES}/research?dryRun=All")[0] == 200,
    )
    assert cluster.call("DELETE", f"{QUEUES}/research")[0] == 200
    assert cluster.call("GET", f"{QUEUES}/research")[0] == 404


def test_an_invalid_queue_is_refused_with_volcanos_message(cluster: Cluster) -> None:
    queue = {
        "metadata": {"name": "greedy"},
        "spec": {"guarantee": {"resource": {"cpu": "2"}}, "deserved": {"cpu": "1"}},
    }
    status, body = cluster.call("POST", QUEUES, queue)
    assert status == 403
    assert body["message"] == (
        'queues.scheduling.volcano.sh "greedy" is forbidden: admission webhook '
        '"validatequeue.volcano.sh" denied the request: spec.deserved[cpu]: deserved[cpu]=1 '
        "must be >= guarantee[cpu]=2"
    )


def test_a_new_queue_gets_volcanos_defaults(cluster: Cluster) -> None:
    # weight 0 would fail the CRD's minimum of 1: the mutating webhook runs first and sets 1.
    status, body = cluster.call(
        "POST", QUEUES, {"metadata": {"name": "fresh"}, "spec": {"weight": 0}}
    )
    assert status == 201, body
    assert body["spec"]["weight"] == 1
    assert body["spec"]["reclaimable"] is True


# ------------------------------------------------------------------------- jobs, podgroups


def test_jobs_are_defaulted_and_checked_against_their_queue(cluster: Cluster) -> None:
    task = {
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }
    jobs = "/apis/batch.volcano.sh/v1alpha1/namespaces/team-a/jobs"
    status, body = cluster.call(
        "POST", jobs, {"metadata": {"name": "train"}, "spec": {"tasks": [task]}}
    )
    assert status == 201, body
    spec = body["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"]) == ("default", "volcano", 3)
    assert spec["minAvailable"] == 2 and spec["tasks"][0]["name"] == "default0"
    lost = {"metadata": {"name": "lost"}, "spec": {"queue": "nope", "tasks": [task]}}
    status, body = cluster.call("POST", jobs, lost)
    assert status == 403
    assert body["message"].endswith(
        "denied the request: spec.queue: unable to find job queue: queues.scheduling.volcano.sh "
        '"nope" not found'
    )


def test_cronjobs_are_checked_with_kubernetes_rules(cluster: Cluster) -> None:
    task = {
        "name": "main",
        "replicas": 1,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }
    cronjobs = "/apis/batch.volcano.sh/v1alpha1/namespaces/team-a/cronjobs"

    def cron(name: str, **spec: object) -> dict[str, object]:
        body = {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"tasks": [task]}}, **spec}
        return {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "CronJob",
            "metadata": {"name": name},
            "spec": body,
        }

    status, body = cluster.call("POST", cronjobs, cron("nightly", timeZone="Europe/Paris"))
    assert status == 201, body
    spec, version = body["spec"], body["metadata"]["resourceVersion"]
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Allow", False)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    status, body = cluster.call("POST", cronjobs, cron("tz", schedule="TZ=UTC 0 * * * *"))
    assert status == 403
    assert body["message"].endswith(
        'denied the request: spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or '
        "CRON_TZ in schedule, use timeZone field instead"
    )
    status, body = cluster.call("POST", cronjobs, cron("mars", timeZone="Mars/Olympus"))
    assert status == 403
    assert (
        'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus'
        in (body["message"])
    )
    status, body = cluster.call("POST", cronjobs, cron("bad", schedule="0 25 * * *"))
    assert status == 403
    assert "end of range (25) above maximum (23): 25" in body["message"]
    # An UPDATE is judged too.
    status, body = cluster.call(
        "PUT",
        f"{cronjobs}/nightly",
        {
            **cron("nightly", schedule="61 * * * *"),
            "metadata": {"name": "nightly", "resourceVersion": version},
        },
    )
    assert status == 403, body
    assert "end of range (61) above maximum (59): 61" in body["message"]


def test_a_podgroup_in_a_missing_queue_is_refused(cluster: Cluster) -> None:
    group = {"metadata": {"name": "orphan"}, "spec": {"minMember": 1, "queue": "nope"}}
    status, body = cluster.call("POST", podgroups("team-a"), group)
    assert status == 403
    assert body["message"] == (
        'podgroups.scheduling.volcano.sh "orphan" is forbidden: admission webhook '
        '"validatepodgroup.volcano.sh" denied the request: spec.queue: unable to find queue: '
        'queues.scheduling.volcano.sh "nope" not found'
    )


def test_a_podgroup_in_the_default_queue_moves_to_its_namespaces_queue(cluster: Cluster) -> None:
    assert cluster.call("POST", QUEUES, {"metadata": {"name": "science"}})[0] == 201
    namespace = {
        "metadata": {"name": "lab", "annotations": {"scheduling.volcano.sh/queue-name": "science"}}
    }
    assert cluster.call("POST", "/api/v1/namespaces", namespace)[0] == 201
    group = {"metadata": {"name": "g"}, "spec": {"minMember": 1}}
    # A dry run shows the mutation without storing: wait until the extender knows the namespace.
    eventually(
        "the webhook to know the namespace's queue",
        lambda: (
            cluster.call("POST", podgroups("lab") + "?dryRun=All", group)[1]["spec"]["queue"]
            == "science"
        ),
    )
    status, body = cluster.call("POST", podgroups("lab"), group)
    assert status == 201 and body["spec"]["queue"] == "science"


def test_a_waiting_gangs_members_are_created_behind_the_queue_allocation_gate(
    cluster: Cluster,
) -> None:
    """A pod naming a PodGroup that is not admitted (here: not created yet) gets the gate;
    one naming no PodGroup is not sent to vulcan at all (the matchConditions) and stays as
    it was written."""

    def created(name: str, annotations: dict[str, str]) -> list[str]:
        pod = {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}]},
        }
        status, body = cluster.call("POST", "/api/v1/namespaces/team-b/pods", pod)
        assert status == 201, body
        return [g["name"] for g in body["spec"].get("schedulingGates") or ()]

    assert created("member", {"scheduling.k8s.io/group-name": "later"}) == [
        "scheduling.volcano.sh/queue-allocation-gate"
    ]
    assert created("loner", {}) == []


# --------------------------------------------------------------------- the webhook is down


def test_failure_policy_when_vulcan_is_down_and_pods_never_wait(cluster: Cluster) -> None:
    extender, url = start_extender(cluster.kubeconfig, cluster.certs, cluster.tmp / "down.log")
    try:
        cluster.register(url, name="vulcan-down")
    finally:
        stop_process(extender, timeout=10)
    status, body = cluster.call("POST", QUEUES, {"metadata": {"name": "blocked"}})
    assert status == 500 and body["reason"] == "InternalError"
    port = url.rsplit(":", 1)[1]
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "mutatequeue.volcano.sh": failed to '
        f'call webhook: Post "{url}/queues/mutate?timeout=10s": dial tcp 127.0.0.1:{port}: '
        "connect: connection refused"
    )
    # Pods are covered by no webhook: creating one does not depend on vulcan at all.
    pod = {
        "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    assert cluster.call("POST", "/api/v1/namespaces/team-a/pods", pod)[0] == 201
    # A gang's member goes to the pod webhook, which ignores failures: created, ungated.
    member = {
        "metadata": {"name": "member", "annotations": {"scheduling.k8s.io/group-name": "g"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    status, body = cluster.call("POST", "/api/v1/namespaces/team-a/pods", member)
    assert status == 201 and not body["spec"].get("schedulingGates"), body
    # With failurePolicy Ignore the dead webhook is skipped (the live one still decides).
    for kind in ("mutating", "validating"):
        path = f"/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations/vulcan-down"
        status, config = cluster.call("GET", path)
        patch = [
            {"op": "replace", "path": f"/webhooks/{i}/failurePolicy", "value": "Ignore"}
            for i in range(len(config["webhooks"]))
        ]
        assert cluster.call("PATCH", path, patch, "application/json-patch+json")[0] == 200
    status, body = cluster.call("POST", QUEUES, {"metadata": {"name": "blocked"}})
    assert status == 201, body
    status, body = cluster.call("DELETE", f"{QUEUES}/default")
    assert status == 403 and "`default` queue can not be deleted" in body["message"]
    for kind in ("mutating", "validating"):
        path = f"/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations/vulcan-down"
        assert cluster.call("DELETE", path)[0] == 200
