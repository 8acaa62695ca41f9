"""kube-scheduler's VolumeBinding and VolumeZone plugins, for the claims a pod mounts.

PreFilter (VolumeBinding): a claim that does not exist (`persistentvolumeclaim "data" not
found`, or for a generic ephemeral volume `waiting for ephemeral volume controller to create the
persistentvolumeclaim "p-scratch"`), is being deleted, or is unbound in a class that binds
immediately (`pod has unbound immediate PersistentVolumeClaims`) keeps the pod off every node.
Filter: a bound claim's PersistentVolume pins the pod through its `spec.nodeAffinity` (`node(s)
had volume node affinity conflict`, VolumeBinding) and its zone and region labels (`node(s) had
no available volume zone`, VolumeZone; a label's value may list several zones joined by `__`).

Not modelled: dynamic provisioning and binding. An unbound claim of a `WaitForFirstConsumer`
class does not restrict the pod's nodes (kube-scheduler would pick a node and ask the
provisioner; nothing provisions in the embedded cluster), and PersistentVolumes are not matched
to unbound claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.kube.client import Resource
from sim.scheduler.framework import UNRESOLVABLE, SchedNode, SchedPod, _term_matches

PVS = Resource("", "v1", "persistentvolumes", False, "PersistentVolume")
PVCS = Resource("", "v1", "persistentvolumeclaims", True, "PersistentVolumeClaim")
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", False, "StorageClass")

NODE_CONFLICT = "node(s) had volume node affinity conflict"
NO_ZONE = "node(s) had no available volume zone"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
PV_MISSING = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
TOPOLOGY_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)


class VolumeObject:
    """Informer record for claims, volumes and storage classes: the raw object."""

    __slots__ = ("key", "obj", "rv")

    def __init__(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.obj = obj
        self.key = f"{meta.get('namespace') or ''}/{meta['name']}"
        self.rv: str = meta.get("resourceVersion", "")


class PreFilterError(Exception):
    """A PreFilter rejection: the pod fits no node, for one reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class VolumeCheck:
    """The bound claims' PersistentVolumes, judged per node."""

    def __init__(self, volumes: list[dict[str, Any]]) -> None:
        self.volumes = volumes

    @classmethod
    def build(
        cls,
        pod: SchedPod,
        claims: Mapping[str, VolumeObject],
        volumes: Mapping[str, VolumeObject],
        classes: Mapping[str, VolumeObject],
    ) -> VolumeCheck | None:
        """None when the pod mounts no claim; raises PreFilterError as VolumeBinding's
        PreFilter rejects."""
        if not pod.claims:
            return None
        bound: list[dict[str, Any]] = []
        unbound_immediate = False
        for name, ephemeral in pod.claims:
            record = claims.get(f"{pod.namespace}/{name}")
            if record is None:
                if ephemeral:
                    raise PreFilterError(
                        "waiting for ephemeral volume controller to create the "
                        f'persistentvolumeclaim "{name}"'
                    )
                raise PreFilterError(f'persistentvolumeclaim "{name}" not found')
            claim = record.obj
            if claim["metadata"].get("deletionTimestamp"):
                raise PreFilterError(f'persistentvolumeclaim "{name}" is being deleted')
            volume_name = (claim.get("spec") or {}).get("volumeName")
            if volume_name:
                volume = volumes.get(f"/{volume_name}")
                bound.append(volume.obj if volume is not None else {})
                continue
            class_name = (claim.get("spec") or {}).get("storageClassName") or ""
            storage_class = classes.get(f"/{class_name}") if class_name else None
            mode = (storage_class.obj if storage_class else {}).get("volumeBindingMode")
            if mode != "WaitForFirstConsumer":
                unbound_immediate = True
        if unbound_immediate:
            raise PreFilterError(UNBOUND_IMMEDIATE)
        return cls(bound)

    def filter(self, node: SchedNode) -> tuple[str, list[str]] | None:
        if any(not volume for volume in self.volumes):
            return UNRESOLVABLE, [PV_MISSING]
        for volume in self.volumes:
            required = (
                ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")
            ) or {}
            terms = required.get("nodeSelectorTerms")
            if terms is not None and not any(_term_matches(t, node) for t in terms):
                return UNRESOLVABLE, [NODE_CONFLICT]
        if not any(key in node.labels for key in TOPOLOGY_LABELS):
            return None  # VolumeZone: a node without topology labels is not judged
        for volume in self.volumes:
            labels = volume["metadata"].get("labels") or {}
            for key in TOPOLOGY_LABELS:
                if key in labels and node.labels.get(key) not in labels[key].split("__"):
                    return UNRESOLVABLE, [NO_ZONE]
        return None
