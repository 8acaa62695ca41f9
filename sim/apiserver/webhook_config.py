"""admissionregistration.k8s.io/v1 Mutating/ValidatingWebhookConfiguration objects: the defaults
and validation kube-apiserver applies when they are written, and their compiled form (what
`admission.WebhookAdmission` matches requests against).

Messages are Kubernetes' (`pkg/apis/admissionregistration/validation`). One deliberate
difference: `clientConfig.service` is refused, because the embedded cluster has no Services and
no cluster networking to reach one; use `clientConfig.url` (https, as in Kubernetes).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sim.apiserver.selectors import LabelSelector, SelectorError, label_selector_from_dict

Cause = dict[str, str]

MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"
GROUP = "admissionregistration.k8s.io"

OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES = ("*", "Cluster", "Namespaced")
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
SIDE_EFFECTS = ("None", "NoneOnDryRun")  # v1 accepts only side-effect-free webhooks
REINVOCATION = ("IfNeeded", "Never")
REVIEW_VERSIONS = ("v1", "v1beta1")  # what this server can send, in preference order
DEFAULT_TIMEOUT = 10
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _required(field: str, detail: str = "") -> Cause:
    message = f"Required value: {detail}" if detail else "Required value"
    return {"reason": "FieldValueRequired", "field": field, "message": message}


def _invalid(field: str, value: Any, detail: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else _go_list(value)
    return {
        "reason": "FieldValueInvalid",
        "field": field,
        "message": f"Invalid value: {shown}: {detail}",
    }


def _unsupported(field: str, value: Any, supported: tuple[str, ...]) -> Cause:
    choices = ", ".join(f'"{s}"' for s in supported)
    return {
        "reason": "FieldValueNotSupported",
        "field": field,
        "message": f'Unsupported value: "{value}": supported values: {choices}',
    }


def _go_list(value: Any) -> str:
    if isinstance(value, list):
        return "[]string{" + ", ".join(f'"{v}"' for v in value) + "}"
    return str(value)


# ------------------------------------------------------------------------------ defaults


def set_defaults(obj: dict[str, Any]) -> None:
    """admissionregistration/v1 defaulting, in place (what `kubectl get -o yaml` then shows)."""
    mutating = obj.get("kind") == MUTATING
    for hook in obj.get("webhooks") or ():
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)


# ---------------------------------------------------------------------------- validation


def validate(obj: dict[str, Any]) -> list[Cause]:
    """The causes of a 422 for a (defaulted) configuration; empty when it is valid."""
    mutating = obj.get("kind") == MUTATING
    hooks = obj.get("webhooks") or []
    if not isinstance(hooks, list):
        return [_invalid("webhooks", "object", "must be a list")]
    causes: list[Cause] = []
    names: set[str] = set()
    for index, hook in enumerate(hooks):
        where = f"webhooks[{index}]"
        if not isinstance(hook, dict):
            causes.append(_invalid(where, "object", "must be an object"))
            continue
        causes += _hook_causes(hook, where, mutating)
        name = hook.get("name")
        if isinstance(name, str) and name:
            if name in names:
                causes.append(
                    {
                        "reason": "FieldValueDuplicate",
                        "field": f"{where}.name",
                        "message": f'Duplicate value: "{name}"',
                    }
                )
            names.add(name)
    return causes


def _hook_causes(hook: dict[str, Any], where: str, mutating: bool) -> list[Cause]:
    causes = _name_causes(hook.get("name"), f"{where}.name")
    for r_index, rule in enumerate(hook.get("rules") or ()):
        causes += _rule_causes(rule, f"{where}.rules[{r_index}]")
    for key, allowed in (
        ("failurePolicy", FAILURE_POLICIES),
        ("matchPolicy", MATCH_POLICIES),
        *((("reinvocationPolicy", REINVOCATION),) if mutating else ()),
    ):
        if hook.get(key) not in allowed:
            causes.append(_unsupported(f"{where}.{key}", hook.get(key), allowed))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        causes.append(_required(f"{where}.sideEffects", "must specify one of None, NoneOnDryRun"))
    elif side_effects not in SIDE_EFFECTS:
        causes.append(_unsupported(f"{where}.sideEffects", side_effects, SIDE_EFFECTS))
    timeout = hook.get("timeoutSeconds")
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 30:
        causes.append(
            _invalid(
                f"{where}.timeoutSeconds",
                timeout,
                "the timeout value must be between 1 and 30 seconds",
            )
        )
    for key in ("namespaceSelector", "objectSelector"):
        try:
            label_selector_from_dict(hook.get(key) or {})
        except SelectorError as exc:
            causes.append(_invalid(f"{where}.{key}", "object", str(exc)))
    causes += _client_config_causes(hook.get("clientConfig") or {}, f"{where}.clientConfig")
    causes += _review_version_causes(
        hook.get("admissionReviewVersions"), f"{where}.admissionReviewVersions"
    )
    if hook.get("matchConditions"):
        causes += _match_condition_causes(hook["matchConditions"], f"{where}.matchConditions")
    return causes


def _name_causes(name: Any, field: str) -> list[Cause]:
    """IsFullyQualifiedName: a DNS subdomain with at least three segments."""
    if not isinstance(name, str) or not name:
        return [_required(field)]
    causes = []
    if len(name.split(".")) < 3:
        causes.append(
            _invalid(
                field, name, "should be a domain with at least three segments separated by dots"
            )
        )
    if len(name) > 253 or not all(_DNS_LABEL.match(part) for part in name.split(".")):
        causes.append(
            _invalid(
                field,
                name,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character "
                "(e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            )
        )
    return causes


def _rule_causes(rule: Any, where: str) -> list[Cause]:
    if not isinstance(rule, dict):
        return [_invalid(where, "object", "must be an object")]
    causes: list[Cause] = []
    operations = rule.get("operations") or []
    causes += _wildcard_list_causes(operations, f"{where}.operations", "operations")
    for index, operation in enumerate(operations):
        if operation not in OPERATIONS:
            causes.append(_unsupported(f"{where}.operations[{index}]", operation, OPERATIONS))
    causes += _wildcard_list_causes(rule.get("apiGroups"), f"{where}.apiGroups", "API groups")
    versions = rule.get("apiVersions") or []
    causes += _wildcard_list_causes(versions, f"{where}.apiVersions", "API versions")
    for index, version in enumerate(versions):
        if not version:
            causes.append(_required(f"{where}.apiVersions[{index}]"))
    causes += _resources_causes(rule.get("resources") or [], f"{where}.resources")
    if rule.get("scope") not in SCOPES:
        causes.append(_unsupported(f"{where}.scope", rule.get("scope"), SCOPES))
    return causes


def _wildcard_list_causes(values: Any, field: str, what: str) -> list[Cause]:
    """A rule list that is required, and where '*' stands alone."""
    if not values:
        return [_required(field)]
    if len(values) > 1 and "*" in values:
        return [_invalid(field, values, f"if '*' is present, must not specify other {what}")]
    return []


def _resources_causes(resources: list[str], field: str) -> list[Cause]:
    if not resources:
        return [_required(field)]
    causes: list[Cause] = []
    wildcard_sub: set[str] = set()  # x/*
    wildcard_res: set[str] = set()  # */x
    plain = False
    for index, entry in enumerate(resources):
        if not entry:
            causes.append(_required(f"{field}[{index}]"))
            continue
        if "/" not in entry:
            plain = plain or entry != "*"
            continue
        res, sub = entry.split("/", 1)
        if res in wildcard_sub:
            causes.append(
                _invalid(
                    f"{field}[{index}]", entry, f"if '{res}/*' is present, must not specify {entry}"
                )
            )
        if sub in wildcard_res:
            causes.append(
                _invalid(
                    f"{field}[{index}]", entry, f"if '*/{sub}' is present, must not specify {entry}"
                )
            )
        if sub == "*":
            wildcard_sub.add(res)
        if res == "*":
            wildcard_res.add(sub)
    if len(resources) > 1 and "*/*" in resources:
        causes.append(
            _invalid(field, resources, "if '*/*' is present, must not specify other resources")
        )
    if "*" in resources and plain:
        causes.append(
            _invalid(
                field,
                resources,
                "if '*' is present, must not specify other resources without subresources",
            )
        )
    return causes


def _client_config_causes(config: dict[str, Any], where: str) -> list[Cause]:
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [_required(where, "exactly one of url or service is required")]
    causes: list[Cause] = []
    if service is not None:
        # A real API server resolves the Service through cluster networking; the embedded
        # cluster has neither, so such a webhook could never be called.
        causes.append(
            {
                "reason": "FieldValueForbidden",
                "field": f"{where}.service",
                "message": "Forbidden: the embedded API server has no Services or cluster "
                "networking to reach a webhook through; use clientConfig.url "
                "(https://HOST:PORT/PATH) instead",
            }
        )
    else:
        causes += _url_causes(url, f"{where}.url")
    bundle = config.get("caBundle")
    if bundle:
        try:
            base64.b64decode(bundle, validate=True)
        except (binascii.Error, ValueError, TypeError):
            causes.append(_invalid(f"{where}.caBundle", "<bytes>", "must be base64-encoded PEM"))
    return causes


def _url_causes(url: Any, field: str) -> list[Cause]:
    form = "; desired format: https://host[/path]"
    if not isinstance(url, str):
        return [_required(field, "url must be a valid URL" + form)]
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return [_required(field, f"url must be a valid URL: {exc}{form}")]
    causes = []
    if parts.scheme != "https":
        causes.append(
            _invalid(field, parts.scheme, "'https' is the only allowed URL scheme" + form)
        )
    if not parts.netloc or not parts.hostname:
        causes.append(_invalid(field, "", "host must be provided" + form))
    if parts.username is not None:
        causes.append(
            _invalid(field, parts.username, "user information is not permitted in the URL")
        )
    if parts.fragment:
        causes.append(_invalid(field, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        causes.append(_invalid(field, parts.query, "query parameters are not permitted in the URL"))
    return causes


def _review_version_causes(versions: Any, field: str) -> list[Cause]:
    if not versions:
        return [_required(field, "must specify one of v1, v1beta1")]
    causes: list[Cause] = []
    seen: set[str] = set()
    for index, version in enumerate(versions):
        if version in seen:
            causes.append(_invalid(f"{field}[{index}]", version, "duplicate version"))
            continue
        seen.add(version)
        if not isinstance(version, str) or not _DNS1035.match(version):
            causes.append(
                _invalid(
                    f"{field}[{index}]",
                    version,
                    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                    "start with an alphabetic character, and end with an alphanumeric character",
                )
            )
    if not seen & set(REVIEW_VERSIONS):
        causes.append(_invalid(field, list(versions), "must include at least one of v1, v1beta1"))
    return causes


def _match_condition_causes(conditions: Any, field: str) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    for index, condition in enumerate(conditions if isinstance(conditions, list) else []):
        where = f"{field}[{index}]"
        name = condition.get("name") if isinstance(condition, dict) else None
        expression = condition.get("expression") if isinstance(condition, dict) else None
        if not name:
            causes.append(_required(f"{where}.name"))
        elif name in names:
            causes.append(
                {
                    "reason": "FieldValueDuplicate",
                    "field": f"{where}.name",
                    "message": f'Duplicate value: "{name}"',
                }
            )
        names.add(name or "")
        if not expression:
            causes.append(_required(f"{where}.expression"))
            continue
        try:
            compile_condition(expression)
        except Exception as exc:  # celpy raises its own error types
            causes.append(_invalid(f"{where}.expression", expression, f"compilation failed: {exc}"))
    return causes


def compile_condition(expression: str) -> Any:
    import celpy  # the embedded API server's CEL (also used for CRD validation rules)

    env = celpy.Environment()
    return env.program(env.compile(expression))


# ------------------------------------------------------------------------------ compiled


@dataclass(frozen=True, slots=True)
class Rule:
    operations: frozenset[str]
    groups: frozenset[str]
    versions: frozenset[str]
    resources: tuple[tuple[str, str], ...]  # (resource, subresource); "*" wildcards
    scope: str

    def matches(
        self, group: str, version: str, plural: str, sub: str, operation: str, namespaced: bool
    ) -> bool:
        """Kubernetes' rules.Matcher (the request's scope is known from its resource type)."""
        if "*" not in self.operations and operation not in self.operations:
            return False
        if "*" not in self.groups and group not in self.groups:
            return False
        if "*" not in self.versions and version not in self.versions:
            return False
        if self.scope != "*" and self.scope != ("Namespaced" if namespaced else "Cluster"):
            return False
        return any(
            (res == "*" or res == plural) and (s == "*" or s == sub) for res, s in self.resources
        )


@dataclass(frozen=True, slots=True)
class Webhook:
    """One webhook of one configuration, ready to match and call."""

    name: str
    configuration: str
    mutating: bool
    rules: tuple[Rule, ...]
    namespace_selector: LabelSelector
    object_selector: LabelSelector
    failure_policy: str
    side_effects: str
    timeout: int
    url: str
    ca_bundle: str  # PEM text; "" = the system's trusted roots
    review_version: str  # the AdmissionReview version sent ("v1" when the webhook accepts it)
    match_conditions: tuple[tuple[str, Any], ...] = ()

    @property
    def ignore_failures(self) -> bool:
        return self.failure_policy == "Ignore"


def _split_resource(entry: str) -> tuple[str, str]:
    res, _, sub = entry.partition("/")
    return res, sub


def compile_configuration(obj: dict[str, Any]) -> list[Webhook]:
    """The webhooks of one stored (valid, defaulted) configuration."""
    mutating = obj.get("kind") == MUTATING
    name = obj["metadata"]["name"]
    out = []
    for hook in obj.get("webhooks") or ():
        rules = tuple(
            Rule(
                operations=frozenset(rule.get("operations") or ()),
                groups=frozenset(rule.get("apiGroups") or ()),
                versions=frozenset(rule.get("apiVersions") or ()),
                resources=tuple(_split_resource(r) for r in rule.get("resources") or ()),
                scope=rule.get("scope") or "*",
            )
            for rule in hook.get("rules") or ()
        )
        bundle = (hook.get("clientConfig") or {}).get("caBundle") or ""
        accepted = [v for v in REVIEW_VERSIONS if v in (hook.get("admissionReviewVersions") or ())]
        # The webhook's own order of preference decides, as kube-apiserver picks the first
        # version in its list that it understands.
        preferred = next(
            (v for v in hook.get("admissionReviewVersions") or () if v in REVIEW_VERSIONS),
            accepted[0] if accepted else "v1",
        )
        out.append(
            Webhook(
                name=hook["name"],
                configuration=name,
                mutating=mutating,
                rules=rules,
                namespace_selector=label_selector_from_dict(hook.get("namespaceSelector") or {}),
                object_selector=label_selector_from_dict(hook.get("objectSelector") or {}),
                failure_policy=hook.get("failurePolicy") or "Fail",
                side_effects=hook.get("sideEffects") or "None",
                timeout=int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT),
                url=hook["clientConfig"]["url"],
                ca_bundle=base64.b64decode(bundle).decode("utf-8", "replace") if bundle else "",
                review_version=preferred,
                match_conditions=tuple(
                    (c["name"], compile_condition(c["expression"]))
                    for c in hook.get("matchConditions") or ()
                ),
            )
        )
    return out
