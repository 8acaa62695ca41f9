"""`KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1), read as kube-scheduler reads it.

The stand-in takes the same file a real kube-scheduler would: top-level `extenders`,
`percentageOfNodesToScore`, `podInitialBackoffSeconds`, `podMaxBackoffSeconds`,
`clientConnection`, and `profiles[].schedulerName` (+ per-profile `percentageOfNodesToScore`).
kube-scheduler decodes its configuration strictly, so unknown or mis-cased keys are errors here
too; the rules of `validateExtenders` are applied. Keys the stand-in accepts but does not act on
(plugins, leaderElection, ...) are listed in `IGNORED_KEYS`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.durations import parse_duration

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_HTTP_TIMEOUT = 5.0

_TOP_KEYS = {
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "healthzBindAddress",
    "metricsBindAddress",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
}
_PROFILE_KEYS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
_EXTENDER_KEYS = {
    "urlPrefix",
    "filterVerb",
    "preemptVerb",
    "prioritizeVerb",
    "weight",
    "bindVerb",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
}
_CLIENT_KEYS = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
# Accepted (a real configuration may carry them) but without effect in the stand-in.
IGNORED_KEYS = ("parallelism", "leaderElection", "plugins", "pluginConfig", "tlsConfig")
_EXTENDED_RESOURCE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


class ConfigError(ValueError):
    """A configuration kube-scheduler would refuse, with the field path in the message."""


@dataclass(frozen=True, slots=True)
class ManagedResource:
    name: str
    ignored_by_scheduler: bool = False


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    preempt_verb: str = ""
    bind_verb: str = ""
    weight: int = 0
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    node_cache_capable: bool = False
    ignorable: bool = False
    enable_https: bool = False
    managed_resources: tuple[ManagedResource, ...] = ()

    def url(self, verb: str) -> str:
        # kube-scheduler strips every trailing slash of the prefix, then appends "/" + verb.
        return self.url_prefix.rstrip("/") + "/" + verb


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    percentage_of_nodes_to_score: int = 0  # 0: adaptive
    profile_percentages: Mapping[str, int] = field(default_factory=dict)
    extenders: tuple[ExtenderConfig, ...] = ()
    pod_initial_backoff: float = 1.0
    pod_max_backoff: float = 10.0
    qps: float = 50.0
    burst: int = 100

    def percentage_for(self, scheduler_name: str) -> int:
        return self.profile_percentages.get(scheduler_name) or self.percentage_of_nodes_to_score

    @property
    def ignored_resources(self) -> frozenset[str]:
        """Extended resources the NodeResourcesFit filter skips (managedResources with
        ignoredByScheduler)."""
        return frozenset(
            r.name for e in self.extenders for r in e.managed_resources if r.ignored_by_scheduler
        )


def _unknown(section: Mapping[str, Any], allowed: set[str], path: str) -> None:
    for key in section:
        if key not in allowed:
            raise ConfigError(f'{path}: strict decoding error: unknown field "{key}"')


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: must be an object")
    return value


def _percentage(value: Any, path: str) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100:
        raise ConfigError(f"{path}: Invalid value: {value!r}: not in valid range [0-100]")
    return value


def _duration(value: Any, path: str) -> float:
    if value in (None, "", 0):
        return DEFAULT_HTTP_TIMEOUT  # 0 / unset means the 5 s default at runtime
    if isinstance(value, int) and not isinstance(value, bool):
        return value / 1e9  # the legacy Policy form: integer nanoseconds
    try:
        return parse_duration(str(value))
    except Exception as exc:
        raise ConfigError(f"{path}: invalid duration {value!r}") from exc


def _extender(raw: Any, path: str) -> ExtenderConfig:
    raw = _mapping(raw, path)
    _unknown(raw, _EXTENDER_KEYS, path)
    url_prefix = raw.get("urlPrefix")
    if not isinstance(url_prefix, str) or not url_prefix:
        raise ConfigError(f"{path}.urlPrefix: Required value")
    weight = raw.get("weight", 0) or 0
    if not isinstance(weight, int) or isinstance(weight, bool):
        raise ConfigError(f"{path}.weight: must be an integer")
    if raw.get("prioritizeVerb") and weight <= 0:
        raise ConfigError(f"{path}.weight: Invalid value: {weight}: must have a positive weight")
    managed: list[ManagedResource] = []
    for j, item in enumerate(raw.get("managedResources") or ()):
        item = _mapping(item, f"{path}.managedResources[{j}]")
        name = item.get("name")
        if not isinstance(name, str) or not _EXTENDED_RESOURCE.match(name):
            raise ConfigError(
                f"{path}.managedResources[{j}].name: Invalid value: {name!r}: "
                "must be a fully-qualified extended resource name"
            )
        if name.startswith("kubernetes.io/") or name.startswith("requests."):
            raise ConfigError(
                f"{path}.managedResources[{j}].name: Invalid value: {name!r}: "
                "is not a valid extended resource name"
            )
        managed.append(ManagedResource(name, bool(item.get("ignoredByScheduler", False))))
    verbs = {}
    for key in ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb"):
        value = raw.get(key) or ""
        if not isinstance(value, str):
            raise ConfigError(f"{path}.{key}: must be a string")
        verbs[key] = value
    return ExtenderConfig(
        url_prefix=url_prefix,
        filter_verb=verbs["filterVerb"],
        prioritize_verb=verbs["prioritizeVerb"],
        preempt_verb=verbs["preemptVerb"],
        bind_verb=verbs["bindVerb"],
        weight=weight,
        http_timeout=_duration(raw.get("httpTimeout"), f"{path}.httpTimeout"),
        node_cache_capable=bool(raw.get("nodeCacheCapable", False)),
        ignorable=bool(raw.get("ignorable", False)),
        enable_https=bool(raw.get("enableHTTPS", False)),
        managed_resources=tuple(managed),
    )


def parse_config(doc: Any) -> SchedulerConfig:
    """A SchedulerConfig from a decoded KubeSchedulerConfiguration document. Raises ConfigError."""
    doc = _mapping(doc, "configuration")
    if doc.get("apiVersion") != API_VERSION:
        raise ConfigError(
            f"apiVersion: Unsupported value: {doc.get('apiVersion')!r}: supported values: "
            f'"{API_VERSION}"'
        )
    if doc.get("kind") != KIND:
        raise ConfigError(
            f'kind: Unsupported value: {doc.get("kind")!r}: supported values: "{KIND}"'
        )
    _unknown(doc, _TOP_KEYS, "configuration")
    names: list[str] = []
    per_profile: dict[str, int] = {}
    for i, profile in enumerate(doc.get("profiles") or ()):
        path = f"profiles[{i}]"
        profile = _mapping(profile, path)
        _unknown(profile, _PROFILE_KEYS, path)
        name = profile.get("schedulerName") or DEFAULT_SCHEDULER_NAME
        if name in names:
            raise ConfigError(f"{path}.schedulerName: Duplicate value: {name!r}")
        names.append(name)
        if profile.get("percentageOfNodesToScore") is not None:
            per_profile[name] = _percentage(
                profile["percentageOfNodesToScore"], f"{path}.percentageOfNodesToScore"
            )
    extenders = [_extender(e, f"extenders[{i}]") for i, e in enumerate(doc.get("extenders") or ())]
    if sum(1 for e in extenders if e.bind_verb) > 1:
        raise ConfigError(
            "extenders: Invalid value: found 2 extenders implementing bind: only one "
            "extender can implement bind"
        )
    seen: set[str] = set()
    for i, ext in enumerate(extenders):
        for r in ext.managed_resources:
            if r.name in seen:
                raise ConfigError(f"extenders[{i}].managedResources: Duplicate value: {r.name!r}")
            seen.add(r.name)
    # kube-scheduler moves ignorable extenders behind the others (k/k#78258).
    extenders.sort(key=lambda e: e.ignorable)
    client = _mapping(doc.get("clientConnection") or {}, "clientConnection")
    _unknown(client, _CLIENT_KEYS, "clientConnection")
    initial = float(doc.get("podInitialBackoffSeconds", 1) or 1)
    maximum = float(doc.get("podMaxBackoffSeconds", 10) or 10)
    if maximum < initial:
        raise ConfigError(
            "podMaxBackoffSeconds: Invalid value: must be greater than or equal to "
            "podInitialBackoffSeconds"
        )
    return SchedulerConfig(
        scheduler_names=tuple(names) or (DEFAULT_SCHEDULER_NAME,),
        percentage_of_nodes_to_score=_percentage(
            doc.get("percentageOfNodesToScore"), "percentageOfNodesToScore"
        ),
        profile_percentages=per_profile,
        extenders=tuple(extenders),
        pod_initial_backoff=initial,
        pod_max_backoff=maximum,
        qps=float(client.get("qps", 50) or 50),
        burst=int(client.get("burst", 100) or 100),
    )


def load_config(path: str | Path | None) -> SchedulerConfig:
    if path is None:
        return SchedulerConfig()
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    try:
        return parse_config(doc)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


# The profiles of the stand-in `vulcan sim up` runs: both call its extenders.
SIM_PROFILES: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME, "volcano")


def sim_config(
    extender_url: str | None,
    *,
    scheduler_names: tuple[str, ...] = SIM_PROFILES,
    filter_timeout: str = "5s",
    bind_timeout: str = "90s",
    qps: int = 5000,
    markers: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The KubeSchedulerConfiguration `vulcan sim up` uses: JSON content types and no leader
    election (so a real kube-scheduler can use the same file against the embedded API server),
    and, with an extender, the two entries docs/architecture.md describes.

    `markers` (filter entry's, bind entry's): the cluster-scheduler install, where each entry
    is called only for pods that request its marker (`managedResources`, ignored by the
    scheduler's own fit)."""
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "leaderElection": {"leaderElect": False},
        "clientConnection": {
            "contentType": "application/json",
            "acceptContentTypes": "application/json",
            "qps": qps,
            "burst": qps * 2,
        },
        "profiles": [{"schedulerName": name} for name in scheduler_names],
    }
    if extender_url:
        prefix = extender_url.rstrip("/") + "/v1"
        doc["extenders"] = [
            {
                "urlPrefix": prefix,
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "preemptVerb": "preempt",
                "weight": 1,
                "nodeCacheCapable": True,
                "ignorable": False,
                "httpTimeout": filter_timeout,
            },
            {
                "urlPrefix": prefix,
                "bindVerb": "bind",
                "nodeCacheCapable": True,
                "ignorable": False,
                "httpTimeout": bind_timeout,
            },
        ]
        for entry, marker in zip(doc["extenders"], markers or (), strict=False):
            entry["managedResources"] = [{"name": marker, "ignoredByScheduler": True}]
    return doc
