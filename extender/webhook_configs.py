"""The Mutating/ValidatingWebhookConfiguration that register vulcan's webhooks (`webhooks.py`).

Volcano's set and defaults: queues mutate (CREATE) and validate (CREATE,
UPDATE, DELETE), podgroups mutate and validate (CREATE), jobs mutate and validate (CREATE,
UPDATE; Volcano mutates jobs on CREATE only), jobflows, cronjobs and hypernodes validate
(CREATE, UPDATE);
`failurePolicy: Fail`, `timeoutSeconds: 10`, `sideEffects: None`, and a namespaceSelector that
leaves `kube-system` (and vulcan's own namespace) alone.

One pod webhook of vulcan's own (`gatepod.vulcan.sh`, CREATE): a waiting gang's members are
created behind the queue-allocation gate (`webhook_pods`). Its matchConditions send only pods
that name a PodGroup and are not gated already, and it ignores failures with a short timeout: a
pod is never refused because vulcan is down, and pods of no gang never wait for vulcan.

`failurePolicy: Fail` is deliberate: a Queue deleted, or a Job admitted to a closed queue, while
the webhook is down cannot be undone afterwards, whereas a refused write is retried. The price
is that Volcano objects cannot be written while no extender replica serves.

Used by `vulcan sim up` (url clientConfig, generated CA) and rendered into
`manifests/deploy/webhooks.yaml` for real clusters (Service clientConfig, CA placeholder).
"""

from __future__ import annotations

from typing import Any

import yaml

from core.api import keys

GROUP_SCHEDULING = ("scheduling.volcano.sh", "v1beta1")
GROUP_BATCH = ("batch.volcano.sh", "v1alpha1")
GROUP_FLOW = ("flow.volcano.sh", "v1alpha1")
GROUP_TOPOLOGY = ("topology.volcano.sh", "v1alpha1")
CONFIGURATION_NAME = "vulcan-admission"
TIMEOUT_SECONDS = 10

# (webhook name, path, group/version, resource, operations); Volcano's webhook names.
MUTATING: tuple[tuple[str, str, tuple[str, str], str, tuple[str, ...]], ...] = (
    ("mutatequeue.volcano.sh", "/queues/mutate", GROUP_SCHEDULING, "queues", ("CREATE",)),
    ("mutatepodgroup.volcano.sh", "/podgroups/mutate", GROUP_SCHEDULING, "podgroups", ("CREATE",)),
    # UPDATE too (Volcano: CREATE only): a re-applied manifest lacks the defaults added at
    # create, and without them again an unchanged `kubectl apply` would read as a change.
    ("mutatejob.volcano.sh", "/jobs/mutate", GROUP_BATCH, "jobs", ("CREATE", "UPDATE")),
)
VALIDATING: tuple[tuple[str, str, tuple[str, str], str, tuple[str, ...]], ...] = (
    (
        "validatequeue.volcano.sh",
        "/queues/validate",
        GROUP_SCHEDULING,
        "queues",
        ("CREATE", "UPDATE", "DELETE"),
    ),
    (
        "validatepodgroup.volcano.sh",
        "/podgroups/validate",
        GROUP_SCHEDULING,
        "podgroups",
        ("CREATE",),
    ),
    ("validatejob.volcano.sh", "/jobs/validate", GROUP_BATCH, "jobs", ("CREATE", "UPDATE")),
    (
        "validatejobflow.volcano.sh",
        "/jobflows/validate",
        GROUP_FLOW,
        "jobflows",
        ("CREATE", "UPDATE"),
    ),
    (
        "validatecronjob.volcano.sh",
        "/cronjobs/validate",
        GROUP_BATCH,
        "cronjobs",
        ("CREATE", "UPDATE"),
    ),
    (
        "validatehypernode.volcano.sh",
        "/hypernodes/validate",
        GROUP_TOPOLOGY,
        "hypernodes",
        ("CREATE", "UPDATE"),
    ),
)


# A waiting gang's members behind the queue-allocation gate (extender/webhook_pods.py).
POD_GATE = ("gatepod.vulcan.sh", "/pods/mutate", ("", "v1"), "pods", ("CREATE",))
POD_GATE_TIMEOUT_SECONDS = 3
# Only pods that name a PodGroup (Volcano's annotation, or the coscheduling label) and are not
# behind the gate already are sent.
POD_GATE_CONDITIONS = (
    {
        "name": "names-a-podgroup",
        "expression": "(has(object.metadata.annotations) && "
        "'scheduling.k8s.io/group-name' in object.metadata.annotations) || "
        "(has(object.metadata.labels) && "
        "'scheduling.x-k8s.io/pod-group' in object.metadata.labels)",
    },
    # A pod made gated already (a Volcano Job's, by the job controller) has nothing to ask:
    # the call, a TLS round trip for every such pod, is spared the API server and vulcan.
    {
        "name": "not-gated-already",
        "expression": "!has(object.spec.schedulingGates) || "
        f"!object.spec.schedulingGates.exists(g, g.name == '{keys.QUEUE_ALLOCATION_GATE}')",
    },
)


# How many webhooks each configuration holds (mutating: Volcano's and the pod gate).
MUTATING_COUNT = len(MUTATING) + 1
VALIDATING_COUNT = len(VALIDATING)


def _pod_gate(**options: Any) -> dict[str, Any]:
    return {
        **_webhook(POD_GATE, **options),
        "failurePolicy": "Ignore",
        "timeoutSeconds": POD_GATE_TIMEOUT_SECONDS,
        "matchConditions": [dict(c) for c in POD_GATE_CONDITIONS],
        "reinvocationPolicy": "Never",
    }


def _client_config(
    path: str, url: str | None, service: dict[str, Any] | None, ca_bundle: str
) -> dict[str, Any]:
    config: dict[str, Any] = (
        {"url": url.rstrip("/") + path}
        if url is not None
        else {"service": {**(service or {}), "path": path}}
    )
    config["caBundle"] = ca_bundle
    return config


def _webhook(
    entry: tuple[str, str, tuple[str, str], str, tuple[str, ...]],
    *,
    url: str | None,
    service: dict[str, Any] | None,
    ca_bundle: str,
    excluded_namespaces: tuple[str, ...],
) -> dict[str, Any]:
    name, path, (group, version), resource, operations = entry
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": _client_config(path, url, service, ca_bundle),
        "rules": [
            {
                "operations": list(operations),
                "apiGroups": [group],
                "apiVersions": [version],
                "resources": [resource],
                "scope": "*",
            }
        ],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": list(excluded_namespaces),
                }
            ]
        },
    }


def webhook_configurations(
    *,
    ca_bundle: str,
    url: str | None = None,
    service: dict[str, Any] | None = None,
    excluded_namespaces: tuple[str, ...] = ("kube-system",),
) -> list[dict[str, Any]]:
    """[MutatingWebhookConfiguration, ValidatingWebhookConfiguration]; give the webhook
    server's base `url` (https://HOST:PORT) or a `service` ({namespace, name, port})."""
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url or service")
    options = {
        "url": url,
        "service": service,
        "ca_bundle": ca_bundle,
        "excluded_namespaces": excluded_namespaces,
    }
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION_NAME},
            "webhooks": [
                *(
                    {**_webhook(entry, **options), "reinvocationPolicy": "Never"}
                    for entry in MUTATING
                ),
                _pod_gate(**options),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION_NAME},
            "webhooks": [_webhook(entry, **options) for entry in VALIDATING],
        },
    ]


_DEPLOY_HEADER = """\
# vulcan's admission webhooks (Volcano's: queues, podgroups, jobs, jobflows, cronjobs,
# hypernodes; and vulcan's gatepod.vulcan.sh, which creates a waiting gang's pods behind the
# queue-allocation gate: only pods naming a PodGroup, failures ignored), for a real cluster.
# The extender serves them over HTTPS when started with --tls-cert-file and
# --tls-private-key-file (port --webhook-port, default 8443); a Service `vulcan-webhooks` in
# `vulcan-system` (port 443 -> 8443) points at the extender pods.
#
# Before applying, replace every caBundle with the base64 PEM of the CA that signed the
# extender's serving certificate (issued for vulcan-webhooks.vulcan-system.svc), e.g.
#   sed "s|REPLACE_WITH_BASE64_CA_PEM|$(base64 -w0 ca.crt)|" webhooks.yaml | kubectl apply -f -
# or let cert-manager inject it: annotate both configurations with
#   cert-manager.io/inject-ca-from: vulcan-system/<Certificate name>
# or, without cert-manager, remove the caBundle lines and run `vulcan webhook-certs`: it makes
# the certificate, stores it in the Secret vulcan-webhook-tls and sets every caBundle
# (manifests/components/cert-manager and components/self-signed-webhooks do these for you).
#
# failurePolicy Fail is deliberate: while no extender serves, Volcano objects cannot be
# written (and are retried) rather than admitted unchecked. `vulcan sim up --with-extender`
# registers the same configurations with a url clientConfig (see <state dir>/webhooks.yaml).
# Generated by extender/webhook_configs.py (deploy_manifest); a test keeps the two equal.
"""


def deploy_manifest() -> str:
    """`manifests/deploy/webhooks.yaml`: the configurations for a real cluster (Service
    clientConfig, a caBundle placeholder to replace)."""
    docs = webhook_configurations(
        service={"namespace": "vulcan-system", "name": "vulcan-webhooks", "port": 443},
        ca_bundle="REPLACE_WITH_BASE64_CA_PEM",
        excluded_namespaces=("kube-system", "vulcan-system"),
    )
    return _DEPLOY_HEADER + "---\n" + yaml.safe_dump_all(docs, sort_keys=False)
