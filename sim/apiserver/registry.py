"""The resource types the embedded API server serves: Kubernetes built-ins and the CRDs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

StatusOnCreate = Literal["keep", "drop", "pod"]


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    # What a create does with `status` (Kubernetes' PrepareForCreate): pods reset it, resources
    # with a status subresource drop it, the rest keep it.
    status_on_create: StatusOnCreate = "keep"
    custom: bool = False
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def qualified(self) -> str:
        """`pods` or `jobs.batch.volcano.sh`, as the API server names resources in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _builtin(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    subresources: Iterable[str] = ("status",),
    status_on_create: StatusOnCreate | None = None,
    categories: tuple[str, ...] = (),
) -> ResourceType:
    subs = frozenset(subresources)
    if status_on_create is None:
        status_on_create = "drop" if "status" in subs else "keep"
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        short_names=short,
        subresources=subs,
        status_on_create=status_on_create,
        categories=categories,
    )


# The kinds kube-apiserver puts in the `all` category (what `kubectl get all` lists).
_ALL = ("all",)

# What kube-scheduler, kubectl, the controllers and the embedded cluster use.
# Workloads with a replica count serve it through `scale` (autoscaling/v1 Scale).
_SCALABLE = ("status", "scale")

BUILTINS: tuple[ResourceType, ...] = (
    _builtin(
        "",
        "v1",
        "pods",
        "Pod",
        short=("po",),
        subresources=("status", "binding", "eviction"),
        status_on_create="pod",
        categories=_ALL,
    ),
    # Nodes may set their whole status on create (kubelets register that way).
    _builtin("", "v1", "nodes", "Node", namespaced=False, short=("no",), status_on_create="keep"),
    _builtin(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        short=("ns",),
        subresources=("status", "finalize"),
        status_on_create="keep",
    ),
    _builtin("", "v1", "services", "Service", short=("svc",), categories=_ALL),
    _builtin("", "v1", "endpoints", "Endpoints", short=("ep",), subresources=()),
    _builtin("", "v1", "configmaps", "ConfigMap", short=("cm",), subresources=()),
    _builtin("", "v1", "secrets", "Secret", subresources=()),
    _builtin("", "v1", "serviceaccounts", "ServiceAccount", short=("sa",), subresources=()),
    _builtin("", "v1", "events", "Event", short=("ev",), subresources=()),
    _builtin(
        "", "v1", "replicationcontrollers", "ReplicationController", short=("rc",), categories=_ALL
    ),
    _builtin("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False, short=("pv",)),
    _builtin("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",)),
    _builtin("", "v1", "resourcequotas", "ResourceQuota", short=("quota",)),
    _builtin("", "v1", "limitranges", "LimitRange", short=("limits",), subresources=()),
    _builtin(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short=("deploy",),
        subresources=_SCALABLE,
        categories=_ALL,
    ),
    _builtin(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        short=("rs",),
        subresources=_SCALABLE,
        categories=_ALL,
    ),
    _builtin(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        short=("sts",),
        subresources=_SCALABLE,
        categories=_ALL,
    ),
    _builtin("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), categories=_ALL),
    _builtin("apps", "v1", "controllerrevisions", "ControllerRevision", subresources=()),
    _builtin("batch", "v1", "jobs", "Job", categories=_ALL),
    _builtin("batch", "v1", "cronjobs", "CronJob", short=("cj",), categories=_ALL),
    _builtin("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",)),
    _builtin(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        short=("netpol",),
        subresources=(),
    ),
    _builtin(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        namespaced=False,
        short=("pc",),
        subresources=(),
    ),
    _builtin("coordination.k8s.io", "v1", "leases", "Lease", subresources=()),
    # API Priority and Fairness objects are stored (an install applies them); nothing queues by
    # them: the embedded API server serves every request at once.
    _builtin("flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema", namespaced=False),
    _builtin(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        namespaced=False,
    ),
    _builtin("events.k8s.io", "v1", "events", "Event", short=("ev",), subresources=()),
    _builtin(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        namespaced=False,
        short=("sc",),
        subresources=(),
    ),
    _builtin("storage.k8s.io", "v1", "csinodes", "CSINode", namespaced=False, subresources=()),
    _builtin("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False, subresources=()),
    _builtin("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", subresources=()),
    _builtin("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", namespaced=False),
    _builtin("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim"),
    _builtin(
        "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", subresources=()
    ),
    _builtin(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        "ResourceSlice",
        namespaced=False,
        subresources=(),
    ),
    _builtin(
        "resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False, subresources=()
    ),
    # RBAC objects are stored (an install applies them); nothing authorizes with them yet.
    _builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        namespaced=False,
        subresources=(),
    ),
    _builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
        subresources=(),
    ),
    _builtin("rbac.authorization.k8s.io", "v1", "roles", "Role", subresources=()),
    _builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", subresources=()),
    # Admission webhooks (sim/apiserver/admission.py calls them on writes, as kube-apiserver).
    _builtin(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
        subresources=(),
    ),
    _builtin(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
        subresources=(),
    ),
    _builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short=("crd", "crds"),
    ),
)


def resource_type_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """One ResourceType per served version of a CustomResourceDefinition document."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        subresources = frozenset((version.get("subresources") or {}).keys())
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                subresources=subresources,
                # A custom resource with a status subresource ignores status on create.
                status_on_create="drop" if "status" in subresources else "keep",
                custom=True,
                schema=(version.get("schema") or {}).get("openAPIV3Schema"),
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                categories=tuple(names.get("categories") or ()),
            )
        )
    return out


def default_crd_dir() -> Path | None:
    """`manifests/crds` of this checkout, when running from one."""
    candidate = Path(__file__).resolve().parents[2] / "manifests" / "crds"
    return candidate if candidate.is_dir() else None


def load_crds(directory: Path | None = None) -> list[dict[str, Any]]:
    """The CRD documents to serve: the YAML files in `directory` (default: the checkout's
    manifests/crds), or, for an installed wheel without them, the same CRDs generated from the
    models (a test keeps the two identical)."""
    directory = directory or default_crd_dir()
    if directory is None:
        from core.api.crds import all_crds

        return all_crds()
    files = tuple((str(path), path.stat().st_mtime_ns) for path in sorted(directory.glob("*.yaml")))
    # Parsing the YAML costs ~0.6 s; servers started again (tests, restarts) reuse it.
    return orjson.loads(_parse_crd_files(files))


@lru_cache(maxsize=8)
def _parse_crd_files(files: tuple[tuple[str, int], ...]) -> bytes:
    docs = []
    for path, _mtime in files:
        for doc in yaml.load_all(Path(path).read_text(), Loader=_LOADER):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    return orjson.dumps(docs)


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Registry:
    """Lookup of resource types by group/version/plural and by kind."""

    def __init__(self, types: Iterable[ResourceType]) -> None:
        self.types: list[ResourceType] = []
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for rtype in types:
            self.add(rtype)

    def add(self, rtype: ResourceType) -> None:
        self.types.append(rtype)
        self._by_path[(rtype.group, rtype.version, rtype.plural)] = rtype
        self._by_kind[(rtype.api_version, rtype.kind)] = rtype

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def group_versions(self) -> dict[str, list[str]]:
        """group -> versions, in registration order (core group under "")."""
        out: dict[str, list[str]] = {}
        for rtype in self.types:
            versions = out.setdefault(rtype.group, [])
            if rtype.version not in versions:
                versions.append(rtype.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self.types if t.group == group and t.version == version]
